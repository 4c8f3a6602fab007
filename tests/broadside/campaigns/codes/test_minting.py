"""Minting on SQLite and PostgreSQL: one code per send-log row however often it is claimed, a
drawn code that is taken drawn again, the alphabet without look-alikes, the prefix rule, and
`{{ code }}` known only where codes are on."""

from __future__ import annotations

import re
from collections import Counter

import pytest
from sqlalchemy import func, select

from broadside.campaigns.broadcasts import ledger
from broadside.campaigns.broadcasts.drafts import create_draft
from broadside.campaigns.broadcasts.ledger import ATTEMPTS_DELTA, Change
from broadside.campaigns.broadcasts.merge_report import merge_problems, merge_report
from broadside.campaigns.broadcasts.service import send_broadcast
from broadside.campaigns.codes import minting
from broadside.campaigns.codes.fields import check_code_fields
from broadside.core.errors import ValidationError
from broadside.core.models import Code
from jobs.broadcasts import BroadcastRows
from tests.helpers import make_list
from webapp.extensions import db


def a_sending_broadcast(app, size=3, prefix="SAVE"):
    draft = create_draft(db.session, list_id=make_list(db.session, size).id,
                         subject="Code {{ code }}", body="{{ code }}", codes_prefix=prefix)
    return send_broadcast(db.session, draft.id, default_from=app.config["MAIL_FROM"], jobs=None)


def claimed_rows(broadcast_id: int, prefix="SAVE") -> BroadcastRows:
    rows = BroadcastRows(db.session, None, broadcast_id)  # type: ignore[arg-type]
    rows.codes_prefix = prefix  # what `open` reads from the revision
    return rows


def count_codes() -> int:
    return db.session.scalar(select(func.count()).select_from(Code)) or 0


def test_a_row_claimed_again_after_going_back_to_pending_keeps_its_code(app):
    broadcast = a_sending_broadcast(app)
    source = claimed_rows(broadcast.id)
    first = {row.id: row.code for row in source.claim(10)}
    db.session.commit()
    assert len(first) == 3 and all(re.fullmatch(r"SAVE-[A-Z2-9]{8}", c or "") for c in first.values())
    # Refused for now: back to pending (as the outcome of a 4xx is), then claimed again.
    ledger.transition(db.session, broadcast.id, [Change(i, None, {ATTEMPTS_DELTA: 0}) for i in first],
                      source="sending", target="pending")
    db.session.commit()
    again = {row.id: row.code for row in source.claim(10)}
    db.session.commit()
    assert again == first and count_codes() == 3


def test_minting_twice_for_the_same_rows_returns_the_first_codes(app):
    rows = [minting.ToMint(row_id, None, "DUP") for row_id in (11, 12)]
    first = minting.mint(db.session, minting.DELIVERY, rows)
    db.session.commit()
    assert minting.mint(db.session, minting.DELIVERY, rows) == first
    db.session.commit()
    assert count_codes() == 2


def test_a_drawn_code_that_is_taken_is_drawn_again(app):
    taken = minting.mint(db.session, minting.DELIVERY, [minting.ToMint(1, None, "X")],
                         drawn=lambda count: ["AAAAAAAA"] * count)
    assert taken == {1: "X-AAAAAAAA"}
    # The second row draws the taken code first, then another.
    draws = iter([["AAAAAAAA"], ["BBBBBBBB"]])
    minted = minting.mint(db.session, minting.DELIVERY, [minting.ToMint(2, None, "X")],
                          drawn=lambda count: next(draws))
    db.session.commit()
    assert minted == {2: "X-BBBBBBBB"} and count_codes() == 2


def test_codes_are_drawn_from_an_alphabet_without_look_alikes(app):
    assert not set("01OIL") & set(minting.ALPHABET) and len(set(minting.ALPHABET)) == 31
    codes = minting.mint(db.session, minting.DELIVERY,
                         [minting.ToMint(i, None, "P") for i in range(1, 201)])
    drawn = "".join(code[2:] for code in codes.values())
    assert set(drawn) <= set(minting.ALPHABET) and len(set(codes.values())) == 200
    # Uniform over the alphabet (bytes past the last whole round of it are drawn again):
    # 31 letters, 80,000 draws, each about 2,581; a bias of 1/256 would show as ~3,000.
    counts = Counter("".join(minting.draw(10_000)))
    assert set(counts) == set(minting.ALPHABET) and max(counts.values()) < 2_800


@pytest.mark.parametrize("prefix", ["", "save", "SAVE-", "ABCDEFGHIJKLM", "SÄVE", 12, None])
def test_a_prefix_is_one_to_twelve_capitals_or_digits(prefix):
    with pytest.raises(ValidationError) as refused:
        minting.clean_prefix(prefix)
    assert refused.value.field == "codes.prefix"


def test_the_code_field_is_an_error_only_where_codes_are_off(app):
    texts = {"subject": "Your code {{ code }}", "body": "Hi"}
    check_code_fields(texts, True)
    with pytest.raises(ValidationError, match=r"subject: \{\{ code \}\} is filled in only when"):
        check_code_fields(texts, False)
    draft = create_draft(db.session, list_id=make_list(db.session, 1).id, subject="Hi",
                         body="Take {{ code }}")
    [problem] = merge_problems(db.session, draft)
    assert "body, line 1: {{ code }} is filled in only when" in problem.message
    draft.codes_prefix = "SAVE"
    db.session.commit()
    report = merge_report(db.session, draft)
    assert report.problems == [] and report.unknown == []
