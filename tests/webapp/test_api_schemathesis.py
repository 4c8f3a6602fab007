"""The API and its OpenAPI document cannot drift apart: Schemathesis (a third-party
property-based tester) reads the document the app serves and calls every operation with
data it generates from it — valid data, which must be accepted, and invalid data, which must
be refused — through every phase (the document's examples, coverage of each schema's edges,
random fuzzing, and chains of calls that follow the ids the answers give), with every check
it has. Any answer the document does not allow fails the test, named by operation and check,
with a request that reproduces it.

A fixed seed and a fixed number of examples per operation make the run the same every time
(about a minute per database on two cores); on SQLite and on PostgreSQL, against a fresh
instance seeded with a list, subscribers, a segment, a draft, an identity, an automation and
a webhook endpoint, called with a full token.
"""

from __future__ import annotations

import re
import traceback
from collections import Counter
from dataclasses import dataclass
from typing import Any

import pytest
import schemathesis
from schemathesis.engine import events, from_schema
from schemathesis.openapi.checks import RejectedPositiveData

from tests.helpers import make_list
from webapp.extensions import db

pytestmark = pytest.mark.slow

SEED = 38
EXAMPLES = 25  # per operation and phase
# Every check Schemathesis 4 has, but the response-time one (a timing assertion) and the
# object-level one (it needs a second owner's token; the API has one owner).
CHECKS = ("not_a_server_error", "status_code_conformance", "content_type_conformance",
          "response_schema_conformance", "response_headers_conformance",
          "positive_data_acceptance", "negative_data_rejection", "use_after_free",
          "ensure_resource_availability", "missing_required_header", "ignored_auth",
          "unsupported_method", "allow_header_conformance")


# Valid data refused for what exists rather than for its shape, which no schema can state:
# an id in a body (or a filter) naming a list, segment, broadcast or identity that is not
# there, a test send filled from an address nobody has, a webhook host that does not resolve,
# a draft sent after its list or segment was deleted, a bulk action whose list or people went
# meanwhile, an automation enabled without steps or after its trigger's list went, a step id
# that is not one of its steps. Each is a 422 naming the thing.
STATE_REFUSALS = re.compile(r"[Tt]here is no (list|segment|broadcast|sending identity|attachment)\b|"
                            r"^That list does not exist any more\.|"
                            r"^Nobody matches this filter any more|"
                            r"^No subscriber has the address |"
                            r"host \S+ does not resolve|"
                            r"^Choose a list or a segment to send to\.$|"
                            r"^Add at least one step before enabling|"
                            r"^Step \d+: the id must be an existing step's id|"
                            r"^Its list or segment was deleted|"
                            # A resend's subject must differ from its broadcast's (whatever that is).
                            r"^Choose a subject different from the first one's\.|"
                            # A test copy's variant letter: one the broadcast's A/B test has.
                            r"^Choose a variant of this broadcast's A/B test|"
                            r"^Step \d+: this automation has no step with id \d+|"
                            r"of the selection no longer exist|"
                            # What no schema can state: a CSV's content (the file is a binary
                            # part), and a delay's sum past its bound (weeks + days + hours...).
                            r"^The file is empty\.|^The first row must be a header|^This is not a CSV file|"
                            # An image's content, likewise: what Pillow decodes, not a pattern.
                            r"^Choose an image file to upload\.|^This file is not a PNG, JPEG, GIF or "
                            r"WebP image|^This image could not be read to its end|"
                            r"^This image claims |^This animation has |"
                            r"is longer than \d+ days\.|"
                            # A DKIM key's content (PEM is text any pattern lets through); a
                            # key required on POST but kept on PUT (one schema for both); a
                            # provider's transport, which signs itself, kept on a PUT.
                            r"^This private key |^This is not a PEM private key|"
                            r"^Only RSA keys are offered|^This RSA key has \d+ bits|"
                            r"^Give the DKIM private key|^DKIM signing is for SMTP|"
                            # An attachment's content and name (a binary part), and the
                            # total of the files an id list names.
                            r"^Broadside does not send |is named \.\w+ but its content|"
                            r"^The file needs a name|^Give the file's name alone|"
                            r"^The file's name |attachments come to [\d.]+ MB|"
                            # A language tag's shape is a pattern; whether it names a
                            # language is the CLDR's list (Babel), which no pattern states.
                            r"is not a language tag \(such as|"
                            # An A/B test's rules across fields: variant A is the broadcast's
                            # own subject, no two variants alike, the default one of them.
                            r"^Variant A is the broadcast itself|are the same: make each one "
                            r"different\.$|^The default winner must be one of the variants\.$|"
                            # Likewise a time zone's: whether a name is one is the tz
                            # database's list on this machine.
                            r"is not a time zone this server knows|"
                            # Whether an A/B test can run depends on the list's own tracking
                            # switch, the broadcast's languages and hour (what Send reads).
                            r"^An A/B test |"
                            # A feed trigger's rules across its fields: exactly one audience,
                            # a schedule only for a digest.
                            r"^A feed's items go to a list or a segment|belongs to a digest: give|"
                            r"^A daily digest has no weekday|^A feed automation has one step|"
                            # A URL's parts as urllib reads them (host, port, spaces, user).
                            r"^The feed's url |^Put no user name or password in the feed's url|"
                            # A CSV's line endings (the file is a binary part).
                            r"^The lines of this file end with CR only")


