"""agents_contract.webhooks: endpoint requests as the SDK sends them, the Standard Webhooks signature the SDK's
`client.webhooks.unwrap` checks, and the data of the agent.session.* events."""

from __future__ import annotations

import base64
import hashlib
import hmac

import pytest

from agents_contract import webhooks
from agents_contract.errors import InvalidRequest

CREATE = {"event_types": ["agent.session.idle", "agent.session.failed"], "name": "ops", "url": "https://h.example/wh"}


def _refused(call, body) -> InvalidRequest:
    with pytest.raises(InvalidRequest) as caught:
        call(body)
    return caught.value


def test_an_endpoint_create_keeps_what_was_sent():
    request = webhooks.parse_create(CREATE)
    assert (request.event_types, request.name, request.url) == (CREATE["event_types"], "ops", "https://h.example/wh")
    assert webhooks.parse_create(CREATE | {"name": "n" * 256, "url": "u" * 2048}).name == "n" * 256


@pytest.mark.parametrize("body, message, param", [
    ([], "Invalid type for 'body': expected an object, but got an array instead.", None),
    ({k: v for k, v in CREATE.items() if k != "url"}, "Missing required parameter: 'url'.", "url"),
    (CREATE | {"secret": "x"}, "Unknown parameter: 'secret'.", "secret"),
    (CREATE | {"event_types": []}, "Invalid 'event_types': list should have at least 1 item after validation, not 0.",
     "event_types"),
    (CREATE | {"name": ""}, "Invalid value for 'name': String should have at least 1 character.", "name"),
    (CREATE | {"name": "n" * 257}, "Invalid value for 'name': String should have at most 256 characters.", "name"),
    (CREATE | {"url": ""}, "Invalid value for 'url': String should have at least 1 character.", "url"),
    (CREATE | {"url": "u" * 2049}, "Invalid value for 'url': String should have at most 2048 characters.", "url"),
])
def test_an_invalid_endpoint_create_is_the_official_400(body, message, param):
    error = _refused(webhooks.parse_create, body)
    assert (error.message, error.param) == (message, param)


def test_an_unknown_event_type_lists_every_official_one():
    error = _refused(webhooks.parse_create, CREATE | {"event_types": ["agent.session.idle", "session.done"]})
    assert error.param == "event_types[1]"
    assert error.message.startswith("Invalid value: 'session.done'. Supported values are: 'batch.completed', ")
    assert error.message.endswith(", and 'safety.alert.created'.")
    assert all(f"'{t}'" in error.message for t in webhooks.EVENT_TYPES)


def test_every_emitted_event_is_an_official_event_type():
    assert set(webhooks.SESSION_EVENTS.values()) <= set(webhooks.EVENT_TYPES)
    assert webhooks.SESSION_EVENTS["agent.session.requires_action"] == "agent.session.action_required"


def test_an_update_sets_only_what_was_given():
    request = webhooks.parse_update({"url": "https://new.example/"})
    assert request.url == "https://new.example/" and not request.given("name") and not request.given("event_types")
    assert not webhooks.parse_update({}).model_fields_set


@pytest.mark.parametrize("member", ["event_types", "name", "url"])
def test_an_update_cannot_null_a_member(member):
    error = _refused(webhooks.parse_update, {member: None})
    assert error.message == f"Invalid type for '{member}': expected a value, but got null instead."
    assert error.param == member


def test_an_update_is_checked_as_a_create_is():
    assert _refused(webhooks.parse_update, {"event_types": []}).param == "event_types"
    assert _refused(webhooks.parse_update, {"enabled": False}).message == "Unknown parameter: 'enabled'."


@pytest.mark.parametrize("body, keep", [(None, False), ({}, False), ({"keep_old_secret_active_for_24_hours": True}, True)])
def test_a_rotation_keeps_the_old_secret_only_when_asked(body, keep):
    assert webhooks.parse_rotate(body).keep_old_secret_active_for_24_hours is keep


def test_a_rotation_flag_must_be_a_boolean():
    error = _refused(webhooks.parse_rotate, {"keep_old_secret_active_for_24_hours": "yes"})
    assert error.message == ("Invalid type for 'keep_old_secret_active_for_24_hours': expected a boolean, but got a "
                             "string instead.")


def test_a_test_delivery_names_one_official_event_type():
    assert webhooks.parse_test({"event_type": "agent.session.created"}).event_type == "agent.session.created"
    assert _refused(webhooks.parse_test, {}).message == "Missing required parameter: 'event_type'."
    assert _refused(webhooks.parse_test, {"event_type": "nope"}).param == "event_type"


