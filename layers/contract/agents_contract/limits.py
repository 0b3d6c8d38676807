"""The request limits Core enforces, in one place (the README's "Errors" section lists them).

Every limit is answered with a 400 (413 for the body size) in the official envelope before anything
is written; none of them is left to DynamoDB's own 400 KB item or 100-entry transaction errors.
"""

from __future__ import annotations

# The whole request body (the deployment's MAX_BODY_BYTES setting may lower it).
MAX_BODY_BYTES = 1_048_576
# JSON objects and arrays nested deeper than this are rejected at the body parser: deep nesting
# buys a caller nothing and would exhaust the recursion of every later step (pydantic, schema
# validation, digests, DynamoDB serialisation).
MAX_JSON_DEPTH = 64
# Events in one `POST .../events` batch.
MAX_EVENTS_PER_BATCH = 64
# Metadata: at most 16 pairs, keys 1..64 characters, values at most 512 characters.
METADATA_MAX_PAIRS = 16
METADATA_MAX_KEY = 64
METADATA_MAX_VALUE = 512
# The tool results and input messages of one `events` batch, as JSON, together: a result is stored
# with its call and carried to the Runtime, a message is stored as an Item and carried both as an
# event and to the Runtime (so it counts twice), all in the batch's one outbox record, and every
# one of those is a DynamoDB item of at most 400 KB.
MAX_BATCH_CONTENT_BYTES = 350_000
