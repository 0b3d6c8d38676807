"""List parameters as the official SDK sends them: after, limit (1..100, default 20), order."""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any, Optional

from agents_contract.errors import InvalidRequest


@dataclass(frozen=True)
class ListParams:
    after: Optional[str]
    limit: int
    ascending: bool


def list_params(query: dict[str, str]) -> ListParams:
    raw_limit = query.get("limit", "20")
    try:
        limit = int(raw_limit)
    except ValueError:
        raise InvalidRequest(
            "Invalid type for 'limit': expected an integer, but got a string instead.", param="limit"
        ) from None
    if not 1 <= limit <= 100:
        raise InvalidRequest(
            f"Invalid 'limit': integer out of range. Expected a value between 1 and 100, but got {limit} instead.",
            param="limit",
        )
    order = query.get("order", "desc")
    if order not in ("asc", "desc"):
        raise InvalidRequest(f"Invalid value: '{order}'. Supported values are: 'asc' and 'desc'.", param="order")
    after = query.get("after") or None
    return ListParams(after, limit, order == "asc")


def page(data: list[dict[str, Any]], has_more: bool) -> dict[str, Any]:
    return {
        "object": "list",
        "data": data,
        "first_id": data[0]["id"] if data else None,
        "last_id": data[-1]["id"] if data else None,
        "has_more": has_more,
    }