def filter_failure(context, failure, case, response) -> bool:
    """Keep every failure but a valid body refused for a state refusal (above)."""
    if not isinstance(failure, RejectedPositiveData) or response.status_code != 422:
        return True
    try:
        error = response.json()["error"]
    except (ValueError, KeyError, TypeError):
        return True
    return not STATE_REFUSALS.search(error)


@pytest.fixture
def app_config(app_config):
    # The seeded webhook endpoint, and those the tester creates, are on loopback.
    return {**app_config, "WEBHOOKS_ALLOW_PRIVATE": "1"}


def seed(client, headers: dict[str, str]) -> None:
    """One of everything, so operations on an id have something to find."""
    weekly = make_list(db.session, 3, "Weekly").id

    def post(path: str, body: dict[str, Any]) -> int:
        response = client.post(path, json=body, headers=headers)
        assert response.status_code in (200, 201), (path, response.json)
        return response.json["id"]

    segment = post("/api/segments", {"name": "Readers", "rules": {"all": [
        {"field": "list", "op": "is_on", "value": weekly}]}})
    identity = post("/api/identities", {"name": "Product", "from": "Product <p@acme.example>",
                                        "transport": "outbox://"})
    post("/api/broadcasts", {"list_id": weekly, "subject": "Hello", "body": "Hi {{ name }}",
                             "identity_id": identity})
    post("/api/broadcasts", {"segment_id": segment, "subject": "To the segment", "body": "x"})
    post("/api/automations", {"name": "Welcome", "trigger": {"type": "joined_list", "list_id": weekly},
                              "steps": [{"subject": "Welcome", "body": "Glad you came."}]})
    post("/api/webhooks", {"url": "http://127.0.0.1:9/hooks", "events": ["subscriber.created"]})


def config(headers: dict[str, str]) -> schemathesis.Config:
    every: dict[str, dict] = {name: {"enabled": True} for name in CHECKS}
    # A body larger than the server takes is refused before it is read (413, documented on
    # every operation with a body): schema-violating data may be refused so too, when the
    # generator makes it hundreds of megabytes.
    every["negative_data_rejection"]["expected-statuses"] = [
        "400", "401", "403", "404", "406", "409", "413", "422", "428"]
    return schemathesis.Config.from_dict({
        "seed": SEED,
        "cache": {"enabled": False},
        "headers": headers,
        "workers": 1,
        # Text without NUL and in UTF-8 (no lone surrogate): the API refuses both in every
        # field (the document says so in words; no JSON Schema keyword can).
        "generation": {"max-examples": EXAMPLES, "deterministic": True, "allow-x00": False,
                       "codec": "utf-8"},
        "checks": {"enabled": False, **every},
        "phases": {"stateful": {"max-steps": 6}},
    })


@dataclass(frozen=True)
class Finding:
    operation: str
    check: str
    title: str
    answer: str  # the status and the error the API gave
    reproduce: str

    def __str__(self) -> str:
        return f"{self.operation} [{self.check}] {self.title}\n    -> {self.answer}\n    {self.reproduce}"


def _answer(response) -> str:
    if response is None:
        return "no answer"
    text = response.content[:300].decode("utf-8", "replace")
    return f"{response.status_code} {re.sub(r'[0-9]+', 'N', text)}"


def run(url: str, headers: dict[str, str]) -> tuple[list[Finding], list[str], Counter]:
    """Every distinct failure (by operation, check, kind and the API's answer), every error,
    and how many requests each phase sent."""
    schema = schemathesis.openapi.from_url(url + "/api/openapi.json", config=config(headers))
    schema.hook(filter_failure)
    findings: dict[tuple[str, ...], Finding] = {}
    errors: list[str] = []
    requests: Counter = Counter()
    for event in from_schema(schema).execute():
        if isinstance(event, events.ScenarioFinished):
            requests[event.phase.value] += len(event.recorder.interactions)
            for case_id, checks in event.recorder.checks.items():
                for check in checks:
                    info = check.failure_info
                    if info is None:
                        continue
                    failure = info.failure
                    answer = _answer(event.recorder.find_response(case_id=case_id))
                    key = (failure.operation or event.recorder.label, check.name, failure.title, answer)
                    findings.setdefault(key, Finding(*key, info.code_sample.strip()[:600]))
        elif isinstance(event, events.NonFatalError | events.FatalError):
            error = event.value if isinstance(event, events.NonFatalError) else event.exception
            errors.append("".join(traceback.format_exception(error))[-1500:])
    return sorted(findings.values(), key=lambda f: (f.operation, f.check)), errors, requests


def test_the_api_answers_as_its_document_says(live_server, client, api_headers, postal_address):
    seed(client, api_headers)
    findings, errors, requests = run(live_server.url, api_headers)
    print("requests by phase:", dict(requests))
    # It tested something: every phase sent requests (the stateful one follows the document's
    # links from the ids answers give).
    assert all(requests[phase] > 0 for phase in ("examples", "coverage", "fuzzing", "stateful")), requests
    report = "\n".join(map(str, findings)) + "\n" + "\n".join(errors)
    assert not findings and not errors, f"{len(findings)} findings, {len(errors)} errors:\n{report}"
