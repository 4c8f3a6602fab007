"""The audit log's words as the page shows them, in the reader's language. What is stored
stays as it was written (English, the same for the page and `GET /api/audit`); a row's
summary is translated when shown: the default sentence is said again from its action and
object, and a fixed summary a view noted (marked with `N_` where it is noted) through the
catalog. A summary with values in it (an address, a role) is shown as stored."""

from __future__ import annotations

from typing import Any

from broadside.core.i18n import _, _l
from webapp.audit import actions


def N_(message: str) -> str:
    """Marks a summary for the catalog where it is noted; stored as it is."""
    return message


# What each kind of object is called ("broadcast 12"), in the filter and the Object column.
OBJECT_WORDS: dict[str, Any] = {
    "broadcast": _l("broadcast"), "list": _l("list"), "subscriber": _l("subscriber"),
    "segment": _l("segment"), "automation": _l("automation"), "identity": _l("identity"),
    "template": _l("template"), "webhook": _l("webhook"), "token": _l("token"),
    "bulk": _l("bulk action"), "import": _l("import"), "settings": _l("settings"),
    "subscribers": _l("subscribers"), "attachment": _l("attachment"), "media": _l("image"),
    "message_template": _l("message template"), "block": _l("block"),
}

# The default sentence of each verb (actions._VERBS), `thing` the object: "Sent broadcast 12".
_VERB_SENTENCES: dict[str, Any] = {
    "create": _l("Created %(thing)s"), "edit": _l("Edited %(thing)s"),
    "delete": _l("Deleted %(thing)s"), "send": _l("Sent %(thing)s"),
    "pause": _l("Paused %(thing)s"), "resume": _l("Resumed %(thing)s"),
    "cancel": _l("Cancelled %(thing)s"), "schedule": _l("Scheduled %(thing)s"),
    "unschedule": _l("Unscheduled %(thing)s"), "duplicate": _l("Duplicated %(thing)s"),
    "enable": _l("Enabled %(thing)s"), "disable": _l("Disabled %(thing)s"),
    "erase": _l("Erased %(thing)s"), "import": _l("Imported into %(thing)s"),
    "export": _l("Exported %(thing)s"), "bulk": _l("Bulk action on %(thing)s"),
    "test_send": _l("Test send of %(thing)s"), "revoke": _l("Revoked %(thing)s"),
    "subscribe": _l("Added to a list: %(thing)s"), "unsubscribe": _l("Unsubscribed %(thing)s"),
    "suppress": _l("Suppressed %(thing)s"), "unsuppress": _l("Lifted the suppression of %(thing)s"),
    "publish": _l("Published %(thing)s"), "upload": _l("Uploaded %(thing)s"),
}

# Settings' parts, as "Saved Settings: …" names them.
_SETTINGS_PARTS: dict[str, Any] = {
    "sender": _l("sender and address"), "defaults": _l("defaults"),
    "history_retention": _l("history retention"), "content_retention": _l("content retention"),
    "design": _l("design"), "logo": _l("logo"), "logo_remove": _l("logo removed"),
    "signup_texts": _l("sign-up texts"), "tracking": _l("tracking"),
    "reputation_lines": _l("reputation lines"),
}

# The fixed summaries views note (each marked with N_ where it is noted).
NOTED = (
    N_("Language changed"), N_("Two-factor sign-in turned on"),
    N_("Two-factor sign-in turned on (at sign-in, as required)"),
    N_("New recovery codes made (the old set void)"), N_("Two-factor sign-in turned off"),
    N_("Password changed"), N_("A session ended"), N_("Every other session ended"),
)


def object_word(kind: str | None) -> str:
    return str(OBJECT_WORDS[kind]) if kind in OBJECT_WORDS else (kind or "")


def thing(kind: str | None, object_id: str | None) -> str:
    return f"{object_word(kind)} {object_id}" if object_id else object_word(kind)


def summary_shown(action: str, object_type: str | None, object_id: str | None,
                  summary: str | None) -> str:
    """A row's summary in the language being spoken (see the module's docstring)."""
    if not summary:
        return ""
    if summary != actions.summary_of(action, object_type or "", object_id):
        return _(summary) if summary in NOTED else summary
    noun, _dot, verb = action.partition(".")
    if noun == "settings":
        part = _SETTINGS_PARTS.get(verb)
        return _("Saved Settings: %(part)s", part=str(part) if part else verb.replace("_", " "))
    sentence = _VERB_SENTENCES.get(verb)
    if sentence is None:
        return summary
    return str(sentence) % {"thing": thing(object_type or noun, object_id)}
