"""Reading a running Turn: its Turn item with the live fields its Session item keeps while it runs.

While a Turn is its Session's active Turn, claimed and in_progress or waiting, a commit that changes only its live
fields (agents_core.draft.LIVE_FIELDS: its status, the last observation applied, its output count, whether it has
its final answer) keeps them on the Session item (`active_turn`, which every commit rewrites) instead of writing the
Turn item (issue 36, cost: two transactional entries fewer in a one-call Turn). A reader that needs them reads both.
"""

from __future__ import annotations

import time
from typing import Any, Optional

from agents_contract import jsonutil

from . import keys
from .draft import TurnState
from .store import DynamoStore


def live_turn(store: DynamoStore, tenant: str, session_id: str, turn_id: str,
              attempts: int = 5) -> Optional[dict[str, Any]]:
    """The Turn item with the live fields its Session item keeps while it runs (`Draft._keep_live`): the two read as
    of one instant (one TransactGetItems; a read cancelled by a concurrent commit is made again)."""
    wanted = [keys.session(tenant, session_id), keys.turn(tenant, session_id, turn_id)]
    for attempt in range(attempts):
        found = store.transact_get(wanted)
        if found is not None:
            break
        time.sleep(0.005 * (2 ** attempt))
    else:  # commits keep landing: the Turn item, then the Session as it is after it
        turn = store.get(wanted[1])
        found = [store.get(wanted[0]), turn]
    return with_live_fields(found[1], found[0])


def live_turns(store: DynamoStore, routes: list[tuple[str, str, str]],
               consistent: bool = False) -> dict[tuple[str, str], dict[str, Any]]:
    """Turn items by address (`keys.address`), each with the live fields its Session item keeps, read with their
    Session items in BatchGetItem. Not as of one instant: a live field may be a commit older or newer than the rest
    of its item, which an answer a Runtime may ask again (an ack) can take; a decision reads `live_turn`."""
    wanted = {keys.address(k): k for k in [keys.turn(*r) for r in routes] + [keys.session(t, s) for t, s, _ in routes]}
    listed, found = list(wanted.values()), {}
    for i in range(0, len(listed), 100):  # BatchGetItem reads at most 100 keys
        found.update(store.batch_get(listed[i:i + 100], consistent=consistent))
    out = {}
    for tenant, session_id, turn_id in routes:
        address = keys.address(keys.turn(tenant, session_id, turn_id))
        item = with_live_fields(found.get(address), found.get(keys.address(keys.session(tenant, session_id))))
        if item is not None:
            out[address] = item
    return out


def with_live_fields(item: Optional[dict[str, Any]], session: Optional[dict[str, Any]]) -> Optional[dict[str, Any]]:
    """A Turn item with the live fields of its Session item (`session`: as read with it), when it keeps them."""
    if item is None or session is None:
        return item
    state = TurnState.from_item(item, jsonutil.loads(session.get("active_turn") or "null"))
    if not state.live:
        return item
    return {**item, "doc": jsonutil.dumps(state.doc), "status": state.status, "obs_seq": state.obs_seq,
            "outputs": state.outputs, "has_final_answer": state.has_final_answer}
