"""An identity's From: the shape the API's document states as its pattern and `parse_input`
checks first, and the From as the API shows it back.
"""

from __future__ import annotations

MAX_FROM_NAME = 200
# The From's shape, which the API's document states as its pattern (written so that JSON
# Schema's ECMA regular expressions read it as Python does): an address alone, or after a
# display name (plain, or in double quotes when it holds a comma or the like) in angle
# brackets. The address: a dot-atom local part, then a domain of letters, digits and hyphens
# with a dot and a top-level name that is not reserved (localhost, .test, .local, ...).
# normalise_email then checks what a pattern cannot (at most 64 characters before the @).
_ATEXT = r"[A-Za-z0-9!#$%&'*+/=?^_`{|}~-]"
_LABEL = r"[A-Za-z0-9](?:[A-Za-z0-9-]{0,61}[A-Za-z0-9])?"
_ADDRESS = (rf"{_ATEXT}{{1,64}}(?:\.{_ATEXT}{{1,64}}){{0,3}}@(?:{_LABEL}\.){{1,8}}"
            r"(?!(?:arpa|invalid|local|localhost|onion|test)\b)[A-Za-z]{2,63}")
_DISPLAY = r'(?:[^\x00-\x1f\x7f"(),:;<>@\[\\\]]{0,200}|"[^\x00-\x1f\x7f"\\]{0,200}" ?)'
FROM_PATTERN = rf"^ *(?:{_ADDRESS}|{_DISPLAY}<{_ADDRESS}>) *$"
MAX_FROM = MAX_FROM_NAME + 330


def shown_from(name: str, email: str) -> str:
    """The From as an owner writes it and `parse_input` reads it back to the same name and
    address: the name as typed (in double quotes when it holds a comma or the like), not the
    RFC 2047 encoded word the message header carries for a name that is not ASCII."""
    if not name:
        return email
    if any(c in '()<>@,;:\\".[]' for c in name):
        name = '"' + name.replace("\\", "").replace('"', "") + '"'
    return f"{name} <{email}>"
