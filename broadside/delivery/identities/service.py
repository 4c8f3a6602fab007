"""Sending identities: read (the default one from the environment, the others from their
rows), validated, saved and deleted when unused.

`SendingIdentity` is the one view of an identity everything else uses (the worker's stream,
the pages, the API), so the default and the others are never told apart outside this module.
The transport URL holds secrets: `SendingIdentity.transport` is masked (urls.describe) and
only the worker reads `transport_url`.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass, replace
from email.utils import formataddr, parseaddr
from typing import Any

from sqlalchemy import func, select
from sqlalchemy.exc import IntegrityError
from sqlalchemy.orm import Session

from broadside.core import mailbox_urls
from broadside.core import transport_urls as urls
from broadside.core.errors import Conflict, NotFound, ValidationError, shown
from broadside.core.i18n import _
from broadside.core.models import Automation, Broadcast, Identity, SiteSettings
from broadside.core.models.identities import IdentityStatus
from broadside.core.timeutil import utcnow
from broadside.delivery.identities import accounts, bound, inputs, lifecycle
from broadside.delivery.identities.from_field import FROM_PATTERN as FROM_PATTERN
from broadside.delivery.identities.from_field import MAX_FROM as MAX_FROM
from broadside.delivery.identities.from_field import shown_from
from broadside.delivery.identities.inputs import DEFAULT_NAME as DEFAULT_NAME
from broadside.delivery.identities.inputs import FIELDS as FIELDS
from broadside.delivery.identities.inputs import MAX_DELAY_MS as MAX_DELAY_MS
from broadside.delivery.identities.inputs import MAX_HOURLY as MAX_HOURLY
from broadside.delivery.identities.inputs import MAX_NAME as MAX_NAME
from broadside.delivery.identities.inputs import MAX_POSTAL as MAX_POSTAL
from broadside.delivery.identities.inputs import MAX_SECRET as MAX_SECRET
from broadside.delivery.identities.inputs import IdentityInput as IdentityInput
from broadside.delivery.identities.inputs import check_endpoint as check_endpoint
from broadside.delivery.identities.inputs import parse_input as parse_input
from broadside.mail import dkim_keys
from broadside.mail.dkim_signing import DkimSigner

MAX_ID = 2**31 - 1
# Broadcasts in these states still need their identity (to send, or to be sent later).
LIVE_BROADCASTS = ("draft", "scheduled", "queued", "sending", "paused")


@dataclass(frozen=True)
class SendingIdentity:
    id: int | None  # None: the default identity (the environment)
    name: str
    from_name: str
    from_email: str
    transport_url: str  # secret: for the worker only
    delay_ms: int
    hourly_limit: int
    postal_address: str
    status: str
    pause_reason: str | None
    webhook_secret: str = ""
    # The ceiling of its provider account, requests/s: the smallest `account_rate` set on any
    # identity of the account (broadside.delivery.identities.accounts); None: none set.
    account_rate: float | None = None
    # DKIM signing of SMTP and outbox mail (both empty: not signed); the key is a secret.
    dkim_selector: str = ""
    dkim_private_key: str = ""
    # Its bounce mailbox (imaps://…; secret: for the worker only) and VERP domain; empty: none.
    bounce_mailbox_url: str = ""
    verp_domain: str = ""

    @property
    def dkim_signer(self) -> DkimSigner | None:
        """What signs its mail, when it signs (a provider signs its own: never given one)."""
        if not (self.dkim_selector and self.dkim_private_key) or self.scheme in urls.PROVIDER_SCHEMES:
            return None
        return DkimSigner(self.dkim_selector, self.dkim_private_key)

    @property
    def is_default(self) -> bool:
        return self.id is None

    @property
    def key(self) -> str:
        """Its Redis key part: lease, queues, hourly cap ("default" keeps today's keys)."""
        return DEFAULT_NAME if self.id is None else f"identity:{self.id}"

    @property
    def stream_settings(self) -> tuple[str, str, int, int, str, float | None, str, str, str, str]:
        """What its running stream is built from (jobs.stream): a change means the stream
        starts again on the new values (jobs.supervisor); its pause is not one (read per job)."""
        return (self.name, self.transport_url, self.delay_ms, self.hourly_limit, self.webhook_secret,
                self.account_rate, self.dkim_selector, self.dkim_private_key,
                self.bounce_mailbox_url, self.verp_domain)

    @property
    def bounce_mailbox(self) -> str:
        """The bounce mailbox URL with its password masked ("" when none)."""
        return mailbox_urls.describe(self.bounce_mailbox_url)

    @property
    def verp(self) -> tuple[str, str] | None:
        """(local part, domain) of its VERP Return-Path: an SMTP identity with a bounce
        mailbox; None otherwise (providers' APIs report bounces by their own webhooks)."""
        if not self.bounce_mailbox_url or self.scheme not in urls.SMTP_SCHEMES:
            return None
        return mailbox_urls.verp_parts(self.bounce_mailbox_url, self.verp_domain)

    @property
    def transport(self) -> str:
        """The transport URL with its secrets masked."""
        return urls.describe(self.transport_url)

    @property
    def scheme(self) -> str:
        return urls.scheme_of(self.transport_url)

    @property
    def from_header(self) -> str:
        return formataddr((self.from_name, self.from_email))

    @property
    def label(self) -> str:
        return _("Default") if self.id is None else self.name


def default_identity(session: Session, config: Mapping[str, Any]) -> SendingIdentity:
    """The environment's identity: SMTP_URL, the Settings page's sender (else MAIL_FROM),
    SEND_DELAY_MS, SEND_HOURLY_LIMIT, ACCOUNT_RATE (its own; `all_identities` gives the
    account's) and the Settings page's postal address."""
    settings = session.get(SiteSettings, 1)
    if settings is not None and settings.sender_email:
        from_name, from_email = settings.sender_name or "", settings.sender_email
    else:
        from_name, from_email = parseaddr(str(config.get("MAIL_FROM") or ""))
    return SendingIdentity(
        id=None, name=DEFAULT_NAME, from_name=from_name, from_email=from_email,
        transport_url=str(config.get("SMTP_URL") or ""),
        delay_ms=int(config.get("SEND_DELAY_MS", 200)),
        hourly_limit=int(config.get("SEND_HOURLY_LIMIT", 0)),
        postal_address=(settings.postal_address if settings is not None else "") or "",
        status="paused" if settings is not None and settings.default_pause_reason else "active",
        pause_reason=settings.default_pause_reason if settings is not None else None,
        webhook_secret=str(config.get("WEBHOOK_SECRET") or ""),
        account_rate=config.get("ACCOUNT_RATE") or None,
        dkim_selector=str(config.get("DKIM_SELECTOR") or ""),
        dkim_private_key=str(config.get("DKIM_PRIVATE_KEY") or ""),
        bounce_mailbox_url=str(config.get("BOUNCE_MAILBOX_URL") or ""),
        verp_domain=str(config.get("VERP_DOMAIN") or ""),
    )


def _view(row: Identity) -> SendingIdentity:
    return SendingIdentity(
        id=row.id, name=row.name, from_name=row.from_name, from_email=row.from_email,
        transport_url=row.transport_url, delay_ms=row.delay_ms, hourly_limit=row.hourly_limit,
        postal_address=row.postal_address, status=row.status, pause_reason=row.pause_reason,
        webhook_secret=row.webhook_secret, account_rate=row.account_rate,
        dkim_selector=row.dkim_selector, dkim_private_key=row.dkim_private_key,
        bounce_mailbox_url=row.bounce_mailbox_url or "", verp_domain=row.verp_domain or "",
    )


def resolve(session: Session, config: Mapping[str, Any], identity_id: int | None) -> SendingIdentity:
    """The identity an id names (None: the default). A deleted one still resolves (past
    broadcasts name it); an id that never existed is NotFound."""
    if identity_id is None:
        return _shared(session, config, default_identity(session, config))
    row = session.get(Identity, identity_id) if 1 <= identity_id <= MAX_ID else None
    if row is None:
        raise NotFound(_("There is no sending identity %(identity_id)s.", identity_id=identity_id))
    return _shared(session, config, _view(row))


def _shared(session: Session, config: Mapping[str, Any], identity: SendingIdentity) -> SendingIdentity:
    """`identity` with its account's ceiling: the smallest rate set on any live identity of
    its account, the default's (ACCOUNT_RATE) included."""
    rows = session.execute(select(Identity.transport_url, Identity.account_rate)
                           .where(Identity.status != IdentityStatus.DELETED.value)).all()
    rates = [(identity.transport_url, identity.account_rate),
             (str(config.get("SMTP_URL") or ""), config.get("ACCOUNT_RATE") or None),
             *((r.transport_url, r.account_rate) for r in rows)]
    return replace(identity, account_rate=accounts.smallest_rate(identity.transport_url, rates))


def by_name(session: Session, config: Mapping[str, Any], name: str) -> SendingIdentity | None:
    """A live identity by its name (case-insensitive; "default" is the default)."""
    if name.strip().lower() == DEFAULT_NAME:
        return resolve(session, config, None)
    row = session.scalar(select(Identity).where(Identity.name_key == name.strip().lower()))
    return resolve(session, config, row.id) if row is not None else None


def all_identities(session: Session, config: Mapping[str, Any]) -> list[SendingIdentity]:
    """Every live identity, the default first, then by name, each with its account's ceiling."""
    rows = session.scalars(
        select(Identity).where(Identity.status != IdentityStatus.DELETED.value)
        .order_by(Identity.name_key)).all()
    return accounts.with_shared_rates([default_identity(session, config), *(_view(r) for r in rows)])


def check_choice(session: Session, identity_id: Any) -> int | None:
    """An identity id a broadcast or automation may choose: None (the default) or a live
    identity's id; anything else is a ValidationError."""
    if identity_id is None:
        return None
    if not isinstance(identity_id, int) or isinstance(identity_id, bool) or not 1 <= identity_id <= MAX_ID:
        raise ValidationError(_("identity_id must be a sending identity's id (or null for the default)."))
    row = session.get(Identity, identity_id)
    if row is None or row.status == IdentityStatus.DELETED.value:
        raise ValidationError(_("There is no sending identity %(identity_id)s.",
                                identity_id=identity_id))
    return identity_id


def as_input(identity: SendingIdentity) -> dict[str, Any]:
    """An identity as the API shows it: never its transport's secrets or its webhook secret."""
    return {
        "id": identity.id, "name": identity.name, "default": identity.is_default,
        "from": shown_from(identity.from_name, identity.from_email), "transport": identity.transport,
        "delay_ms": identity.delay_ms, "hourly_limit": identity.hourly_limit,
        "account_rate": identity.account_rate,
        "postal_address": identity.postal_address, "status": identity.status,
        "pause_reason": shown(identity.pause_reason),
        "webhook_secret_set": bool(identity.webhook_secret),
        "dkim": dkim_shown(identity),
        "bounce_mailbox": identity.bounce_mailbox or None,
        "verp_domain": identity.verp_domain or None,
    }


def dkim_shown(identity: SendingIdentity) -> dict[str, Any] | None:
    """Its DKIM signing as the pages and the API show it (never the private key): the
    selector, the TXT record to publish and where, the key's size and fingerprint; None when
    it does not sign."""
    if not (identity.dkim_selector and identity.dkim_private_key):
        return None
    domain = identity.from_email.rpartition("@")[2]
    try:
        summary = dkim_keys.check_private_key(identity.dkim_private_key)
        record = dkim_keys.txt_record(identity.dkim_private_key)
    except dkim_keys.KeyProblem as problem:
        return {"selector": identity.dkim_selector, "record_name":
                dkim_keys.record_name(identity.dkim_selector, domain), "txt_record": None,
                "key_bits": None, "key_fingerprint": None, "problem": str(problem)}
    return {"selector": identity.dkim_selector,
            "record_name": dkim_keys.record_name(identity.dkim_selector, domain),
            "txt_record": record, "key_bits": summary.bits,
            "key_fingerprint": summary.fingerprint, "problem": summary.warning}


# ------------------------------------------------------------------ writes


def _taken(name: str) -> Conflict:
    return Conflict(_("There is already an identity called “%(name)s”; choose another name.",
                      name=name),
                    field="name")


def create(session: Session, data: IdentityInput, *, limit: int = bound.DEFAULT_MAX) -> Identity:
    """A new identity, committed; a live name is never shared (UNIQUE name_key), and past
    `limit` live identities (MAX_IDENTITIES) none is added: a ValidationError. The count is
    taken under the settings row's write lock (held to the commit), so two creates at once
    cannot both pass the bound: PostgreSQL locks the row, SQLite takes its write lock."""
    assert data.transport_url is not None
    bound.lock_the_count(session)
    count = bound.live_count(session)
    if count >= limit:
        session.rollback()
        raise ValidationError(bound.limit_reached(count, limit))
    row = Identity(
        name=data.name, name_key=data.name.lower(), from_name=data.from_name,
        from_email=data.from_email, transport_url=data.transport_url, delay_ms=data.delay_ms,
        hourly_limit=data.hourly_limit, postal_address=data.postal_address,
        account_rate=data.account_rate,
        webhook_secret=data.webhook_secret or "", status=IdentityStatus.ACTIVE.value,
        dkim_selector=data.dkim_selector or "", dkim_private_key=data.dkim_private_key or "",
        bounce_mailbox_url=data.bounce_mailbox_url or "", verp_domain=data.verp_domain,
    )
    session.add(row)
    try:
        session.commit()
    except IntegrityError:
        session.rollback()
        raise _taken(data.name) from None
    return row


def _live_row(session: Session, identity_id: int) -> Identity:
    # (An id past the column's range is nobody: PostgreSQL would refuse to look it up.)
    row = session.get(Identity, identity_id) if 1 <= identity_id <= MAX_ID else None
    if row is None or row.status == IdentityStatus.DELETED.value:
        raise NotFound(_("There is no sending identity %(identity_id)s.", identity_id=identity_id))
    return row


def _check_dkim(row: Identity, data: IdentityInput) -> None:
    """DKIM as it would be saved: a selector turned on needs a key (given, or kept), and a
    provider's transport signs its own mail."""
    selector = row.dkim_selector if data.dkim_selector is None else data.dkim_selector
    key = row.dkim_private_key if data.dkim_private_key is None else data.dkim_private_key
    if selector and not key:
        raise ValidationError(_("Give the DKIM private key: a PEM key, or \"generate\"."),
                              field="dkim.private_key")
    transport = row.transport_url if data.transport_url is None else data.transport_url
    if selector and inputs.signs_itself(transport):
        raise ValidationError(inputs.PROVIDER_SIGNS, field="dkim")


def update(session: Session, identity_id: int, data: IdentityInput, *,
           commit: bool = True) -> Identity:
    """Save the new values (a missing transport or secret keeps the current one), committed
    (or by the caller, with `commit=False`: the automations that use it are refrozen in the
    same transaction, from the floor above). A changed transport URL resumes a paused
    identity: the owner fixed what paused it."""
    row = _live_row(session, identity_id)
    _check_dkim(row, data)  # before any value is written: a refusal changes nothing
    changed_transport = data.transport_url is not None and data.transport_url != row.transport_url
    row.name, row.name_key = data.name, data.name.lower()
    row.from_name, row.from_email = data.from_name, data.from_email
    if data.transport_url is not None:
        row.transport_url = data.transport_url
    if data.webhook_secret is not None:
        row.webhook_secret = data.webhook_secret
    if data.dkim_selector is not None:
        row.dkim_selector = data.dkim_selector
    if data.dkim_private_key is not None:
        row.dkim_private_key = data.dkim_private_key
    if data.bounce_mailbox_url is not None:
        row.bounce_mailbox_url = data.bounce_mailbox_url
    row.verp_domain = data.verp_domain
    row.delay_ms, row.hourly_limit = data.delay_ms, data.hourly_limit
    row.account_rate = data.account_rate
    row.postal_address = data.postal_address
    row.updated_at = utcnow()
    try:
        session.flush()
    except IntegrityError:
        session.rollback()
        raise _taken(data.name) from None
    if changed_transport:
        lifecycle.resume(session, identity_id, label=row.name)
    if commit:
        session.commit()
    return row


def usage(session: Session, identity_id: int) -> dict[str, int]:
    """What still needs this identity: broadcasts not yet sent (drafts included) and
    automations not deleted."""
    broadcasts = session.scalar(select(func.count()).select_from(Broadcast).where(
        Broadcast.identity_id == identity_id, Broadcast.status.in_(LIVE_BROADCASTS))) or 0
    automations = session.scalar(select(func.count()).select_from(Automation).where(
        Automation.identity_id == identity_id, Automation.status != "deleted")) or 0
    return {"broadcasts": int(broadcasts), "automations": int(automations)}


def delete(session: Session, identity_id: int) -> None:
    """Delete an unused identity (kept as a row so past broadcasts still name it); committed.
    Conflict, saying what uses it, while a broadcast or an automation still needs it."""
    row = _live_row(session, identity_id)
    used = usage(session, identity_id)
    if used["broadcasts"] or used["automations"]:
        parts = []
        count = used["broadcasts"]
        if count:
            parts.append(f"{count} broadcast{'s' if count != 1 else ''} not yet sent")
        count = used["automations"]
        if count:
            parts.append(f"{count} automation{'s' if count != 1 else ''}")
        raise Conflict(f"“{row.name}” is still used by " + " and ".join(parts)
                       + ". Choose another identity for them first.")
    lifecycle.move(session, identity_id, "delete", label=row.name)
    session.commit()


def resume(session: Session, identity_id: int | None) -> bool:
    """The owner's resume of a paused identity; committed."""
    label = DEFAULT_NAME if identity_id is None else _live_row(session, identity_id).name
    moved = lifecycle.resume(session, identity_id, label=label)
    session.commit()
    return moved
