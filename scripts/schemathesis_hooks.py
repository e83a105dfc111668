"""
Hooks for scripts/schemathesis.sh (dev tool): strategies for the custom string formats the API
document names where a pattern cannot say the whole rule (docs/api.md, "Checking the document").

- `evm-address`: 0x and 40 hex characters; mixed case must be the EIP-55 checksum. Drawn here
  all lowercase or all uppercase, which are valid with no checksum to compute.
- `cid`: a CID in canonical text form. Drawn as real CIDs over random sha2-256 digests: CIDv1
  (raw or dag-pb) in lowercase base32, and CIDv0 in base58btc.
- `go-duration`: a cache TTL; drawn within the 10-year ceiling.

A list's `cursor` is valid only as the `next_cursor` that list gave (server state, like a device
code), so schema-valid requests are sent without one; negative cases keep theirs.
"""
import base64

import schemathesis
from hypothesis import strategies as st

HEX = "0123456789abcdef"
B58 = "123456789ABCDEFGHJKLMNPQRSTUVWXYZabcdefghijkmnopqrstuvwxyz"


def _base58(data: bytes) -> str:
    n = int.from_bytes(data, "big")
    out = ""
    while n > 0:
        n, r = divmod(n, 58)
        out = B58[r] + out
    return "1" * (len(data) - len(data.lstrip(b"\0"))) + out


def _cid_v1(codec: int, digest: bytes) -> str:
    raw = bytes([0x01, codec, 0x12, 0x20]) + digest
    return "b" + base64.b32encode(raw).decode().lower().rstrip("=")


def _cid_v0(digest: bytes) -> str:
    return _base58(bytes([0x12, 0x20]) + digest)


_digest = st.binary(min_size=32, max_size=32)

schemathesis.openapi.format(
    "evm-address",
    st.text(alphabet=HEX, min_size=40, max_size=40).flatmap(
        lambda body: st.sampled_from(["0x" + body, "0x" + body.upper()])
    ),
)
schemathesis.openapi.format(
    "cid",
    st.one_of(
        _digest.map(lambda d: _cid_v1(0x55, d)),
        _digest.map(lambda d: _cid_v1(0x70, d)),
        _digest.map(_cid_v0),
    ),
)
schemathesis.openapi.format(
    "go-duration",
    st.one_of(
        st.just("0"),
        st.integers(min_value=0, max_value=87_600).map(lambda h: f"{h}h"),
        st.tuples(st.integers(0, 1000), st.integers(0, 59)).map(lambda t: f"{t[0]}h{t[1]}m"),
        st.integers(min_value=0, max_value=10**9).map(lambda ms: f"{ms}ms"),
    ),
)


@schemathesis.hook
def before_call(context, case, kwargs):
    meta = getattr(case, "meta", None)
    if meta is None or not meta.generation.mode.is_positive:
        return
    if isinstance(case.query, dict) and "cursor" in case.query:
        case.query.pop("cursor")
        params = kwargs.get("params")
        if isinstance(params, dict):
            params.pop("cursor", None)
