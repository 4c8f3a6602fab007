"""CSV export (a list or a filtered view, streamed) and the import -> export round trip."""

import csv
import io

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st
from sqlalchemy import select

from broadside.audience import lists as lists
from broadside.audience.subscribers import service
from broadside.audience.transfer.export import safe_cell
from broadside.audience.transfer.people import EmailNormaliser
from broadside.core.addresses import normalise_email
from broadside.core.errors import ValidationError
from broadside.core.models import Subscriber
from tests.webapp.test_import import upload
from webapp.extensions import db


def read_csv(text: str) -> list[dict[str, str]]:
    return list(csv.DictReader(io.StringIO(text)))


def people() -> dict[str, tuple[str, dict]]:
    db.session.expire_all()
    return {s.email: (s.name, s.attributes) for s in db.session.scalars(select(Subscriber))}


ORIGINAL = (
    "email,name,city,plan\n"
    "ann@example.com,Ann Archer,Paris,gold\n"
    "bob@example.com,\"Baker, Bob\",,free\n"
    "cy@example.com,=HYPERLINK(\"http://evil\"),@SUM(A1),+44 20 7946 0000\n"
    "dee@example.com,Dée Ünicode,Zürich,-\n"
).encode()


def test_import_then_export_then_import_gives_the_same_people(logged_in_client, app):
    first = lists.create_list(db.session, "First")
    second = lists.create_list(db.session, "Second")
    first_id, second_id = first.id, second.id
    upload(logged_in_client, first_id, ORIGINAL)
    before = people()
    response = logged_in_client.get(f"/subscribers/export.csv?list={first_id}")
    assert response.status_code == 200 and response.mimetype == "text/csv"
    assert response.is_streamed
    assert 'filename="subscribers-first.csv"' in response.headers["Content-Disposition"]
    exported = response.get_data()
    rows = read_csv(exported.decode())
    assert {r["email"] for r in rows} == set(before)
    assert list(rows[0]) == ["email", "name", "status", "joined_at", "confirmed_at",
                             "unsubscribed_at", "unsubscribe_source", "suppression",
                             "suppressed_at", "locale", "timezone", "city", "plan"]
    # Formula injection neutralised: a spreadsheet shows these as text.
    cy = next(r for r in rows if r["email"] == "cy@example.com")
    assert cy["name"].startswith("'=") and cy["city"] == "'@SUM(A1)" and cy["plan"].startswith("'+")

    # Erase everyone, import the export into another list: the same people come back.
    for subscriber_id in db.session.scalars(select(Subscriber.id)).all():
        service.erase(db.session, subscriber_id)
    upload(logged_in_client, second_id, exported, filename="subscribers-first.csv")
    assert people() == before


def test_export_of_a_filtered_view_has_only_the_people_shown(logged_in_client, app):
    weekly = lists.create_list(db.session, "Weekly")
    weekly_id = weekly.id
    upload(logged_in_client, weekly_id,
           b"email,name\nann@example.com,Ann\nandy@example.com,Andy\nbob@example.com,Bob\n")
    service.unsubscribe(db.session, service.find_by_email(db.session, "andy@example.com").id,
                        weekly_id)
    service.save_subscriber(db.session, email="anon@example.com")  # on no list
    text = logged_in_client.get(
        f"/subscribers/export.csv?q=an&list={weekly_id}&status=active").get_data(as_text=True)
    assert [r["email"] for r in read_csv(text)] == ["ann@example.com"]
    everyone = logged_in_client.get("/subscribers/export.csv").get_data(as_text=True)
    assert len(read_csv(everyone)) == 4
    assert everyone.splitlines()[0] == "email,name,lists,joined_at,suppression,suppressed_at,locale,timezone"


def test_export_streams_in_chunks(logged_in_client, app):
    for i in range(2100):
        db.session.add(Subscriber(email=f"p{i}@example.com", name="", attributes={}))
    db.session.commit()
    response = logged_in_client.get("/subscribers/export.csv")
    chunks = list(response.response)
    assert len(chunks) >= 4  # header, then one chunk per 1,000 rows
    assert sum(c.count(b"\n") for c in chunks) == 2101
    response.close()


@pytest.mark.parametrize(("value", "expected"), [
    ("=1+1", "'=1+1"), ("+1", "'+1"), ("-1", "'-1"), ("@x", "'@x"), ("\tx", "'\tx"),
    ("\rx", "'\rx"), ("plain", "plain"), ("", ""), (None, ""), (3, "3"), ({"a": 1}, '{"a": 1}'),
])
def test_cells_a_spreadsheet_would_run_get_an_apostrophe(value, expected):
    assert safe_cell(value) == expected


ADDRESS_CHARS = "aZ09._+-@!#é'\" \t()[]<>,;:xn"


@settings(max_examples=400, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(local=st.text(alphabet=ADDRESS_CHARS, min_size=0, max_size=12),
       domain=st.sampled_from(["example.com", "EXAMPLE.com", "x.test", "localhost", "-a.com",
                               "a_b.com", "xn--80ak6aa92e.com", "exa mple.com", "", "1.2.3.4",
                               "b\u00fccher.de", "a..b.com", "co"]))
def test_the_importers_fast_address_check_agrees_with_normalise_email(local, domain):
    raw = f"{local}@{domain}"
    try:
        expected = normalise_email(raw)
    except ValidationError:
        expected = None
    normalise = EmailNormaliser()
    for _ in range(2):  # the second call uses the remembered domain
        try:
            got = normalise(raw)
        except ValidationError:
            got = None
        assert got == expected
