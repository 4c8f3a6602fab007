"""The per-recipient fast paths (rendering a million messages on two cores), each against what it replaces.

tests/webapp/test_render_identical.py holds whole messages to golden digests; here each piece
is compared with the library call it stands for, over inputs built to reach its edges (the
length where a header stops fitting one encoded word, a payload zlib shortens, a moment
before the year 1000 or with an offset), so a difference shows where it is.
"""

from __future__ import annotations

import random
import re
import zlib
from datetime import datetime, timedelta, timezone
from email.header import Header

import pytest
from itsdangerous import URLSafeSerializer

import broadside.mail.mime as mime
from broadside.core.signing import FastDumps
from broadside.mail.rendering import _blank_lines
from broadside.mail.unsubscribe_tokens import joined_text


def _header(value: str) -> str:
    return Header(value, "utf-8", maxlinelen=998).encode(linesep="\r\n")


def test_encoded_word_is_headers_own():
    rng = random.Random(47)
    pieces = ["a", " ", "é", "✉", "=", "?", "_", "Z", "😀", "ö", "xxxx", "<", '"', "\x01"]
    values = []
    for _ in range(800):  # (Header costs ~n² in the value's length: kept short)
        value = "".join(rng.choice(pieces) for _ in range(rng.randint(1, rng.choice([8, 40]))))
        values.append(" ".join(value.split()))
    # around the end of the first line: where Header starts splitting, in each encoding
    values += ["é" * n for n in range(367, 372)]  # base64 the shorter; 369 the last to fit
    values += ["a" * n + "é" for n in range(978, 983)]  # Q the shorter; 980 the last to fit
    values += ["ab" * n + "é" for n in range(488, 493)]
    checked = 0
    for value in values:
        if not value or value.isascii():
            continue
        assert mime._header_value(value) == _header(value), value
        checked += 1
    assert checked > 600
    # and a value past one line still goes through Header (folded onto several lines)
    long = "Zoë " * 100 + "x" * 700
    assert mime._header_value(long) == _header(long.strip())
    assert "\r\n" in mime._header_value(long)


def test_fast_dumps_payload_is_itsdangerous():
    rng = random.Random(3)
    serializer = URLSafeSerializer("secret-key", salt="a salt")
    dumps = FastDumps(serializer)
    objects = [[rng.randrange(2**31), rng.randrange(2**31), rng.choice([None, 7]), "abcDEF-_0123"]
               for _ in range(300)]
    objects += [[1111111111, 1111111111, 1111111111, "AAAAAAAAAAAA"],  # zlib shortens this one
                [7, 0, "https://example.com/" + "a" * 300, 1],
                ["é ✉ \"quoted\" \\ \n", None, True, 1.5, {"k": [1, 2]}], [], "", 0]
    compressed = 0
    for obj in objects:
        token = dumps(obj)
        compressed += token.startswith(".")
        assert token == serializer.dumps(obj), obj
    assert compressed >= 2


def test_compress_is_zlibs_byte_for_byte():
    """`signing.compress` is `zlib.compress` on every length around its small-window limit,
    for data that compresses well, a little, or not at all."""
    from broadside.core import signing

    assert signing._SMALL_WINDOW  # this machine's zlib: the small window is what is tested
    rng = random.Random(19)
    alphabets = [b"a", b"ab", b"abc", b"0123456789", b'[1,"A', bytes(range(32, 127)),
                 bytes(range(256))]
    checked = 0
    for length in [*range(0, 40), *range(signing.SMALL_PAYLOAD - 30, signing.SMALL_PAYLOAD + 30)]:
        for alphabet in alphabets:
            for _ in range(6):
                data = bytes(rng.choice(alphabet) for _ in range(length))
                assert signing.compress(data) == zlib.compress(data), data
                checked += 1
    # a repeat just within the window's reach, and one just past it
    for gap in (240, 247, 248, 249, 250, 251):
        data = b"xyzw" + bytes(rng.randrange(256) for _ in range(gap)) + b"xyzw"
        assert signing.compress(data) == zlib.compress(data)
    assert checked > 4000


def test_check_message_fails_exactly_where_message_bytes_does():
    """A JSON API's message is not assembled (`mime.check_message`), and fails for the same
    values as the MIME message would: addresses, subjects and header values that cannot be
    written, bodies that are not text (a lone surrogate from an attribute)."""
    rng = random.Random(16)
    addresses = ["a@b.example", "jörg@b.example", "Zoë <z@b.example>", '"A, B" <a@b.example>',
                 "x\r\nBcc: e@vil.example", "", "<>", "ü", "a@b.example\udc80"]
    texts = ["Hi", "Zoë's news ✉", "a\r\nBcc: e@vil.example", "\udc80", "", "x" * 2000,
             "=?utf-8?q?x?=", "tab\there"]
    failed = 0
    for _ in range(600):
        rendered = mime.RenderedEmail(subject=rng.choice(texts), html=rng.choice(texts),
                                      text=rng.choice(texts))
        values = {"from_addr": rng.choice(addresses), "to_addr": rng.choice(addresses),
                  "message_id": rng.choice(["<m@b.example>", "m@b.example"]),
                  "headers": {"List-Unsubscribe": f"<{rng.choice(texts)}>"}}
        try:
            mime.message_bytes(rendered, **values)
        except Exception as error:
            with pytest.raises(type(error)):
                mime.check_message(rendered, **values)
            failed += 1
        else:
            mime.check_message(rendered, **values)
    assert 100 < failed < 550  # both kinds seen, many times


