"""The five roles and what each may do: the one table every check reads.

A route declares one permission (webapp/permissions.py: `allow`, or its blueprint's defaults);
a person may use it when their role holds it; an API token holds at most its person's role,
and a read-only token at most a viewer's. The roles are fixed, ordered from most to least:

- owner:  everything, including people, roles and the security settings;
- admin:  everything except people and roles;
- sender: everything a writer can, and sending: send, schedule, pause, resume and cancel
          broadcasts, enable and disable automations, test sends to any address;
- writer: drafts, segments, automations (saved disabled), test sends to their own address;
          subscribers read-only;
- viewer: reads every owner page and the analytics; changes nothing.

Every signed-in person may also manage their own account (`self`: their password, two-factor
sign-in and sessions), whatever their role.
"""

from __future__ import annotations

from broadside.core.i18n import _l

OWNER, ADMIN, SENDER, WRITER, VIEWER = "owner", "admin", "sender", "writer", "viewer"
ROLES: tuple[str, ...] = (OWNER, ADMIN, SENDER, WRITER, VIEWER)

# The permissions a route may declare (besides "public", which needs nobody).
VIEW = "view"        # read the owner's pages and the API's GETs
WRITE = "write"      # drafts, segments, automations' content, a test send to oneself
SEND = "send"        # what makes mail leave or stop: send, schedule, pause, resume, cancel
MANAGE = "manage"    # lists, subscribers, imports and exports, settings, identities, webhooks
PEOPLE = "people"    # people, roles, invitations, the security settings
SELF = "self"        # one's own account: password, two-factor sign-in, sessions
PERMISSIONS: tuple[str, ...] = (VIEW, WRITE, SEND, MANAGE, PEOPLE, SELF)

GRANTS: dict[str, frozenset[str]] = {
    OWNER: frozenset({VIEW, WRITE, SEND, MANAGE, PEOPLE, SELF}),
    ADMIN: frozenset({VIEW, WRITE, SEND, MANAGE, SELF}),
    SENDER: frozenset({VIEW, WRITE, SEND, SELF}),
    WRITER: frozenset({VIEW, WRITE, SELF}),
    VIEWER: frozenset({VIEW, SELF}),
}
# What a read-only API token may ever do, whoever's it is.
READ_ONLY: frozenset[str] = frozenset({VIEW})
# Tokens never manage an account: no password, second factor or session is the API's.
TOKEN_NEVER: frozenset[str] = frozenset({SELF})

LABELS = {
    OWNER: "Owner", ADMIN: "Admin", SENDER: "Sender", WRITER: "Writer", VIEWER: "Viewer",
}
DESCRIPTIONS = {
    OWNER: "Everything, including people, roles and security.",
    ADMIN: "Everything except people and roles.",
    SENDER: "Writes, and sends: send, schedule, pause and cancel broadcasts; turn automations "
            "on and off.",
    WRITER: "Drafts, segments and automations (saved off); test sends to their own address; "
            "reads subscribers.",
    VIEWER: "Reads every page and the analytics; changes nothing.",
}


# The same, in the language being spoken (LABELS and DESCRIPTIONS stay English: the API, the
# command line and the logs read them).
_SHOWN_LABELS = {
    OWNER: _l("Owner"), ADMIN: _l("Admin"), SENDER: _l("Sender"), WRITER: _l("Writer"),
    VIEWER: _l("Viewer"),
}
# Inside a sentence ("full (writer)", "Your role (viewer) does not allow this"): lower case in
# English, French and Spanish, a noun's capital in German.
_SHOWN_WORDS = {
    OWNER: _l("owner"), ADMIN: _l("admin"), SENDER: _l("sender"), WRITER: _l("writer"),
    VIEWER: _l("viewer"),
}
_SHOWN_DESCRIPTIONS = {
    OWNER: _l("Everything, including people, roles and security."),
    ADMIN: _l("Everything except people and roles."),
    SENDER: _l("Writes, and sends: send, schedule, pause and cancel broadcasts; turn automations "
               "on and off."),
    WRITER: _l("Drafts, segments and automations (saved off); test sends to their own address; "
               "reads subscribers."),
    VIEWER: _l("Reads every page and the analytics; changes nothing."),
}


def role_label(role: str) -> str:
    """A role's name as a person reads it, in the language being spoken ("Redakteur");
    an unknown role as it is."""
    label = _SHOWN_LABELS.get(role)
    return str(label) if label is not None else role


def role_word(role: str) -> str:
    """A role's name inside a sentence, in the language being spoken ("writer", "Redakteur",
    "rédacteur"); an unknown role as it is."""
    word = _SHOWN_WORDS.get(role)
    return str(word) if word is not None else role


def role_description(role: str) -> str:
    """What a role may do, in the language being spoken."""
    description = _SHOWN_DESCRIPTIONS.get(role)
    return str(description) if description is not None else ""


def is_role(value: object) -> bool:
    return isinstance(value, str) and value in GRANTS


def permissions_of(role: str, *, token: bool = False, read_only: bool = False) -> frozenset[str]:
    """What a person of `role` may do; through an API token (`token`), never their own
    account, and with a read-only token, at most read. An unknown role may do nothing."""
    granted = GRANTS.get(role, frozenset())
    if token:
        granted = granted - TOKEN_NEVER
    if read_only:
        granted = granted & READ_ONLY
    return granted


def may(role: str, permission: str, **how: bool) -> bool:
    return permission in permissions_of(role, **how)


def roles_with(permission: str) -> list[str]:
    return [role for role in ROLES if permission in GRANTS[role]]


def at_most(role: str, ceiling: str) -> bool:
    """Whether `role` holds nothing `ceiling` does not (an inviter gives no more than theirs)."""
    return GRANTS.get(role, frozenset()) <= GRANTS.get(ceiling, frozenset())
