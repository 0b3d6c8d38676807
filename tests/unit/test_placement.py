"""Placement is a security boundary: which kind of Runtime connection may serve which placement,
and the pools and queues that keep them apart (table-driven from DESIGN 8b and the issue's rule)."""

import pytest

from agents_core import keys
from agents_core.environments import placement

ENV = "env_01"


@pytest.mark.parametrize(("kind", "where", "runtime_env", "allowed"), [
    ("shared", "none", None, True),
    (None, "none", None, True),  # a connection stored before kinds existed is shared
    ("shared", "self_hosted", None, False),  # Core never sends a workspace Turn to a shared Runtime
    ("shared", "openai_hosted", None, False),
    ("enrolled", "self_hosted", ENV, True),
    ("enrolled", "self_hosted", "env_02", False),  # exactly its own Environment
    ("enrolled", "self_hosted", None, False),
    ("enrolled", "none", ENV, False),
    ("enrolled", "openai_hosted", ENV, False),
    ("hosted", "openai_hosted", None, True),
    ("hosted", "self_hosted", None, False),
    ("hosted", "none", None, False),
    ("enrolling", "self_hosted", ENV, False),  # not before its enrollment is spent
    ("unknown", "none", None, False),
])
def test_which_kind_of_connection_may_serve_which_placement(kind, where, runtime_env, allowed):
    assert placement.may_serve(kind, where, runtime_env=runtime_env, env_id=ENV) is allowed


def test_each_kind_declares_in_its_own_pool_and_queued_turns_wait_in_the_matching_queue():
    assert keys.runtime_pool("shared", "codex") == "RUNTIME#codex"
    assert keys.runtime_pool("enrolled", "codex", ENV) == f"RUNTIME#ENV#{ENV}#codex"
    assert keys.runtime_pool("hosted", "codex") == "RUNTIME#HOSTED#codex"
    for where, kind in (("none", "shared"), ("self_hosted", "enrolled"), ("openai_hosted", "hosted")):
        pool = placement.pool_for(where, "codex", ENV)
        assert pool == keys.runtime_pool(kind, "codex", ENV)
        assert placement.queue(where, "codex", ENV) == pool.replace("RUNTIME#", "QUEUE#", 1)
    assert len({placement.pool_for(w, "codex", ENV) for w in ("none", "self_hosted", "openai_hosted")}) == 3


def test_a_sessions_environment_id_is_derived_from_the_session():
    assert placement.environment_id("sess_01abc") == "env_01abc"
