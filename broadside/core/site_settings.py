"""The installation's owner-editable settings (one row, id = 1)."""

from __future__ import annotations

from functools import lru_cache
from zoneinfo import ZoneInfo, ZoneInfoNotFoundError, available_timezones

from sqlalchemy.orm import Session

from broadside.core.addresses import normalise_email
from broadside.core.errors import ValidationError
from broadside.core.i18n import _
from broadside.core.models import SiteSettings


def get_settings(session: Session) -> SiteSettings:
    """The settings row, created with defaults on first use."""
    settings = session.get(SiteSettings, 1)
    if settings is None:
        settings = SiteSettings(id=1, sender_name="", sender_email="", postal_address="",
                                time_zone="UTC")
        session.add(settings)
        session.flush()
    return settings


def owner_zone(session: Session) -> ZoneInfo:
    """The owner's time zone from Settings; UTC when unset or unknown. Reads only (a GET
    creates no settings row)."""
    settings = session.get(SiteSettings, 1)
    name = settings.time_zone if settings is not None and settings.time_zone else "UTC"
    try:
        return ZoneInfo(name)
    except (ZoneInfoNotFoundError, ValueError):
        return ZoneInfo("UTC")


MAX_SENDER_NAME = 200
MAX_POSTAL_ADDRESS = 1000


class SettingsError(ValidationError):
    """A settings value is not acceptable; `field` names the form field it belongs to."""

    def __init__(self, field: str, message: str) -> None:
        super().__init__(message)
        self.field = field


@lru_cache(maxsize=1)
def time_zones() -> frozenset[str]:
    return frozenset(available_timezones())


def update_settings(session: Session, *, sender_name: str, sender_email: str,
                    postal_address: str, time_zone: str, commit: bool = True) -> SiteSettings:
    """Validate every value first, then write them all in one commit (or nothing). With
    `commit=False` the caller commits (the automations that follow Settings are refrozen in
    the same transaction: broadside.campaigns.automations.refreeze)."""
    sender_name = " ".join((sender_name or "").split())
    if len(sender_name) > MAX_SENDER_NAME:
        raise SettingsError("sender_name",
                            _("The sender name is too long (at most %(max_sender_name)s characters).",
                              max_sender_name=MAX_SENDER_NAME))
    if any(ch in sender_name for ch in "<>\"@"):
        raise SettingsError("sender_name", _("The sender name may not contain < > \" or @; put the address "
                                             "in the sender address field."))
    sender_email = (sender_email or "").strip()
    if sender_email:
        try:
            sender_email = normalise_email(sender_email)
        except ValidationError as exc:
            raise SettingsError("sender_email", exc.message) from None
    postal_address = "\n".join(
        line.strip() for line in (postal_address or "").replace("\r\n", "\n").split("\n")
    ).strip()
    if len(postal_address) > MAX_POSTAL_ADDRESS:
        raise SettingsError("postal_address", _("The postal address is too long (at most "
                                                "%(max_postal_address)s characters).",
                                                max_postal_address=MAX_POSTAL_ADDRESS))
    time_zone = (time_zone or "").strip()
    if time_zone not in time_zones():
        raise SettingsError("time_zone",
                            _("%(time_zone)s is not a time zone we know; pick one from the list.",
                              time_zone=repr(time_zone)))
    settings = get_settings(session)
    settings.sender_name = sender_name
    settings.sender_email = sender_email
    settings.postal_address = postal_address
    settings.time_zone = time_zone
    if commit:
        session.commit()
    return settings


MAX_CAP_HOURS = 720  # the frequency cap: at most 30 days


def _whole_number(value: object, maximum: int) -> int | None:
    """A whole number from 1 to `maximum` (an int, or a string of digits, spaces around it
    allowed), or None when it is not one."""
    if isinstance(value, str) and value.strip().isdigit() and len(value.strip()) < 10:
        value = int(value.strip())
    if not isinstance(value, int) or isinstance(value, bool) or not 1 <= value <= maximum:
        return None
    return value


def clean_cap_hours(value: object) -> int | None:
    """The frequency cap in hours: None (no cap) or a whole number from 1 to MAX_CAP_HOURS."""
    if value is None or value == "" or value == 0:
        return None
    cleaned = _whole_number(value, MAX_CAP_HOURS)
    if cleaned is None:
        raise ValidationError(_("Skip people who received a broadcast within how many hours? Give a whole "
                                "number from 1 to %(max_cap_hours)s, or leave it empty.",
                                max_cap_hours=MAX_CAP_HOURS))
    return cleaned


