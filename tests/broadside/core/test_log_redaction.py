"""Redaction over request data: linear in the input, and it covers every secret a URL carries."""

from __future__ import annotations

import logging
import time

from broadside.core.logs import RedactFilter, secrets_in

HEADER_BYTES = 8 * 1024


def access_line(user_agent: str, referer: str) -> str:
    """A gunicorn access-log line, as `webapp.logs.GunicornLogger` hands it to the filter."""
    return (f'127.0.0.1 - - [30/Nov/2026:18:00:00 +0000] "GET /healthz HTTP/1.1" 200 2 '
            f'"{referer}" "{user_agent}"')


def logging_seconds(line: str) -> float:
    """The best of five: what the redacting filter costs to log this line once."""
    redactor = RedactFilter({"a-configured-secret"})
    best = float("inf")
    for _ in range(5):
        record = logging.LogRecord("gunicorn.access", logging.INFO, __file__, 1, line, None, None)
        started = time.perf_counter()
        redactor.filter(record)
        best = min(best, time.perf_counter() - started)
    return best


def test_a_hostile_8kb_header_costs_the_log_line_milliseconds():
    # "a.a.a..." made the URL-password pattern try a scheme at every position and read to the
    # end each time: ~0.25 s of CPU per request line, quadratic in the header's length.
    hostile = "a." * (HEADER_BYTES // 2)
    plain = "Mozilla/5.0 (X11; Linux x86_64) " * (HEADER_BYTES // 32)
    hostile_cost = logging_seconds(access_line(hostile, hostile))
    plain_cost = logging_seconds(access_line(plain, plain))
    assert hostile_cost < 0.02, f"redacting the hostile line took {hostile_cost * 1000:.1f} ms"
    # Measured against a benign line of the same length in the same run, so a slow machine
    # does not decide the verdict: linear patterns keep the two within a small factor.
    assert hostile_cost < 20 * max(plain_cost, 1e-4)


def test_every_pattern_stays_linear_on_its_own_worst_case():
    for unit in ("a.", "bs_", "/u/a", "/join/confirm/a", "Bearer ", "?password=", "a://a:", "/t/c/a"):
        line = unit * (HEADER_BYTES // len(unit))
        assert logging_seconds(line) < 0.05, unit


def test_double_opt_in_links_are_redacted_like_unsubscribe_links():
    redactor = RedactFilter()
    line = '"GET /join/confirm/WzEsMiwxNzY0NTIwMDAwMDAwMDAwXQ.aGVsbG8.c2lnbmF0dXJl HTTP/1.1" 200'
    assert redactor.redact(line) == '"GET /join/confirm/[redacted] HTTP/1.1" 200'


def test_passwords_in_query_strings_are_secrets_and_are_masked():
    config = {
        "DATABASE_URL": "postgresql://db.internal/broadside?user=app&password=s3cret%2Fvalue",
        "REDIS_URL": "redis://redis.internal:6379/0?password=an0ther-secret",
        "SECRET_KEY": "x" * 32,
    }
    found = secrets_in(config)
    assert {"s3cret%2Fvalue", "s3cret/value", "an0ther-secret"} <= found
    redactor = RedactFilter(found)
    for name in ("DATABASE_URL", "REDIS_URL"):
        text = redactor.redact(f"could not connect to {config[name]}")
        assert "s3cret" not in text and "an0ther" not in text
    # Even a URL the configuration does not know is masked by its shape.
    assert RedactFilter().redact("postgresql://h/db?sslmode=require&password=hunter22") == (
        "postgresql://h/db?sslmode=require&password=****")


def test_tracking_tokens_are_redacted_in_any_line():
    # The development server's access line and an unhandled error's line name the path
    # (gunicorn's access log rewrites the whole line: tests/webapp/test_tracking_access_log.py).
    redactor = RedactFilter()
    click = "WzEsMCwiaHR0cHM6Ly9hY21lLmV4YW1wbGUvcC9yZWFkZXJAZXhhbXBsZS5jb20iLDE3OTZd.c2ln"
    assert redactor.redact(f'"GET /t/c/{click} HTTP/1.1" 302') == '"GET /t/c/[redacted] HTTP/1.1" 302'
    assert redactor.redact(f"Exception on /t/o/{click}.gif [GET]") == "Exception on /t/o/[redacted] [GET]"
    long = "." + "A" * 3000 + ".sig"  # a click token grows with its link's address
    assert redactor.redact(f"GET /t/c/{long} HTTP/1.1") == "GET /t/c/[redacted] HTTP/1.1"


def test_a_single_use_code_in_the_api_path_is_redacted():
    redactor = RedactFilter()
    assert redactor.redact('"POST /api/codes/SAVE-7KQ2MXH9/redeem HTTP/1.1" 200') == (
        '"POST /api/codes/[redacted]/redeem HTTP/1.1" 200')
    assert redactor.redact('"GET /api/codes/save-7kq2mxh9 HTTP/1.1" 404') == (
        '"GET /api/codes/[redacted] HTTP/1.1" 404')
    assert logging_seconds("/api/codes/a" * (HEADER_BYTES // 12)) < 0.05
