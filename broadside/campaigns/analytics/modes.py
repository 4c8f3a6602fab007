"""Which tracking applies, and who may change it.

A broadcast's `tracking` is chosen on its send page (NULL until then: the Settings default)
and frozen at Send (`freeze`, called in the Send transaction). After Send the only change is
to `off` (`stop`), which the worker reads again before each recipient's render
(jobs/recheck.py reads it with the send-time re-check), so it takes effect at once for every
message not yet sent. Per-person tracking needs, in addition, the list's own switch
(`MailingList.per_person_tracking`), read for each recipient's list: a broadcast to a segment
tracks per person only the people whose copy belongs to such a list, the others in aggregate.
A list may also turn tracking off for its readers (`MailingList.no_tracking`, "off" of
`set_list_tracking`): their copies carry no pixel and no rewritten link (rewrite.Tracker).
"""

from __future__ import annotations

from sqlalchemy import select, update
from sqlalchemy.orm import Session

from broadside.core.db import rowcount
from broadside.core.errors import Conflict, NotFound, ValidationError
from broadside.core.i18n import _, _l
from broadside.core.models import Broadcast, MailingList
from broadside.core.models.sending import BroadcastStatus
from broadside.core.site_settings import get_settings

OFF = "off"
AGGREGATE = "aggregate"
PER_PERSON = "per_person"
MODES = (OFF, AGGREGATE, PER_PERSON)
LABELS = {
    OFF: _l("Off: no tracking image, links go straight to their address"),
    AGGREGATE: _l("Counts only: opens and clicks counted per email and per link, never per person"),
    PER_PERSON: _l("Per person: who opened and clicked (only lists where you turned it on)"),
}
SHORT = {OFF: _l("off"), AGGREGATE: _l("counts only"), PER_PERSON: _l("per person")}
# A list's own switch (MailingList.no_tracking, .per_person_tracking), as the API names it.
LIST_OFF, LIST_COUNTS, LIST_PEOPLE = "off", "counts", "people"
LIST_CHOICES = (LIST_OFF, LIST_COUNTS, LIST_PEOPLE)
LIST_LABELS = {
    LIST_OFF: _l("Off: its readers' copies carry no tracking image, and links go straight to "
                 "their address, whatever the broadcast's tracking"),
    LIST_COUNTS: _l("Counts only: opens and clicks counted in aggregate, never per person"),
    LIST_PEOPLE: _l("Per person: broadcasts sent with per-person tracking record who opened "
                    "and clicked (its sign-up and preferences pages say so)"),
}
DRAFT_STATES = (BroadcastStatus.DRAFT.value, BroadcastStatus.SCHEDULED.value)


def clean_mode(value: object) -> str:
    if value not in MODES:
        raise ValidationError(_("Choose the tracking: off, counts only, or per person."))
    return str(value)


def default_mode(session: Session) -> str:
    settings = get_settings(session)
    return settings.default_tracking if settings.default_tracking in MODES else OFF


def set_default(session: Session, value: object) -> str:
    """Settings' default for new broadcasts (one commit)."""
    mode = clean_mode(value)
    get_settings(session).default_tracking = mode
    session.commit()
    return mode


def effective(session: Session, broadcast: Broadcast) -> str:
    """The broadcast's mode, or for a draft not yet chosen, the Settings default."""
    return broadcast.tracking if broadcast.tracking in MODES else default_mode(session)


def choose(session: Session, broadcast_id: int, value: object) -> Broadcast:
    """The send page's choice for a draft (or a scheduled broadcast not yet started)."""
    mode = clean_mode(value)
    broadcast = session.get(Broadcast, broadcast_id)
    if broadcast is None:
        raise NotFound(_("No such broadcast."))
    if mode == PER_PERSON and broadcast.list_id is not None:
        mailing_list = session.get(MailingList, broadcast.list_id)
        if mailing_list is not None and not mailing_list.per_person_tracking:
            raise ValidationError(_("Per-person tracking is off for the list “%(name)s”. Turn it "
                                    "on on the list's page first: its sign-up and preferences "
                                    "pages will then say so.", name=mailing_list.name))
    changed = rowcount(session.execute(update(Broadcast).where(
        Broadcast.id == broadcast_id, Broadcast.status.in_(DRAFT_STATES)).values(tracking=mode)))
    if not changed:
        session.rollback()
        raise Conflict(_("This broadcast has been sent: its tracking can only be turned off now."))
    session.commit()
    session.refresh(broadcast)
    return broadcast


def freeze(session: Session, broadcast: Broadcast) -> None:
    """At Send, in its transaction: a choice never made becomes the Settings default."""
    if broadcast.tracking not in MODES:
        mode = default_mode(session)
        session.execute(update(Broadcast).where(Broadcast.id == broadcast.id).values(tracking=mode))
        broadcast.tracking = mode


def stop(session: Session, broadcast_id: int) -> None:
    """Tracking off, at any time: copies not yet sent go out without pixel or rewritten links
    (the worker reads the mode before each render), and hits on copies already sent are no
    longer counted; their links still lead where they did."""
    changed = rowcount(session.execute(update(Broadcast).where(Broadcast.id == broadcast_id)
                                       .values(tracking=OFF)))
    if not changed:
        session.rollback()
        raise NotFound(_("No such broadcast."))
    session.commit()


def list_tracking(mailing_list: MailingList) -> str:
    """A list's own tracking as the API and the list's page name it: off, counts or people."""
    if mailing_list.no_tracking:
        return LIST_OFF
    return LIST_PEOPLE if mailing_list.per_person_tracking else LIST_COUNTS


def set_list_tracking(session: Session, list_id: int, value: object) -> MailingList:
    """A list's own tracking: "off" (its readers' copies carry no pixel and no rewritten link,
    whatever the broadcast's mode), "counts" (aggregate at most) or "people" (per person
    where the broadcast tracks per person). One commit."""
    if value not in LIST_CHOICES:
        raise ValidationError(_("Choose the list's tracking: off, counts only, or per person."),
                              field="tracking")
    mailing_list = session.get(MailingList, list_id)
    if mailing_list is None:
        raise NotFound(_("No such list."))
    mailing_list.no_tracking = value == LIST_OFF
    mailing_list.per_person_tracking = value == LIST_PEOPLE
    session.commit()
    return mailing_list


def set_list_per_person(session: Session, list_id: int, enabled: bool) -> MailingList:
    return set_list_tracking(session, list_id, LIST_PEOPLE if enabled else LIST_COUNTS)


def lists_tracking_people(session: Session, list_ids: list[int]) -> list[str]:
    """Names of those lists whose owner turned per-person tracking on (the public pages)."""
    if not list_ids:
        return []
    return list(session.scalars(select(MailingList.name).where(
        MailingList.id.in_(list_ids), MailingList.per_person_tracking.is_(True))
        .order_by(MailingList.name)))
