"""An A/B test written on a draft (`Broadcast.ab_test`), as the editor and the API set it.

Variant A is the broadcast itself: its subject and preheader, its body (`""`). Whatever a
page or a client gives for A, what is stored is the broadcast's own, and a draft's edit of
the subject or preheader carries A along (`synced`, called by `drafts.update_draft`). A given
subject or preheader for A that differs from the broadcast's is refused rather than guessed
at. A refusal names the field it is about (`ab_test.share`, `ab_test.variants[1].subject`),
so the editor puts the message at its input and the API's 422 names it.

`stage_ab_test` writes the test in the caller's transaction without committing (the editor
and PATCH write it with the rest of the draft, one commit: all or nothing); `set_ab_test`
is the same with its own commit. Both are one UPDATE guarded by the draft state (what was
sent is frozen, invariant 8): a test set racing a Send lands before it or is refused.
"""

from __future__ import annotations

from typing import Any

from sqlalchemy import update
from sqlalchemy.orm import Session

from broadside.campaigns.broadcasts import lifecycle
from broadside.campaigns.broadcasts.ab_tests import (
    LETTERS,
    MAX_BODY_CHARS,
    MAX_LINE_CHARS,
    MAX_VARIANTS,
    clean_ab_test,
)
from broadside.core.db import rowcount
from broadside.core.errors import Conflict, NotFound, ValidationError
from broadside.core.i18n import _
from broadside.core.models import Broadcast
from broadside.core.timeutil import utcnow

FIELD = "ab_test"


def variant_a(subject: str, preheader: str) -> dict[str, str]:
    """Variant A as stored: the broadcast's own subject and preheader, its own body."""
    return {"subject": (subject or "").strip(), "preheader": (preheader or "").strip(), "body": ""}


def synced(broadcast: Broadcast | None, subject: str, preheader: str) -> dict[str, Any] | None:
    """The broadcast's test with variant A following a new subject and preheader (None: none).
    Not judged again here: a subject edited to equal another variant's is refused when the
    test is next saved, and at Send."""
    test = broadcast.ab_test if broadcast is not None else None
    if not test or not test.get("variants"):
        return test
    return {**test, "variants": [variant_a(subject, preheader), *test["variants"][1:]]}


def clean_for(raw: Any, *, subject: str, preheader: str) -> dict[str, Any] | None:
    """`raw` (None: no test) checked as `clean_ab_test` does, with variant A the broadcast's
    own; raises ValidationError naming the field."""
    if raw is None:
        return None
    variants = raw.get("variants") if isinstance(raw, dict) else None
    if isinstance(variants, list) and variants and isinstance(variants[0], dict):
        _refuse_another_a(variants[0], subject, preheader)
        raw = {**raw, "variants": [variant_a(subject, preheader), *variants[1:]]}
    for index, item in enumerate(variants if isinstance(variants, list) else []):
        line = item.get("subject") if isinstance(item, dict) and index else None
        if isinstance(line, str) and ("\n" in line or "\r" in line):
            raise ValidationError(_("Variant %(letter)s: the subject must be one line.",
                                    letter=LETTERS[index]), field=f"{FIELD}.variants[{index}].subject")
    try:
        cleaned = clean_ab_test(raw)
    except ValidationError as exc:
        raise ValidationError(exc.message, field=where(raw)) from None
    assert cleaned is not None
    _refuse_the_same(cleaned)
    return cleaned


def _refuse_another_a(first: dict[str, Any], subject: str, preheader: str) -> None:
    own = {"subject": (subject or "").strip(), "preheader": (preheader or "").strip()}
    for name in ("subject", "preheader", "body"):
        if first.get(name) is not None and not isinstance(first[name], str):
            raise ValidationError(_("Variant %(letter)s: the %(field)s must be text.", letter="A",
                                    field=name), field=f"{FIELD}.variants[0].{name}")
    for name in ("subject", "preheader"):
        given = first.get(name)
        if isinstance(given, str) and given.strip() and given.strip() != own[name]:
            raise ValidationError(_("Variant A is the broadcast itself: its subject and "
                                    "preheader are the broadcast's. Leave them out, or change "
                                    "the broadcast's."), field=f"{FIELD}.variants[0].{name}")
    body = first.get("body")
    if isinstance(body, str) and body.strip():
        raise ValidationError(_("Variant A is the broadcast itself: its body is the "
                                "broadcast's. Leave it out, or change the broadcast's body."),
                              field=f"{FIELD}.variants[0].body")


def _refuse_the_same(cleaned: dict[str, Any]) -> None:
    """Two variants that read alike once an empty preheader or body is taken as A's."""
    a = cleaned["variants"][0]
    seen: dict[tuple[str, str, str], int] = {}
    for index, variant in enumerate(cleaned["variants"]):
        key = (variant["subject"], variant["preheader"] or a["preheader"], variant["body"])
        if key in seen:
            raise ValidationError(_("Variants %(first)s and %(second)s are the same: make "
                                    "each one different.", first=LETTERS[seen[key]],
                                    second=LETTERS[index]),
                                  field=f"{FIELD}.variants[{index}].subject")
        seen[key] = index


