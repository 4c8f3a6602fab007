"""The owner's "Send…" and "Schedule" from the pages: what a send would do, and the checks
made before it starts.

The pipeline's own rules live in broadside.campaigns.broadcasts.service (send_broadcast, schedule_broadcast);
this module adds what only the pages ask for: the audience in words, a postal address in the
footer, merge fields checked before Send is pressed (broken ones block it; unknown ones and
recipients lacking an attribute are warnings: `merge_report`), and an explicit "queue anyway"
when no worker could send right now.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from datetime import UTC, datetime
from zoneinfo import ZoneInfo

from sqlalchemy.orm import Session

from broadside.campaigns.broadcasts import ab_results, audience, service
from broadside.campaigns.broadcasts.merge_report import MergeReport, merge_problems, merge_report
from broadside.campaigns.content.bodies import body_of
from broadside.core.errors import ValidationError
from broadside.core.i18n import _
from broadside.core.models import Broadcast
from broadside.core.site_settings import get_settings, owner_zone
from broadside.delivery.queues import Jobs
from broadside.mail.rendering import freeze_content
from broadside.segments.service import NOT_SUBSCRIBED

# Why someone on the list would not receive it, in the owner's words.
SKIP_WORDS = {
    "unsubscribed": "unsubscribed",
    "unconfirmed": "have not confirmed their subscription",
    "bounced": "their address bounced before",
    "complained": "marked an earlier email as spam",
    "blocked": "blocked by you",
    NOT_SUBSCRIBED: "match the segment but are not active on any list",
}

def N_(message: str) -> str:
    """Marks a message for the catalog, untranslated: the constant stays the English text
    (tests and the JSON API compare against it); `_()` translates it when it is shown."""
    return message


NO_POSTAL_ADDRESS = N_(
    "Add your postal address in Settings first: it is printed in the footer of every email, "
    "and the law in many places (CAN-SPAM in the US) requires one in a newsletter."
)


# The merge fields' warnings on the send page ("41 of the first 100,000 recipients checked
# have no city") look at this many recipients at most: beyond it the counts cost the page
# seconds and tell the owner nothing more.
SEND_PAGE_CHECKED = 100_000


@dataclass(frozen=True)
class SendPlan:
    """What pressing Send would do now, and what stands in the way."""

    broadcast: Broadcast
    active: int
    skipped: dict[str, int]
    problems: list[str] = field(default_factory=list)  # block sending and scheduling
    time_zone: str = "UTC"
    # The frequency cap: hours, and how many of the audience got a broadcast within them now.
    cap_hours: int | None = None
    recently_received: int = 0
    # The merge fields: broken ones are among `problems`; unknown or lacking ones warn here.
    merge: MergeReport = field(default_factory=MergeReport)

    @property
    def skipped_total(self) -> int:
        return sum(self.skipped.values())

    @property
    def skipped_words(self) -> list[tuple[int, str]]:
        return [(count, SKIP_WORDS.get(reason, reason))
                for reason, count in sorted(self.skipped.items(), key=lambda kv: -kv[1])]


def send_plan(session: Session, broadcast_id: int) -> SendPlan:
    """The confirmation page's plan: everyone a send would reach and skip, counted, and what
    the merge fields would do to the first SEND_PAGE_CHECKED of them. At a million people
    the counts read the whole list's index (~0.4 s on SQLite), so the press itself asks
    only `blocking_problems`."""
    broadcast = service.get_broadcast(session, broadcast_id)
    reach = audience.broadcast_audience(session, broadcast)
    settings = get_settings(session)
    merge = merge_report(session, broadcast, limit=SEND_PAGE_CHECKED)
    problems = blocking_problems(session, broadcast, active=reach["active"],
                                 merge=[problem.message for problem in merge.problems])
    return SendPlan(broadcast, reach["active"], reach["skipped"], problems,
                    settings.time_zone or "UTC", broadcast.skip_if_received_within_hours,
                    reach["recently_received"], merge)


def blocking_problems(session: Session, broadcast: Broadcast, *, active: int | None = None,
                      merge: list[str] | None = None) -> list[str]:
    """What stands in the way of sending and scheduling, in the owner's words. Nothing here
    counts the audience: "nobody would receive it" asks whether one person would (unless the
    caller counted them: `active`), so pressing Send answers at once at any size."""
    problems = []
    if broadcast.list_id is None and broadcast.segment_id is None:
        problems.append(_("Choose a list or a segment to send to."))
    elif not (active if active is not None else audience.has_audience(session, broadcast)):
        problems.append(_("Nobody in this segment would receive it: no active subscriber "
                          "matches its rules now.") if broadcast.segment_id is not None else
                        _("Nobody on this list would receive it: it has no active subscribers."))
    if not broadcast.subject.strip():
        problems.append(_("Give the broadcast a subject before sending it."))
    # Our choice: the pages refuse to send without a postal address. The renderer would
    # print an empty footer line; a newsletter without one breaks CAN-SPAM. The sending
    # identity's own address counts (else the Settings one is what it prints).
    if not (service.sender_of(session, broadcast.identity_id, "")[2] or "").strip():
        problems.append(_(NO_POSTAL_ADDRESS))
    refusal = ab_results.ab_refusal(session, broadcast) if broadcast.ab_test else None
    if refusal is not None:  # an A/B test that cannot run: said before Send, not after
        problems.append(refusal)
    if merge is None:
        merge = [problem.message for problem in merge_problems(session, broadcast)]
    problems += merge
    if not merge:
        # Whatever else freezing would refuse (a merge field in a link's address, a field
        # that fails for every recipient), said here rather than after Send is pressed.
        try:
            freeze_content(subject=broadcast.subject, preheader=broadcast.preheader,
                           **body_of(session, broadcast).freeze_arguments(),
                           from_name="", from_email="",
                           postal_address="")
        except ValidationError as exc:
            problems.append(exc.message)
    return problems


def _refuse_if_blocked(session: Session, broadcast_id: int) -> None:
    problems = blocking_problems(session, service.get_broadcast(session, broadcast_id))
    if problems:
        raise ValidationError(problems[0])


def send_now(session: Session, broadcast_id: int, *, default_from: str, not_ready: list[str],
             queue_anyway: bool, jobs: Jobs) -> Broadcast:
    """Send after the confirmation page: refuse while a problem stands, or while sending is
    not ready unless the owner chose to queue anyway."""
    _refuse_if_blocked(session, broadcast_id)
    if not_ready and not queue_anyway:
        raise ValidationError(_("Sending is not ready right now (see below). Fix it, or tick "
                                "“Queue it anyway” to send as soon as it is."))
    return service.send_broadcast(session, broadcast_id, default_from=default_from, jobs=jobs)


def local_to_utc(value: str, zone: ZoneInfo) -> datetime:
    """A datetime-local field (owner's wall clock) as a naive UTC datetime.

    A time the clocks skip (spring forward) is refused; a time that happens twice (fall back)
    means the first of the two.
    """
    text = (value or "").strip()
    if not text:
        raise ValidationError(_("Choose the date and time to send at."))
    try:
        wall = datetime.fromisoformat(text)
    except ValueError:
        raise ValidationError(_("Give the date and time as on the form, for example "
                                "2026-12-01 09:00.")) from None
    if wall.tzinfo is not None:
        raise ValidationError(_("Give the time without a time zone: it is read in yours."))
    local = wall.replace(tzinfo=zone, fold=0)
    moment = local.astimezone(UTC)
    if moment.astimezone(zone).replace(tzinfo=None) != wall:
        raise ValidationError(_("%(time)s does not exist in %(zone)s: the clocks go forward "
                                "then. Choose another time.", time=f"{wall:%Y-%m-%d %H:%M}",
                                zone=zone.key))
    return moment.replace(tzinfo=None)


def schedule_at(session: Session, broadcast_id: int, local_value: str, *,
                now: datetime | None = None) -> Broadcast:
    """Schedule at a wall-clock time in the owner's time zone (Settings)."""
    _refuse_if_blocked(session, broadcast_id)
    at_utc = local_to_utc(local_value, owner_zone(session))
    now = now or datetime.now(UTC).replace(tzinfo=None)
    if at_utc <= now:
        raise ValidationError(_("Choose a time in the future."))
    return service.schedule_broadcast(session, broadcast_id, at_utc)