# ---- secrets and signatures ------------------------------------------------------------------------------

def test_a_new_secret_is_32_random_bytes_after_whsec_and_its_hint_shows_the_last_four_characters():
    first, second = webhooks.new_secret(), webhooks.new_secret()
    assert first.startswith("whsec_") and first != second
    assert len(base64.b64decode(first.removeprefix("whsec_"))) == 32
    assert webhooks.secret_hint(first) == "whsec_..." + first[-4:]


def _standard_webhooks(secret: str, message_id: str, timestamp: int, body: str) -> str:
    """The verification the SDK does (openai/lib/_webhooks.py), written independently."""
    key = base64.b64decode(secret[len("whsec_"):])
    mac = hmac.new(key, f"{message_id}.{timestamp}.{body}".encode(), hashlib.sha256).digest()
    return "v1," + base64.b64encode(mac).decode()


def test_the_signature_is_standard_webhooks_keyed_with_the_decoded_secret():
    secret = "whsec_" + base64.b64encode(b"k" * 32).decode()
    body = '{"type":"agent.session.idle","data":{"id":"sess_1"}}'
    assert webhooks.signature(secret, "msg_1", 1_700_000_000, body) == _standard_webhooks(
        secret, "msg_1", 1_700_000_000, body)
    assert webhooks.signature(secret, "msg_1", 1_700_000_001, body) != webhooks.signature(
        secret, "msg_1", 1_700_000_000, body)


def test_a_secret_without_the_prefix_is_used_as_its_bytes():
    digest = hmac.new(b"plain", b"m.1.{}", hashlib.sha256).digest()
    assert webhooks.signature("plain", "m", 1, "{}") == "v1," + base64.b64encode(digest).decode()


def test_the_headers_are_signed_with_every_active_secret():
    old, new = webhooks.new_secret(), webhooks.new_secret()
    sent = webhooks.headers([new, old], "msg_2", 1_700_000_000, "{}")
    assert sent == {"webhook-id": "msg_2", "webhook-timestamp": "1700000000",
                    "webhook-signature": f"{_standard_webhooks(new, 'msg_2', 1_700_000_000, '{}')} "
                                         f"{_standard_webhooks(old, 'msg_2', 1_700_000_000, '{}')}",
                    "content-type": "application/json", "user-agent": "agents-core-webhooks/1"}


# ---- payloads --------------------------------------------------------------------------------------------

@pytest.mark.parametrize("event, session, data", [
    ("agent.session.idle", {"id": "sess_1"}, {"id": "sess_1", "environment_type": "none"}),
    ("agent.session.idle", {"id": "sess_1", "environment": None}, {"id": "sess_1", "environment_type": "none"}),
    ("agent.session.in_progress", {"id": "sess_1", "environment": {"type": "hosted", "id": "env_1"}},
     {"id": "sess_1", "environment_type": "hosted", "environment_id": "env_1"}),
    ("agent.session.created", {"id": "sess_1", "environment": {"type": "self_hosted", "id": "env_2",
                                                               "remote_url": "wss://r.example/x"}},
     {"id": "sess_1", "environment_type": "self_hosted", "environment_id": "env_2",
      "connect": {"remote_url": "wss://r.example/x"}}),
    ("agent.session.created", {"id": "sess_1", "environment": {"type": "self_hosted"}},
     {"id": "sess_1", "environment_type": "self_hosted", "connect": {"remote_url": ""}}),
    ("agent.session.idle", {"id": "sess_1", "environment": {"type": "self_hosted", "remote_url": "wss://r"}},
     {"id": "sess_1", "environment_type": "self_hosted"}),         # connect only on created
    ("agent.session.action_required", {"id": "sess_1", "required_actions": [{"type": "mcp_approval"}, {"type": "x"}]},
     {"id": "sess_1", "environment_type": "none", "required_action": {"type": "mcp_approval"}}),
    ("agent.session.action_required", {"id": "sess_1", "required_actions": []},
     {"id": "sess_1", "environment_type": "none", "required_action": {"type": "function_call"}}),
])
def test_the_event_data_names_the_session_and_what_the_receiver_needs(event, session, data):
    assert webhooks.event_data(event, session) == data


@pytest.mark.parametrize("event", webhooks.EVENT_TYPES)
def test_a_test_delivery_of_any_event_type_has_a_sample_session(event):
    session = webhooks.sample_session(event)
    assert session["id"] == "sess_test"
    assert webhooks.event_data("agent.session.action_required", session)["required_action"] == {"type": "function_call"}
