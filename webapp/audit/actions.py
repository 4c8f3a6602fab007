"""What each change is called in the audit log: one stable dotted name per act, the same for
the page and the API (`broadcast.send` whether pressed on the broadcast's page or POSTed to
`/api/broadcasts/<id>/send`), and the object it is about.

- `ACTIONS`: endpoint -> action. An endpoint not in it is named after itself (`people.invite`,
  `api.` dropped), so a new route is logged from its first day, under its own name.
- `NOT_CHANGES`: POSTs that change nothing an auditor asks about: previews, checks, signing in
  and out (sessions have their own page), and the traffic of the transactional API and code
  redemption (each message and code is the product working, logged where it lives).
- `AUDITED_READS`: GETs that are acts: exports of people's data.
- `OUTSIDE_DATABASE`: acts whose row is written after their answer, having no commit to ride.
- `COALESCED`: the editor's autosave, one row per person and draft per ten minutes, not one per
  keystroke pause.
The object is the first `*_id` of the URL (`broadcast_id=12` -> broadcast 12), else what the
answer names (a create's JSON `id`, the page its redirect leads to).
"""

from __future__ import annotations

from collections.abc import Mapping

ACTIONS: dict[str, str] = {
    "analytics.choose": "broadcast.tracking", "analytics.stop": "broadcast.tracking_stop",
    "analytics.set_default": "settings.tracking", "analytics.set_list": "list.tracking",
    "archive.publish": "broadcast.publish", "archive.set_archive": "list.archive",
    "archive.set_view_link": "broadcast.view_link",
    "attachments.upload": "attachment.upload",
    "attachments.upload_for_template": "attachment.upload",
    "api.api_upload_attachment": "attachment.upload",
    "api.api_delete_attachment": "attachment.delete",
    "automations.new": "automation.create", "automations.edit": "automation.edit",
    "automations.delete": "automation.delete", "automations.enable": "automation.enable",
    "automations.disable": "automation.disable", "automations.send_test": "automation.test_send",
    "api.api_create_automation": "automation.create", "api.api_replace_automation": "automation.edit",
    "api.api_delete_automation": "automation.delete", "api.api_enable_automation": "automation.enable",
    "api.api_disable_automation": "automation.disable",
    "broadcasts.new": "broadcast.create", "broadcasts.save": "broadcast.edit",
    "broadcasts.autosave": "broadcast.edit", "broadcasts.duplicate": "broadcast.duplicate",
    "broadcasts.send": "broadcast.send", "broadcasts.schedule": "broadcast.schedule",
    "broadcasts.unschedule": "broadcast.unschedule", "broadcasts.pause": "broadcast.pause",
    "broadcasts.resume": "broadcast.resume", "broadcasts.cancel": "broadcast.cancel",
    "broadcasts.retry": "broadcast.retry", "broadcasts.send_test": "broadcast.test_send",
    "api.create_broadcast": "broadcast.create", "api.edit_draft": "broadcast.edit",
    "api.delete_draft": "broadcast.delete", "api.send": "broadcast.send",
    "api.pause": "broadcast.pause", "api.resume": "broadcast.resume",
    "api.cancel": "broadcast.cancel", "api.test_send": "broadcast.test_send",
    "deliverability.update_lines": "settings.reputation_lines",
    "identities.create": "identity.create", "identities.edit": "identity.edit",
    "identities.delete": "identity.delete", "identities.resume": "identity.resume",
    "identities.resume_default": "identity.resume",
    "api.api_create_identity": "identity.create", "api.api_replace_identity": "identity.edit",
    "api.api_delete_identity": "identity.delete",
    "library.save_as": "message_template.create", "library.save": "message_template.edit",
    "library.delete": "message_template.delete", "library.reset_design": "broadcast.design_reset",
    "library.create_block": "block.create", "library.save_block": "block.edit",
    "library.delete_block": "block.delete",
    "lists.create": "list.create", "lists.update": "list.edit", "lists.delete": "list.delete",
    "api.api_create_list": "list.create", "api.api_import": "list.import",
    "segments.create": "segment.create", "segments.update": "segment.edit",
    "segments.delete": "segment.delete", "segments.duplicate": "segment.duplicate",
    "api.api_create_segment": "segment.create", "api.api_update_segment": "segment.edit",
    "api.api_delete_segment": "segment.delete",
    "settings.update_sender": "settings.sender", "settings.update_defaults": "settings.defaults",
    "settings.update_history": "settings.history_retention",
    "settings.update_content": "settings.content_retention",
    "settings.design_save": "settings.design", "settings.design_logo": "settings.logo",
    "settings.design_logo_remove": "settings.logo_remove",
    "settings.design_texts": "settings.signup_texts",
    "settings.create_token": "token.create", "settings.revoke_token": "token.revoke",
    "settings.create_webhook": "webhook.create", "settings.webhook_delete": "webhook.delete",
    "settings.webhook_enable": "webhook.enable", "settings.webhook_secret": "webhook.new_secret",
    "settings.webhook_test": "webhook.test",
    "api.api_create_webhook": "webhook.create", "api.api_delete_webhook": "webhook.delete",
    "subscribers.new": "subscriber.create", "subscribers.edit": "subscriber.edit",
    "subscribers.add_to_list": "subscriber.subscribe",
    "subscribers.unsubscribe": "subscriber.unsubscribe",
    "subscribers.suppress": "subscriber.suppress", "suppression.lift": "subscriber.unsuppress",
    "subscribers.delete": "subscriber.erase", "subscribers.bulk_submit": "subscribers.bulk",
    "subscribers.import_csv": "list.import", "subscribers.export_csv": "subscribers.export",
    "subscribers.import_rejections": "import.rejections_export",
    "api.api_save_subscriber": "subscriber.create", "api.api_edit_subscriber": "subscriber.edit",
    "api.api_unsubscribe": "subscriber.unsubscribe", "api.api_erase_subscriber": "subscriber.erase",
    "api.api_bulk": "subscribers.bulk",
    "system.hourly_reset": "identity.hourly_reset",
    "system.hourly_reset_identity": "identity.hourly_reset",
    "transactional.create": "template.create", "transactional.save": "template.edit",
    "transactional.delete": "template.delete", "transactional.send_test": "template.test_send",
    "media.upload": "media.upload", "media.edit_alt": "media.edit", "media.delete": "media.delete",
    "api.api_upload_media": "media.upload", "api.api_delete_media": "media.delete",
    "api.api_create_transactional_template": "template.create",
    "api.api_replace_transactional_template": "template.edit",
    "api.api_delete_transactional_template": "template.delete",
}

