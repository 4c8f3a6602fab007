"""`URLSafeSerializer(secret, salt).dumps(obj)`, byte for byte, at a fraction of the cost.

The worker signs up to a few tokens per recipient (unsubscribe, view in browser, the tracking
pixel and each tracked link). itsdangerous builds a new Signer, derives its key (a SHA-1) and
starts an HMAC for every token; here the key is derived once and the keyed HMAC state is kept,
so each token costs one `hmac.copy()` and one update. The payload is itsdangerous' own
`dump_payload` (compact JSON, zlib when shorter, URL-safe base64), the separator and the
signature encoding its own, so every token is one itsdangerous reads and would have made
(tests/webapp/test_render_identical.py compares them).
"""

from __future__ import annotations

import base64
import hmac
import json
import zlib
from typing import Any

from itsdangerous import URLSafeSerializer
from itsdangerous._json import _CompactJSON
from itsdangerous.encoding import want_bytes
from itsdangerous.signer import HMACAlgorithm

# itsdangerous' `_CompactJSON.dumps` is `json.dumps(obj, ensure_ascii=False,
# separators=(",", ":"))`, which builds this very encoder on every call; here it is built once.
_COMPACT = json.JSONEncoder(ensure_ascii=False, separators=(",", ":"))

# `zlib.compress(data)` is mostly setting up its 32 KB window (36 µs a token on the bench
# machine, for a payload of ~30 bytes). Up to SMALL_PAYLOAD bytes the same deflate stream
# comes from a 512-byte window: the same level, the same memory level (so the same hash
# table, hash chains and symbol buffer) and every earlier byte within reach (a 512-byte
# window reaches 512 - 262 = 250 bytes back), so only the two-byte header differs, and it
# is put back (0x78 0x9c: the default window, the default level). 13 µs. That is zlib's own
# deflate; another library behind the module (zlib-ng) finds its matches its own way, so
# there, and if the samples below ever came out different, every payload takes zlib.compress.
SMALL_PAYLOAD = 250
_ZLIB_HEADER = b"\x78\x9c"


def _small_window(data: bytes) -> bytes:
    small = zlib.compressobj(zlib.Z_DEFAULT_COMPRESSION, zlib.DEFLATED, 9, zlib.DEF_MEM_LEVEL)
    return _ZLIB_HEADER + (small.compress(data) + small.flush())[2:]


_SAMPLES = (b"", b"[1234567,3,42,\"AbCdEfGhIjKl\"]", b"a" * SMALL_PAYLOAD,
            b"[1111111111,1111111111,1111111111,\"AAAAAAAAAAAA\"]", bytes(range(250)))
_SMALL_WINDOW = ("ng" not in zlib.ZLIB_RUNTIME_VERSION
                 and all(_small_window(s) == zlib.compress(s) for s in _SAMPLES))


def compress(data: bytes) -> bytes:
    """`zlib.compress(data)`, byte for byte."""
    if len(data) > SMALL_PAYLOAD or not _SMALL_WINDOW:
        return zlib.compress(data)
    return _small_window(data)


class FastDumps:
    """The `dumps` of one URLSafeSerializer (default Signer: HMAC, django-concat key)."""

    def __init__(self, serializer: URLSafeSerializer) -> None:
        signer = serializer.make_signer()
        if not isinstance(signer.algorithm, HMACAlgorithm):
            raise TypeError("FastDumps signs with HMAC only")
        self.serializer = serializer
        self.sep = signer.sep
        self.mac = hmac.new(signer.derive_key(), digestmod=signer.algorithm.digest_method)
        # The payload built here only for the serializer it copies (the default one, no
        # options); any other goes through its own `dump_payload`.
        self.own_json = serializer.serializer is _CompactJSON and not serializer.serializer_kwargs

    def payload(self, obj: Any) -> bytes:
        """`URLSafeSerializer.dump_payload(obj)`: compact JSON, zlib-compressed when that is
        at least two bytes shorter (marked by a leading "."), URL-safe base64 without padding."""
        if not self.own_json:
            return want_bytes(self.serializer.dump_payload(obj))
        data = _COMPACT.encode(obj).encode("utf-8")
        compressed = compress(data)
        if len(compressed) < len(data) - 1:
            return b"." + base64.urlsafe_b64encode(compressed).rstrip(b"=")
        return base64.urlsafe_b64encode(data).rstrip(b"=")

    def __call__(self, obj: Any) -> str:
        payload = self.payload(obj)
        mac = self.mac.copy()
        mac.update(payload)
        return (payload + self.sep + base64.urlsafe_b64encode(mac.digest()).rstrip(b"=")
                ).decode("utf-8")


class KeyedDigest:
    """`hmac.new(key, message, sha256).digest()` with the keyed state made once."""

    def __init__(self, key: bytes, digestmod: Any) -> None:
        self.mac = hmac.new(key, digestmod=digestmod)

    def __call__(self, message: bytes) -> bytes:
        mac = self.mac.copy()
        mac.update(message)
        return mac.digest()
