"""Issue 13, case 6: on AWS, API Gateway hands one connection's messages to concurrent Lambda
invocations, so they can arrive in any order. The local gateway's `concurrent` delivery does the same
(AGENTS_CORE_WS_DELIVERY=concurrent); with it, 100 messages of one Turn sent out of order in waves, two
of each wave twice, lose nothing and duplicate nothing. (`make bench` runs the same scenario with 1,000
messages: bench/bench_delivery.py.)"""


from tests.integration.delivery_at_scale import out_of_order_delivery
from tests.integration.stack_fixtures import client, stack  # noqa: F401 - fixtures

MESSAGES = 100


def test_concurrent_out_of_order_delivery_loses_and_duplicates_no_observation_over_100_messages(client, stack,
                                                                                                monkeypatch):
    from agents_core.settings import get_settings

    # This test is the Runtime, and its heartbeats ride in its waves: on a loaded machine a wave can
    # take longer than the fixture's 3 s heartbeat bound, which is not what this test is about.
    monkeypatch.setenv("HEARTBEAT_SECONDS", "120")
    get_settings.cache_clear()
    figures = out_of_order_delivery(stack, client, MESSAGES)
    assert figures["reordered_by_gateway"] > 0  # the gateway really handled later messages first
    assert figures["sent_again"] >= 2 * (MESSAGES // 20)  # two of each wave at least were duplicates
    # Every observation applied once, in seq order, with nothing left waiting for a gap.
    assert (figures["acked"], figures["obs_seq"], figures["buffered"]) == (MESSAGES, MESSAGES, 0)
    assert figures["leftover_observations"] == 0 and figures["error_frames"] == 0 and figures["completed"]
    # 0 lost, 0 duplicated: every Item once, in seq order, and each item.done event delivered once.
    assert (figures["items"], figures["lost"], figures["duplicated"], figures["in_order"]) == (25, 0, 0, True)
    assert (figures["events_lost"], figures["events_duplicated"], figures["events_in_order"]) == (0, 0, True)
