"""Time-sortable identifiers (ULID layout): lexicographic order is creation order, so list
pagination by `after` is a key condition, not a scan."""

from __future__ import annotations

import os
import time

_ALPHABET = "0123456789abcdefghjkmnpqrstvwxyz"  # Crockford base32, lowercase


def _encode(value: int, length: int) -> str:
    out = []
    for _ in range(length):
        value, rem = divmod(value, 32)
        out.append(_ALPHABET[rem])
    return "".join(reversed(out))


def new_id(prefix: str, now_ms: int | None = None) -> str:
    ms = int(time.time() * 1000) if now_ms is None else now_ms
    rand = int.from_bytes(os.urandom(10), "big")
    return f"{prefix}_{_encode(ms, 10)}{_encode(rand, 16)}"


def now() -> int:
    return int(time.time())