def where(raw: Any) -> str:
    """The field of `raw` that `clean_ab_test` refuses first (its checks in its order)."""
    if not isinstance(raw, dict):
        return FIELD
    variants = raw.get("variants")
    if not isinstance(variants, list) or not 2 <= len(variants) <= MAX_VARIANTS:
        return f"{FIELD}.variants"
    texts: list[tuple[str, str, str]] = []
    twin = None
    for index, item in enumerate(variants):
        if not isinstance(item, dict):
            return f"{FIELD}.variants[{index}]"
        for name, limit in (("subject", MAX_LINE_CHARS), ("preheader", MAX_LINE_CHARS),
                            ("body", MAX_BODY_CHARS)):
            value = item.get(name)
            if value is not None and (not isinstance(value, str) or len(value) > limit):
                return f"{FIELD}.variants[{index}].{name}"
        if not (item.get("subject") or "").strip():
            return f"{FIELD}.variants[{index}].subject"
        text = ((item.get("subject") or "").strip(), (item.get("preheader") or "").strip(),
                item.get("body") or "")
        if text in texts and twin is None:
            twin = index
        texts.append(text)
    if twin is not None:
        return f"{FIELD}.variants[{twin}].subject"
    stand_ins = [{"subject": LETTERS[n]} for n in range(len(variants))]
    for key in ("share", "measure", "wait_hours", "default"):
        if key in raw:
            try:
                clean_ab_test({"variants": stand_ins, key: raw[key]})
            except ValidationError:
                return f"{FIELD}.{key}"
    return FIELD


def stage_ab_test(session: Session, broadcast_id: int, raw: Any, *, subject: str | None = None,
                  preheader: str | None = None) -> dict[str, Any] | None:
    """Check `raw` and write it into the draft in the caller's transaction (no commit).
    `subject`/`preheader`: the draft's as this same change leaves them (default: as saved).
    NotFound, Conflict (not a draft: nothing written) or ValidationError."""
    broadcast = session.get(Broadcast, broadcast_id)
    if broadcast is None:
        raise NotFound(_("There is no such broadcast."))
    if broadcast.status != lifecycle.DRAFT.value:
        raise Conflict(_("This broadcast has been sent or scheduled: its A/B test can no "
                         "longer change."))
    cleaned = clean_for(raw, subject=broadcast.subject if subject is None else subject,
                        preheader=broadcast.preheader if preheader is None else preheader)
    result = session.execute(
        update(Broadcast)
        .where(Broadcast.id == broadcast_id, Broadcast.status == lifecycle.DRAFT.value)
        .values(ab_test=cleaned, updated_at=utcnow()))
    if rowcount(result) == 0:
        raise Conflict(_("This broadcast has been sent or scheduled: its A/B test can no "
                         "longer change."))
    return cleaned


def set_ab_test(session: Session, broadcast_id: int, raw: Any) -> dict[str, Any] | None:
    """Set (or with None remove) a draft's A/B test, one commit; the test as stored."""
    try:
        cleaned = stage_ab_test(session, broadcast_id, raw)
    except Exception:
        session.rollback()
        raise
    session.commit()
    return cleaned


# ---------------------------------------------------------------- a test copy of one variant

TEST_FIELD = "variant"


def chosen_variant(broadcast: Broadcast, given: Any) -> int:
    """The variant a test copy is of, from its letter ("A" to "D"; None: A, the broadcast's
    own, with or without a test): one the broadcast has, or ValidationError at `variant`."""
    if given is None:
        return 0
    letters = LETTERS[:max(1, len((broadcast.ab_test or {}).get("variants") or []))]
    if not isinstance(given, str) or len(given) != 1 or given not in letters:
        raise ValidationError(_("Choose a variant of this broadcast's A/B test (%(letters)s).",
                                letters=", ".join(letters)), field=TEST_FIELD)
    return LETTERS.index(given)


def draft_variant(broadcast: Broadcast, variant: int) -> tuple[str, str, str | None]:
    """(subject, preheader, its own body or None for the broadcast's) of a variant as the
    draft holds it now; 0 is the broadcast itself. As `ab_sending.freeze_variants` freezes
    it at Send: a variant without a preheader or body takes A's."""
    if variant == 0:
        return broadcast.subject, broadcast.preheader, None
    own = broadcast.ab_test["variants"][variant]  # type: ignore[index]  # chosen_variant checked
    body = own.get("body") or ""
    return own["subject"], own.get("preheader") or broadcast.preheader, body if body.strip() else None
