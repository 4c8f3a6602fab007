"""The A/B test on the pages, on both databases: the editor's section (off by default,
saved and reloaded with the draft by Save and autosave, refused at the field with nothing
saved, the reason instead of the fields where a test is not possible, variant A following
the broadcast's subject), the send page's plan, and the result of a decided test on the
broadcast's page, its columns written as the worker writes them."""

from __future__ import annotations

import re
from datetime import timedelta

import pytest
from sqlalchemy import select

from broadside.campaigns.broadcasts import ab_drafts, ab_tests, drafts
from broadside.core.models import Broadcast, Delivery, MailingList, PersonActivity, Subscriber
from broadside.core.timeutil import utcnow
from tests.helpers import csrf_token_from, make_list
from webapp.extensions import db

SUBJECT = "Our autumn news"


@pytest.fixture
def people_list(app):
    mailing_list = make_list(db.session, 40, name="Readers")
    mailing_list.per_person_tracking = True
    db.session.commit()
    return mailing_list


@pytest.fixture
def draft(people_list) -> Broadcast:
    broadcast = drafts.create_draft(db.session, list_id=people_list.id, subject=SUBJECT,
                                    body="# Autumn\n\nHello {{ name }}!")
    broadcast.tracking = "per_person"
    db.session.commit()
    return broadcast


def editor_form(client, broadcast: Broadcast, **fields) -> dict:
    page = client.get(f"/broadcasts/{broadcast.id}/edit")
    assert page.status_code == 200
    return {"csrf_token": csrf_token_from(page.text), "audience": f"list:{broadcast.list_id}",
            "subject": SUBJECT, "preheader": "", "body": "# Autumn\n\nHello {{ name }}!",
            "ab-shown": "1", **fields}


TEST_FIELDS = {"ab-on": "1", "ab-1-subject": "Autumn is here", "ab-2-subject": "Read this first",
               "ab-2-body": "# Other body", "ab-share": "30", "ab-measure": "clicks",
               "ab-wait": "6", "ab-default": "1"}
STORED = {"variants": [{"subject": SUBJECT, "preheader": "", "body": ""},
                       {"subject": "Autumn is here", "preheader": "", "body": ""},
                       {"subject": "Read this first", "preheader": "", "body": "# Other body"}],
          "share": 30, "measure": "clicks", "wait_hours": 6, "default": 1}


def stored(broadcast_id: int):
    db.session.expire_all()
    return db.session.get(Broadcast, broadcast_id)


def test_the_section_is_off_by_default_and_saves_and_reloads_with_the_draft(logged_in_client, draft):
    page = logged_in_client.get(f"/broadcasts/{draft.id}/edit").text
    assert 'id="ab-on"' in page and not re.search(r'id="ab-on"[^>]*checked', page)
    assert re.search(r'id="ab-0-subject">' + SUBJECT, page)
    response = logged_in_client.post(f"/broadcasts/{draft.id}/edit",
                                     data=editor_form(logged_in_client, draft, **TEST_FIELDS))
    assert response.status_code == 303, response.text
    assert stored(draft.id).ab_test == STORED
    page = logged_in_client.get(f"/broadcasts/{draft.id}/edit").text
    assert re.search(r'id="ab-on"[^>]*checked', page)
    assert 'name="ab-1-subject" value="Autumn is here"' in page
    assert re.search(r'name="ab-2-body"[^>]*>\s*# Other body</textarea>', page)
    assert re.search(r'<option value="1" selected>', page)
    assert re.search(r'value="clicks" id="ab-measure-clicks" checked', page)
    assert 'name="ab-share" value="30"' in page and 'name="ab-wait" value="6"' in page
    # The subject edited (autosave): variant A follows it, B and C stay.
    form = editor_form(logged_in_client, draft, **{**TEST_FIELDS, "subject": "Autumn news"})
    assert logged_in_client.post(f"/broadcasts/{draft.id}/autosave", data=form).status_code == 200
    saved = stored(draft.id)
    assert saved.subject == "Autumn news"
    assert saved.ab_test["variants"][0]["subject"] == "Autumn news"
    assert saved.ab_test["variants"][1:] == STORED["variants"][1:]
    # The box off: the test is removed.
    form = editor_form(logged_in_client, draft, **{"ab-1-subject": "Autumn is here"})
    assert logged_in_client.post(f"/broadcasts/{draft.id}/edit", data=form).status_code == 303
    assert stored(draft.id).ab_test is None


def test_a_subject_edit_elsewhere_keeps_variant_a_in_step(app, draft):
    ab_drafts.set_ab_test(db.session, draft.id, {"variants": [{}, {"subject": "Other"}]})
    drafts.update_draft(db.session, draft.id, list_id=draft.list_id, subject="New one",
                        preheader="Short", body="Hi")
    assert stored(draft.id).ab_test["variants"] == [
        {"subject": "New one", "preheader": "Short", "body": ""},
        {"subject": "Other", "preheader": "", "body": ""}]


