"""Webhooks (`client.webhooks`): endpoints with KMS-sealed signing secrets, and signed deliveries of the
`agent.session.*` events from the outbox stream through a queue.

- endpoints: create, retrieve, update, list, delete, rotate_secret, test
- deliveries: enqueue (outbox consumer), deliver (queue consumer), retries and the dead-letter record
"""