NOT_CHANGES = frozenset({
    "auth.login", "auth.logout", "auth.setup", "auth.forgot_password", "auth.reset_password",
    "automations.merge_check", "compose.convert", "segments.builder_fragment", "segments.builder_json",
    "segments.preview", "segments.row", "transactional.preview", "system.smtp_check",
    "identities.check", "identities.check_default", "identities.dns_again",
    "identities.dns_again_default", "api.api_send_transactional", "api.redeem_code",
})

AUDITED_READS = frozenset({"subscribers.export_csv", "subscribers.import_rejections"})
# Acts whose effect is not in the database (an hourly cap lives in Redis), and the audited
# reads: their row is written after a successful answer. Every other row rides with a commit
# that wrote, so a press that changed nothing (a second Send, a refusal answered with a
# redirect) is no row.
OUTSIDE_DATABASE = AUDITED_READS | {"system.hourly_reset", "system.hourly_reset_identity"}

COALESCED = frozenset({"broadcasts.autosave"})
COALESCE_MINUTES = 10

# What an action's verb reads as in a summary ("Sent broadcast 12").
_VERBS = {
    "create": "Created", "edit": "Edited", "delete": "Deleted", "send": "Sent",
    "pause": "Paused", "resume": "Resumed", "cancel": "Cancelled", "schedule": "Scheduled",
    "unschedule": "Unscheduled", "duplicate": "Duplicated", "enable": "Enabled",
    "disable": "Disabled", "erase": "Erased", "import": "Imported into", "export": "Exported",
    "bulk": "Bulk action on", "test_send": "Test send of", "revoke": "Revoked",
    "subscribe": "Added to a list:", "unsubscribe": "Unsubscribed", "suppress": "Suppressed",
    "unsuppress": "Lifted the suppression of", "publish": "Published", "upload": "Uploaded",
}

STATE_CHANGING = frozenset({"POST", "PUT", "PATCH", "DELETE"})


def audited(endpoint: str | None, method: str) -> bool:
    """Whether this request, if it succeeds, is one row of the log."""
    if not endpoint or endpoint in NOT_CHANGES:
        return False
    if method.upper() in STATE_CHANGING:
        return True
    return endpoint in AUDITED_READS


def action_for(endpoint: str) -> str:
    found = ACTIONS.get(endpoint)
    if found:
        return found
    return endpoint.removeprefix("api.")


def object_type_of(action: str) -> str:
    """The type of object an action is about, before anything names one."""
    return {"subscribers.bulk": "bulk", "subscribers.export": "subscribers"}.get(
        action, action.split(".", 1)[0])


def object_from_args(args: Mapping[str, object] | None) -> tuple[str, str] | None:
    """The first `<type>_id` among a URL's arguments: ("broadcast", "12")."""
    for name, value in (args or {}).items():
        if name.endswith("_id") and value is not None:
            return {"endpoint": "webhook"}.get(name[:-3], name[:-3]), str(value)
    return None


def summary_of(action: str, object_type: str, object_id: str | None) -> str:
    """A plain sentence of ids only (never an address): "Sent broadcast 12"."""
    noun, _, verb = action.partition(".")
    if noun == "settings":
        return f"Saved Settings: {verb.replace('_', ' ')}"
    words = _VERBS.get(verb)
    thing = f"{object_type} {object_id}" if object_id else (object_type or noun)
    if words is None:
        return f"{action.replace('_', ' ')}" + (f" ({thing})" if object_id else "")
    return f"{words} {thing}"