def test_joined_text_of_a_moment_is_strftimes():
    rng = random.Random(11)
    first, span = datetime(1000, 1, 1), (datetime(9999, 12, 31) - datetime(1000, 1, 1)).days
    for _ in range(2000):  # whole seconds and not, over every year strftime pads to four digits
        moment = first + timedelta(days=rng.randrange(span), seconds=rng.randrange(86_400),
                                   microseconds=rng.choice([0, rng.randrange(1_000_000)]))
        assert joined_text(moment) == f"{moment:%Y-%m-%d %H:%M:%S.%f}"
    # the two moments the fast path leaves to strftime: an offset, a year before 1000
    aware = datetime(2026, 1, 2, 3, 4, 5, 6, tzinfo=timezone(timedelta(hours=2)))
    assert joined_text(aware) == "2026-01-02 03:04:05.000006"
    early = datetime(999, 1, 2, 3, 4, 5)
    assert joined_text(early) == f"{early:%Y-%m-%d %H:%M:%S.%f}"


def test_text_part_encodings_are_the_same_as_before():
    """`_text_part` decides 7bit or quoted-printable as before; the line breaks it normalises
    (CR, CRLF) and the lines it splits once are the same ones."""
    def before(content_type: str, body: str) -> bytes:
        import binascii

        data = body.replace("\r\n", "\n").replace("\r", "\n").encode("utf-8")
        if data.isascii() and b"\x00" not in data and max(map(len, data.split(b"\n"))) <= 998:
            encoding, encoded = "7bit", data.replace(b"\n", b"\r\n")
        else:
            encoding = "quoted-printable"
            encoded = binascii.b2a_qp(data, istext=True).replace(b"\n", b"\r\n")
        return (f"Content-Type: {content_type}; charset=\"utf-8\"\r\n"
                f"Content-Transfer-Encoding: {encoding}\r\n\r\n").encode() + encoded

    rng = random.Random(23)
    pieces = ["a", " ", "\t", ".", "=", "\n", "\r", "\r\n", "é", "x" * 200, "\x00", "<p>", "\n\n\n"]
    for _ in range(2000):
        body = "".join(rng.choice(pieces) for _ in range(rng.randint(0, 30)))
        for content_type in ("text/plain", "text/html"):
            assert mime._text_part(content_type, body) == before(content_type, body), body
            assert mime._text_part(content_type, body) == before(content_type, body), body


def test_blank_lines_are_collapsed_as_before():
    rng = random.Random(31)
    before = re.compile(r"\n{3,}")
    for _ in range(5000):
        text = "".join(rng.choice(["\n", "a", "\r", " ", "\n\n\n"]) for _ in range(rng.randint(0, 30)))
        assert _blank_lines.sub("\n\n", text) == before.sub("\n\n", text), text


def test_tracking_with_warm_caches_is_the_same_as_cold():
    """The tracker keeps, per slice, which template link each href is and (for tokens naming
    no person) each signed URL: a recipient's copy from a tracker that served others before
    is the copy a fresh tracker makes, in both modes, across a slot change."""
    from broadside.campaigns.analytics.rewrite import Tracker
    from broadside.mail.rendering import compiled_revision, freeze_content

    body = ("[a](https://example.com/a) [b](https://example.com/b?c={{ attributes.city }}) "
            "[a again](https://example.com/a) [mail](mailto:x@example.com)\n\n"
            "{% if attributes.vip %}[vip](https://example.com/vip){% endif %} "
            "[last](https://example.com/z)\n")
    frozen = freeze_content(subject="Hi", preheader="", body_markdown=body, from_name="P",
                            from_email="p@example.org", postal_address="")
    compiled = compiled_revision("Hi", frozen.html_template, frozen.text_template)
    moments = iter([1_764_590_400.0 + 4 * i for i in range(100)])  # 10 s slots: some shared

    def tracker(clock) -> Tracker:
        made = Tracker(None, 7, frozen.html_template, secret_key="k" * 32,  # type: ignore[arg-type]
                       base_url="https://news.example.org", clock=clock)
        made._lists = {3: (False, True)}  # the list tracks, per person too (no query)
        return made

    now = [0.0]
    warm = tracker(lambda: now[0])
    for mode in ("aggregate", "per_person"):
        for i, city in enumerate(["Oslo", "Lyon & <x>", "Oslo", "Malmö", "Oslo", "Lyon & <x>"]):
            now[0] = next(moments)
            rendered = compiled.render(email=f"r{i}@example.com", name="R",
                                       attributes={"city": city, "vip": i % 2 == 0},
                                       unsubscribe_url="https://news.example.org/u/t")
            cold = tracker(lambda: now[0]).apply(rendered, mode, delivery_id=100 + i, list_id=3)
            assert warm.apply(rendered, mode, delivery_id=100 + i, list_id=3) == cold
            assert "/t/c/" in cold.html and "/t/o/" in cold.html
