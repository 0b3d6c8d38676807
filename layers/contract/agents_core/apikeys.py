"""Create an API key for a tenant, or a Runtime token, against any table (local or AWS).

    python -m agents_core.apikeys --tenant acme [--table agents-core] [--endpoint-url http://127.0.0.1:5055]
    python -m agents_core.apikeys --runtime my-runtime [--table ...] [--endpoint-url ...]

Prints the secret once; only its SHA-256 is stored. Without --table/--endpoint-url the running
local stack's .local/stack.json is used when present.
"""

from __future__ import annotations

import argparse
import json
import secrets
import sys

from .ids import now
from .store import DynamoStore, dynamodb_client


def generate() -> str:
    return "sk-agents-" + secrets.token_urlsafe(32)


def create_key(store: DynamoStore, tenant: str, key: str | None = None) -> str:
    key = key or generate()
    store.put_api_key(key, tenant, now())
    return key


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(prog="python -m agents_core.apikeys", description=__doc__.splitlines()[0])
    who = parser.add_mutually_exclusive_group(required=True)
    who.add_argument("--tenant", help="create an API key for this tenant")
    who.add_argument("--runtime", help="create a Runtime token with this name")
    parser.add_argument("--table", default=None, help="table name (default: $TABLE_NAME or .local/stack.json)")
    parser.add_argument("--endpoint-url", default=None, help="DynamoDB endpoint (default: AWS, or the local stack)")
    parser.add_argument("--region", default=None)
    args = parser.parse_args(argv)
    table, endpoint = args.table, args.endpoint_url
    if table is None or endpoint is None:
        try:
            with open(".local/stack.json") as fh:
                stack = json.load(fh)
            table = table or stack["table"]
            endpoint = endpoint or stack["moto_endpoint"]
        except (OSError, KeyError, ValueError):
            pass
    import os

    table = table or os.environ.get("TABLE_NAME") or "agents-core"
    store = DynamoStore(table, dynamodb_client(endpoint, args.region))
    if args.runtime:
        from .runtimes import create_runtime_token

        print(create_runtime_token(store, args.runtime))
    else:
        print(create_key(store, args.tenant))
    return 0


if __name__ == "__main__":
    sys.exit(main())
