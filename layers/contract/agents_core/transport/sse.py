"""Server-sent events: frames, the official `error` event, and the loop that streams a Session's
committed events (read by agents_core.session_events) to a Starlette response.

Comment pings keep an idle stream open; the stream ends cleanly after STREAM_MAX_SECONDS (callers
recover by reading the Session); a failure while streaming sends the official `error` event and ends
the stream.
"""

from __future__ import annotations

import asyncio
import time
from collections.abc import AsyncIterator, Iterator
from typing import Any, Optional

from starlette.concurrency import run_in_threadpool
from starlette.responses import StreamingResponse

from agents_contract import jsonutil

from .. import session_events
from ..ids import new_id
from ..observability import logger
from ..settings import Settings
from ..store import DynamoStore

HEADERS = {"cache-control": "no-cache", "x-accel-buffering": "no"}


def frame(event: dict[str, Any]) -> str:
    """One SSE frame: `event:` is the event's type, `data:` the event object on one line."""
    return f"event: {event.get('type', 'message')}\ndata: {jsonutil.dumps(event)}\n\n"


def error_event(session_id: str, message: str = "The event stream failed; read the Session to recover.",
                code: Optional[str] = "stream_failed") -> dict[str, Any]:
    """The `error` member of the official event union (AgentSessionErrorEvent)."""
    return {"type": "error", "event_id": new_id("evt"), "session_id": session_id,
            "error": {"type": "server_error", "code": code, "message": message, "param": None}}


def frames(events: list[dict[str, Any]]) -> Iterator[str]:
    for event in events:
        yield frame(event)


def response(body: AsyncIterator[str], status_code: int = 200) -> StreamingResponse:
    return StreamingResponse(body, status_code=status_code, media_type="text/event-stream", headers=HEADERS)


async def stream(store: DynamoStore, settings: Settings, tenant: str, session_id: str, after: int,
                 until: tuple[str, ...] = ()) -> AsyncIterator[str]:
    """The SSE body: committed events after `after`, in order, once each; pings; a clean end.
    `until` (a `stream: true` creation, session_events.creation_ends_after): the stream ends right after
    the first event of one of these types."""
    deadline = time.monotonic() + settings.stream_max_seconds
    poll_min, poll_max = settings.stream_poll_min_ms / 1000, settings.stream_poll_max_ms / 1000
    wait, quiet_since = poll_min, time.monotonic()
    yield ": stream open\n\n"  # the status line and headers go out now: the caller is subscribed
    try:
        while time.monotonic() < deadline:
            events, last = await run_in_threadpool(session_events.committed_since, store, tenant, session_id, after)
            if last != after:
                after = last
                for event in events:
                    yield frame(event)
                    if event.get("type") in until:
                        return
                wait, quiet_since = poll_min, time.monotonic()
                continue  # another page may follow
            if time.monotonic() - quiet_since >= settings.stream_ping_seconds:
                if not await run_in_threadpool(session_events.session_exists, store, tenant, session_id):
                    return  # the Session was deleted: nothing more can come
                yield ": ping\n\n"
                quiet_since = time.monotonic()
            await asyncio.sleep(min(wait, max(0.0, deadline - time.monotonic())))
            wait = min(poll_max, wait * 2)
        # the maximum duration: end cleanly between events; the caller reads the Session to catch up
    except asyncio.CancelledError:
        raise  # the caller went away
    except Exception:  # noqa: BLE001 - the stream's failure is told in the official `error` event
        logger.exception("event stream failed", extra={"session_id": session_id})
        yield frame(error_event(session_id))