def update_sending_defaults(session: Session, *, skip_if_received_within_hours: object) -> SiteSettings:
    """What new broadcasts start with: the frequency cap (validated first, one commit)."""
    try:
        cap = clean_cap_hours(skip_if_received_within_hours)
    except ValidationError as exc:
        raise SettingsError("skip_hours", exc.message) from None
    settings = get_settings(session)
    settings.default_skip_if_received_within_hours = cap
    session.commit()
    return settings


MAX_RETENTION_DAYS = 3650  # ten years


def clean_retention_days(value: object) -> int | None:
    """How long settled broadcasts keep their step-by-step history: None (forever, the
    default) or a whole number of days from 1 to MAX_RETENTION_DAYS."""
    if value is None or value == "" or value == "forever":
        return None
    cleaned = _whole_number(value, MAX_RETENTION_DAYS)
    if cleaned is None:
        raise ValidationError(_("Keep the step-by-step history for how many days? Give a whole number from "
                                "1 to %(max_retention_days)s, or choose forever.",
                                max_retention_days=MAX_RETENTION_DAYS))
    return cleaned


def update_history_retention(session: Session, *, days: object) -> SiteSettings:
    """Settings -> History: forever (None) or N days (validated first, one commit). The
    worker's compaction (broadside.campaigns.broadcasts.compaction) reads it on its next pass."""
    try:
        cleaned = clean_retention_days(days)
    except ValidationError as exc:
        raise SettingsError("retention_days", exc.message) from None
    settings = get_settings(session)
    settings.history_retention_days = cleaned
    session.commit()
    return settings


MAX_CONTENT_DAYS = 3650  # ten years


def clean_content_days(value: object) -> int:
    """How long transactional and test messages keep their content: a whole number of days
    from 1 to MAX_CONTENT_DAYS (there is no "forever": the content may be personal data)."""
    cleaned = _whole_number(value, MAX_CONTENT_DAYS)
    if cleaned is None:
        raise ValidationError(_("Keep the content of transactional and test messages for how many days? "
                                "Give a whole number from 1 to %(max_content_days)s.",
                                max_content_days=MAX_CONTENT_DAYS))
    return cleaned


def update_content_retention(session: Session, *, days: object) -> SiteSettings:
    """Settings -> "Keep the content of transactional and test messages for N days"
    (validated first, one commit). The worker's next pass reads it
    (broadside.delivery.content_retention)."""
    try:
        cleaned = clean_content_days(days)
    except ValidationError as exc:
        raise SettingsError("content_days", exc.message) from None
    settings = get_settings(session)
    settings.content_retention_days = cleaned
    session.commit()
    return settings


REPUTATION_LINES = ("complaint_warning_pct", "complaint_limit_pct", "bounce_warning_pct",
                    "bounce_limit_pct")
_LINE_WORDS = {"complaint": "complaint rate", "bounce": "hard-bounce rate"}


def _percent(field: str, raw: object) -> float:
    text = str(raw if raw is not None else "").strip().rstrip("%").strip().replace(",", ".")
    try:
        value = float(text)
    except ValueError:
        raise SettingsError(field, _("Enter a percentage, for example 0.3.")) from None
    if not 0 < value <= 100 or value != value:
        raise SettingsError(field, _("Enter a percentage above 0 and at most 100."))
    return round(value, 3)


def update_reputation_lines(session: Session, values: dict[str, object]) -> SiteSettings:
    """The reputation guard's warning and limit lines (percent, 0 < x <= 100, each warning
    below its limit), validated whole before any is written; committed."""
    lines = {field: _percent(field, values.get(field)) for field in REPUTATION_LINES}
    for rate, words in _LINE_WORDS.items():
        if lines[f"{rate}_warning_pct"] >= lines[f"{rate}_limit_pct"]:
            raise SettingsError(f"{rate}_warning_pct",
                                _("The %(words)s's warning must be below its limit.", words=words))
    settings = get_settings(session)
    for field, value in lines.items():
        setattr(settings, field, value)
    session.commit()
    return settings