def test_ticking_the_box_does_not_stop_autosave_until_a_variant_is_written(logged_in_client, draft):
    form = editor_form(logged_in_client, draft, **{"ab-on": "1", "subject": "Typed on"})
    assert logged_in_client.post(f"/broadcasts/{draft.id}/autosave", data=form).status_code == 200
    saved = stored(draft.id)
    assert saved.subject == "Typed on" and saved.ab_test is None  # the rest saved, no test yet
    response = logged_in_client.post(f"/broadcasts/{draft.id}/edit", data=form)  # Save says why
    assert response.status_code == 422 and 'id="ab-1-subject-error"' in response.text
    form["ab-1-preheader"] = "Only a preheader"
    refused = logged_in_client.post(f"/broadcasts/{draft.id}/autosave", data=form)
    assert refused.status_code == 422 and "Variant B needs a subject" in refused.text


@pytest.mark.parametrize("fields, spot, said", [
    ({"ab-1-subject": ""}, "ab-1-subject", "Variant B needs a subject"),
    ({"ab-1-subject": "", "ab-2-subject": "x"}, "ab-1-subject", "Variant B needs a subject"),
    ({"ab-3-subject": "Fourth", "ab-2-subject": ""}, "ab-2-subject", "Variant C needs a subject"),
    ({"ab-share": "80"}, "ab-share", "from 5 to 50"),
    ({"ab-share": "lots"}, "ab-share", "from 5 to 50"),
    ({"ab-wait": "0"}, "ab-wait", "from 1 to 72"),
    ({"ab-measure": "likes"}, "ab-measure", "opens or clicks"),
    ({"ab-default": "3"}, "ab-default", "one of the variants"),
    ({"ab-2-subject": "Autumn is here", "ab-2-body": ""}, "ab-2-subject", "are the same"),
    ({"ab-1-subject": "Changed"}, "ab-1-subject", "are the same"),  # as A, the new subject
])
def test_a_refused_test_says_why_at_its_field_and_saves_nothing(logged_in_client, draft, fields,
                                                                 spot, said):
    form = editor_form(logged_in_client, draft, **{**TEST_FIELDS, "subject": "Changed", **fields})
    response = logged_in_client.post(f"/broadcasts/{draft.id}/edit", data=form)
    assert response.status_code == 422
    assert re.search(rf'id="{spot}-error" role="alert">[^<]*' + re.escape(said), response.text)
    assert re.search(rf'id="{spot}"[^>]*aria-invalid="true"', response.text)
    # What was typed is kept for another try.
    assert re.search(r'id="ab-on"[^>]*checked', response.text)
    saved = stored(draft.id)
    assert saved.subject == SUBJECT and saved.ab_test is None  # nothing saved
    autosaved = logged_in_client.post(f"/broadcasts/{draft.id}/autosave", data=form)
    assert autosaved.status_code == 422 and said in autosaved.text
    assert stored(draft.id).ab_test is None


@pytest.mark.parametrize("change, said", [
    ("versions", "versions in other languages"),
    ("tracking", "choose it under Tracking"),
    ("list", "per-person tracking on this list"),
])
def test_where_a_test_is_not_possible_the_reason_stands_instead_of_the_fields(
        logged_in_client, draft, change, said):
    ab_drafts.set_ab_test(db.session, draft.id, {"variants": [{}, {"subject": "Other"}]})
    broadcast = db.session.get(Broadcast, draft.id)
    if change == "versions":
        broadcast.versions = [{"locale": "de", "subject": "Hallo", "preheader": "", "body": "x"}]
    elif change == "tracking":
        broadcast.tracking = "aggregate"
    else:
        db.session.get(MailingList, draft.list_id).per_person_tracking = False
    db.session.commit()
    page = logged_in_client.get(f"/broadcasts/{draft.id}/edit").text
    assert re.search(r'id="ab-refusal">[^<]*' + re.escape(said), page)
    assert 'id="ab-on"' not in page and 'name="ab-1-subject"' not in page
    # The test set up earlier stays unless the box is ticked.
    form = editor_form(logged_in_client, draft)
    del form["ab-shown"]
    assert logged_in_client.post(f"/broadcasts/{draft.id}/edit", data=form).status_code == 303
    assert stored(draft.id).ab_test is not None
    form["ab-shown"] = "1"
    assert logged_in_client.post(f"/broadcasts/{draft.id}/edit", data=form).status_code == 303
    assert stored(draft.id).ab_test is None
    send_page = logged_in_client.get(f"/broadcasts/{draft.id}/send").text
    assert 'id="ab-plan"' not in send_page


