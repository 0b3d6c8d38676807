"""Items a Runtime reports (`turn.item.added` / `turn.item.done`), validated strictly against the pinned
SDK Item union (openai==3.57.0, `openai.types.beta.agent_session_item.AgentSessionItem`) before they
are stored, so a Runtime can never break a caller's reads.

Core owns every identity field: the public `id`, `turn_id` and `session_id` are never taken from a
Runtime (sending them is rejected), `role` of a Runtime message is always `assistant`, and status
transitions are Core's (an added Item is `in_progress` or `completed`, a finished one `completed` or
`incomplete`, an MCP call may also be `failed`). Unknown members are rejected, naming the field.
"""

from __future__ import annotations

from typing import Annotated, Any, Literal, Optional, Union

from pydantic import BaseModel, ConfigDict, Field, StrictStr, TypeAdapter, ValidationError

from .errors import InvalidRequest
from .validation import render_path

RUNTIME_ID_MAX = 128
ITEM_TYPES = ("message", "reasoning", "mcp_call", "web_search_call")


class _Strict(BaseModel):
    model_config = ConfigDict(extra="forbid", strict=True)


class OutputText(_Strict):
    type: Literal["output_text"]
    text: StrictStr


class SummaryText(_Strict):
    type: Literal["summary_text"]
    text: StrictStr


class _Search(_Strict):
    type: Literal["search"]
    queries: Optional[list[StrictStr]] = None
    query: Optional[StrictStr] = None


class _OpenPage(_Strict):
    type: Literal["open_page"]
    url: Optional[StrictStr] = None


class _FindInPage(_Strict):
    type: Literal["find_in_page"]
    pattern: Optional[StrictStr] = None
    url: Optional[StrictStr] = None


class _Other(_Strict):
    type: Literal["other"]


WebSearchAction = Annotated[Union[_Search, _OpenPage, _FindInPage, _Other], Field(discriminator="type")]
OutputStatus = Literal["in_progress", "completed", "incomplete"]
CallStatus = Literal["in_progress", "completed", "failed", "incomplete"]


class Message(_Strict):
    """AgentSessionAssistantMessage / AgentSessionMessage with role assistant."""

    id: StrictStr
    type: Literal["message"]
    role: Literal["assistant"] = "assistant"
    phase: Optional[Literal["commentary", "final_answer"]] = None
    status: Optional[OutputStatus] = None
    content: list[OutputText] = Field(default_factory=list)


class Reasoning(_Strict):
    """AgentReasoningItem."""

    id: StrictStr
    type: Literal["reasoning"]
    status: Optional[OutputStatus] = None
    summary: list[SummaryText] = Field(default_factory=list)


class McpCall(_Strict):
    """AgentMcpCallItem: arguments, output and error are required members (null when absent)."""

    id: StrictStr
    type: Literal["mcp_call"]
    name: StrictStr
    server_label: StrictStr
    arguments: Any = None
    output: Any = None
    error: Any = None
    status: Optional[CallStatus] = None


class WebSearchCall(_Strict):
    """AgentWebSearchCallItem."""

    id: StrictStr
    type: Literal["web_search_call"]
    action: Optional[WebSearchAction] = None
    status: Optional[OutputStatus] = None


RuntimeItem = Annotated[Union[Message, Reasoning, McpCall, WebSearchCall], Field(discriminator="type")]
_adapter: Optional[TypeAdapter[Any]] = None


def parse(raw: Any, *, done: bool, where: str = "item") -> tuple[str, dict[str, Any]]:
    """(the Runtime's own Item id, the public Item without Core's identity fields) or InvalidRequest
    naming the offending field."""
    global _adapter
    if not isinstance(raw, dict):
        raise InvalidRequest(f"Invalid '{where}': expected an object.", param=where)
    for owned in ("turn_id", "session_id"):
        if owned in raw:
            raise InvalidRequest(f"Invalid '{where}.{owned}': Core assigns it; a Runtime does not send it.",
                                 param=f"{where}.{owned}")
    if raw.get("type") not in ITEM_TYPES:
        raise InvalidRequest(f"Invalid '{where}.type': a Runtime reports {', '.join(ITEM_TYPES)} Items.",
                             param=f"{where}.type")
    if _adapter is None:
        _adapter = TypeAdapter(RuntimeItem)
    try:
        model = _adapter.validate_python(raw)
    except ValidationError as exc:
        first = exc.errors()[0]
        param = render_path(RuntimeItem, first["loc"], where)  # every union's tag left out, the action's too
        raise InvalidRequest(f"Invalid '{param}': {first['msg']}.", param=param) from None
    runtime_id = model.id
    if not runtime_id or len(runtime_id) > RUNTIME_ID_MAX:
        raise InvalidRequest(f"Invalid '{where}.id': 1 to {RUNTIME_ID_MAX} characters.", param=f"{where}.id")
    item = model.model_dump(mode="json", exclude={"id"})
    status = item.get("status")
    if done:
        allowed = ("completed", "incomplete", "failed") if item["type"] == "mcp_call" else ("completed", "incomplete")
        item["status"] = status or "completed"
    else:
        allowed = ("in_progress", "completed")
        item["status"] = status or "in_progress"
    if item["status"] not in allowed:
        raise InvalidRequest(f"Invalid '{where}.status': {'a finished' if done else 'an added'} Item is "
                             f"{' or '.join(allowed)}.", param=f"{where}.status")
    return runtime_id, item
