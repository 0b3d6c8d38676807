"""Headers of a Lambda proxy event (REST API, its REQUEST authorizer, WebSocket `$connect`): names
are case-insensitive, so every lookup folds case."""

from __future__ import annotations

from typing import Any, Optional


def header(event: dict[str, Any], name: str) -> Optional[str]:
    """The first header named `name` (lowercase), or None."""
    for key, value in (event.get("headers") or {}).items():
        if key.lower() == name:
            return value
    return None


def bearer(event: dict[str, Any]) -> str:
    """The token of `Authorization: Bearer <token>` (empty: none, or another scheme)."""
    headers = {k.lower(): v for k, v in (event.get("headers") or {}).items()}
    scheme, _, token = headers.get("authorization", "").partition(" ")
    return token.strip() if scheme.lower() == "bearer" else ""