def test_the_send_page_says_how_the_test_will_run(logged_in_client, draft):
    ab_drafts.set_ab_test(db.session, draft.id, {**STORED, "share": 25})
    page = logged_in_client.get(f"/broadcasts/{draft.id}/send").text
    split = re.search(r'id="ab-split">([^<]*)<', page).group(1)
    assert "About 10 readers (25 % of the audience)" in split and "3 groups of about 3" in split
    assert "Autumn is here" in page and "Read this first" in page
    then = re.sub(r"\s+", " ", re.search(r'id="ab-then">(.*?)</p>', page, re.S).group(1))
    assert "unique clicks" in then and "6 hours" in then and "other 30 readers" in then
    assert "your default, variant B" in then
    db.session.get(Broadcast, draft.id).tracking = "off"
    db.session.commit()
    refused = logged_in_client.get(f"/broadcasts/{draft.id}/send").text
    assert re.search(r'id="ab-refused"', refused) and "per-person tracking" in refused


def decide(broadcast: Broadcast, hits: list[int], *, sent: int = 10, default: int = 0) -> None:
    """Write what the worker writes: the split (each delivery's variant), the test's copies
    sent, their readers' unique clicks, then the decision's columns."""
    test = {**STORED, "default": default}
    ab_drafts.set_ab_test(db.session, broadcast.id, test)
    people = db.session.scalars(select(Subscriber.id).order_by(Subscriber.id)).all()
    now = utcnow()
    rows = []
    for index, subscriber_id in enumerate(people):
        variant = index // sent if index < sent * len(hits) else ab_tests.REST
        rows.append(Delivery(broadcast_id=broadcast.id, subscriber_id=subscriber_id,
                             list_id=broadcast.list_id, variant=variant,
                             status="sent" if variant >= 0 else "pending",
                             sent_at=now if variant >= 0 else None))
    db.session.add_all(rows)
    db.session.flush()
    for variant, count in enumerate(hits):
        for row in [r for r in rows if r.variant == variant][:count]:
            db.session.add(PersonActivity(broadcast_id=broadcast.id, delivery_id=row.id,
                                          kind="click", position=0))
    figures = [ab_tests.VariantFigures(n, sent, h) for n, h in enumerate(hits)]
    verdict = ab_tests.judge(figures, default)
    b = db.session.get(Broadcast, broadcast.id)
    b.status, b.ab_seed, b.tracking = "sent", 12345, "per_person"
    b.ab_wait_until = now - timedelta(minutes=5)
    b.ab_winner, b.ab_decided_at = verdict.winner, now
    b.ab_result = ab_tests.result_record(figures, verdict, "clicks")
    db.session.commit()


def test_a_decided_test_shows_each_variant_its_interval_and_the_clear_winner(logged_in_client, draft):
    decide(draft, [1, 9, 2])
    page = logged_in_client.get(f"/broadcasts/{draft.id}").text
    assert re.search(r'id="ab-phase" data-phase="decided">Decided at [^<]*variant B went', page)
    row = re.search(r'id="ab-variant-B">(.*?)</li>', page, re.S).group(1)
    assert "Autumn is here" in row and "sent to the rest" in row
    assert "9 of 10 clicked: 90.0 %" in row
    low, high = ab_tests.wilson_interval(9, 10)
    assert f"{100 * low:.1f}–{100 * high:.1f} %" in row
    assert re.search(r'<rect class="rate" x="0" y="2" width="90.0"', row)  # scale: 100 %
    assert re.search(rf'<line class="whisker" x1="{round(100 * low, 2)}" x2="{round(100 * high, 2)}"', row)
    assert re.search(r'id="ab-variant-A">.*?1 of 10 clicked: 10.0 %', page, re.S)
    verdict = re.search(r'id="ab-verdict" data-clear="yes">([^<]*)<', page).group(1)
    p = ab_tests.judge([ab_tests.VariantFigures(n, 10, h) for n, h in enumerate([1, 9, 2])], 0).p_value
    assert "Variant B's rate is clearly the highest" in verdict and f"p = {p:.3f}" in verdict


def test_a_test_without_a_clear_winner_says_the_default_went(logged_in_client, draft):
    decide(draft, [3, 4, 3], default=2)
    page = logged_in_client.get(f"/broadcasts/{draft.id}").text
    verdict = re.search(r'id="ab-verdict" data-clear="no">([^<]*)<', page).group(1)
    assert "No clear winner" in verdict and "your default, C, went to the rest" in verdict
    assert re.search(r'id="ab-variant-C">.*?sent to the rest', page, re.S)
    assert "sent to the rest" not in re.search(r'id="ab-variant-B">(.*?)</li>', page, re.S).group(1)
