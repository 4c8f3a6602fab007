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
# International addresses (RFC 6531) too: letters outside ASCII in the local part and the
# domain (its U-label; an A-label is ASCII already), from the Latin, Greek, Cyrillic and CJK
# blocks whose every letter IDNA 2008 and email_validator take and normalise to one letter
# of the same set (not ĳ, which becomes "ij"), so the From shown back matches too (`_INTL`,
# checked letter by letter in tests/webapp/test_from_pattern.py). normalise_email then
# checks what a pattern cannot (at most 64 characters before the @, a U-label's IDNA rules).
_INTL = (r"\u00C0-\u00D6\u00D8-\u00F6\u00F8-\u012F\u0131\u0134-\u013E\u0141-\u0148"
         r"\u014A-\u0180\u0182-\u0185\u0187-\u0188\u018B-\u018E\u0191-\u0192\u0195"
         r"\u0198-\u019B\u019E\u01A0-\u01A5\u01A7-\u01A8\u01AA-\u01AD\u01AF-\u01B0"
         r"\u01B3-\u01B6\u01B8-\u01C3\u01CD-\u01F0\u01F4-\u0239\u023B-\u023D"
         r"\u023F-\u0243\u0246-\u024F\u0370-\u0373\u0376-\u0377\u037B-\u037D\u037F"
         r"\u0386\u0388-\u038A\u038C\u038E-\u03A1\u03A3-\u03F5\u03F7-\u0481"
         r"\u048A-\u052F\u4E00-\u9FA5")
_ATEXT = rf"[A-Za-z0-9!#$%&'*+/=?^_`{{|}}~{_INTL}-]"
# A label outside ASCII has no hyphen and at most 12 letters: its A-label then keeps within
# IDNA's 63 (no "--" in the third and fourth place, which IDNA refuses of a U-label).
_LABEL = (r"(?:[A-Za-z0-9](?:[A-Za-z0-9-]{0,61}[A-Za-z0-9])?"
          rf"|[A-Za-z0-9{_INTL}]{{1,12}})")
_ADDRESS = (rf"{_ATEXT}{{1,64}}(?:\.{_ATEXT}{{1,64}}){{0,3}}@(?:{_LABEL}\.){{1,8}}"
            r"(?!(?:arpa|invalid|local|localhost|onion|test)\b)"
            rf"(?:[A-Za-z]{{2,63}}|[A-Za-z{_INTL}]{{2,12}})")
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
