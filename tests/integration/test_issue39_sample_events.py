"""The sample events of the automations and webhook functions (events/, for `sam local invoke`) drive the real
handlers: a scheduled occurrence of an automation that no longer exists is ignored (not retried), the webhook
endpoints list answers without the beta header (client.webhooks sends none), and a queued delivery for an endpoint
that was deleted is dropped (the batch reports no failure)."""

import json

from agents_core.apikeys import create_key
from local.apigw import LambdaContext
from tests.conftest import load_event


def test_issue39_sample_events(handlers, store):
    occurrence = handlers["AutomationsFunction"](load_event("automations-occurrence.json"), LambdaContext("a"))
    assert occurrence == {"status": "ignored"}
    create_key(store, "tenant-example", "sk-agents-example")
    listed = handlers["WebhooksFunction"](load_event("webhooks-list-endpoints.json"), LambdaContext("w"))
    assert listed["statusCode"] == 200 and json.loads(listed["body"])["data"] == []
    delivered = handlers["WebhookDeliveryFunction"](load_event("webhook_delivery-sqs.json"), LambdaContext("d"))
    assert delivered == {"batchItemFailures": []}
