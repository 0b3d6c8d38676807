"""Create an API key for a tenant, or a Runtime token, against any table (local or AWS).

    python -m agents_core.apikeys --tenant acme [--table agents-core] [--endpoint-url http://127.0.0.1:5055]
    python -m agents_core.apikeys --tenant acme --table <TableName> --usage-plan-id <UsagePlanId>  # in AWS
    python -m agents_core.apikeys --tenant acme --usage-plan-id <UsagePlanId> --no-key  # register an existing tenant
    python -m agents_core.apikeys --runtime my-runtime [--table ...] [--endpoint-url ...]

Prints the secret once; only its SHA-256 is stored. Without --table and --endpoint-url the running
local stack is used when its stack file is present ($AGENTS_CORE_STACK_FILE, default .local/stack.json):
its moto endpoint and table, with moto's dummy credentials, so no AWS credentials are needed.

In AWS a tenant also needs its API key in the REST API's usage plan (the per-tenant request rate,
agents_core/quotas.py): `--usage-plan-id` (the stack's `UsagePlanId` output, or $USAGE_PLAN_ID) creates it,
once per tenant; without it API Gateway refuses the tenant's requests (403 invalid_api_key).
"""

from __future__ import annotations

import argparse
import json
import os
import secrets
import sys
from urllib.parse import urlparse

from botocore.exceptions import BotoCoreError, ClientError, EndpointConnectionError, NoCredentialsError

from .ids import now
from .store import DynamoStore, dynamodb_client


def generate() -> str:
    return "sk-agents-" + secrets.token_urlsafe(32)


def create_key(store: DynamoStore, tenant: str, key: str | None = None) -> str:
    key = key or generate()
    store.put_api_key(key, tenant, now())
    return key


def register(tenant: str, usage_plan_id: str, region: str | None = None) -> str:
    """The tenant's API key in the usage plan (quotas.register_tenant; idempotent)."""
    from .aws import botocore_session
    from .quotas import register_tenant
    from .settings import get_settings

    client = botocore_session().create_client("apigateway", region_name=region or get_settings().aws_region)
    return register_tenant(client, usage_plan_id, tenant)


STACK_FILE_VARIABLES = ("AGENTS_CORE_STACK_FILE", "AGENTS_CORE_STATE_FILE")  # the second is the old name


def local_stack_file() -> str:
    """The file a running local stack (`make dev`) describes itself in."""
    for name in STACK_FILE_VARIABLES:
        if os.environ.get(name):
            return os.environ[name]
    return os.path.join(".local", "stack.json")


def _loopback(url: str | None) -> bool:
    return bool(url) and urlparse(url).hostname in ("127.0.0.1", "localhost", "::1")


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(prog="python -m agents_core.apikeys", description=__doc__.splitlines()[0])
    who = parser.add_mutually_exclusive_group(required=True)
    who.add_argument("--tenant", help="create an API key for this tenant")
    who.add_argument("--runtime", help="create a Runtime token with this name")
    parser.add_argument("--table", default=None, help="table name (default: the local stack's, else $TABLE_NAME "
                                                      "or agents-core)")
    parser.add_argument("--endpoint-url", default=None, help="DynamoDB endpoint (default: the local stack's, "
                                                             "else AWS)")
    parser.add_argument("--region", default=None)
    parser.add_argument("--usage-plan-id", default=os.environ.get("USAGE_PLAN_ID"),
                        help="register the tenant's API key in this usage plan (the stack's UsagePlanId output)")
    parser.add_argument("--no-key", action="store_true", help="with --tenant and --usage-plan-id: register only")
    args = parser.parse_args(argv)
    if args.no_key and not (args.tenant and args.usage_plan_id):
        parser.error("--no-key needs --tenant and --usage-plan-id")
    table, endpoint = args.table, args.endpoint_url
    stack_file = local_stack_file()
    if table is None:  # an explicit --table means that table (in AWS without --endpoint-url), stack or not
        try:
            with open(stack_file) as fh:
                stack = json.load(fh)
            if endpoint in (None, stack["moto_endpoint"]):
                table, endpoint = stack["table"], stack["moto_endpoint"]
        except (OSError, KeyError, TypeError, ValueError):
            pass
    table = table or os.environ.get("TABLE_NAME") or "agents-core"
    # A loopback endpoint is an emulator (the local stack's moto, DynamoDB Local): it checks no signature
    store = DynamoStore(table, dynamodb_client(endpoint, args.region, emulator=_loopback(endpoint)))
    try:
        if args.runtime:
            from .runtimes.connections import create_runtime_token

            secret = create_runtime_token(store, args.runtime)
        else:
            if args.usage_plan_id:
                register(args.tenant, args.usage_plan_id, args.region)
            if args.no_key:
                print(f"tenant {args.tenant} registered in usage plan {args.usage_plan_id}", file=sys.stderr)
                return 0
            secret = create_key(store, args.tenant)
            if not args.usage_plan_id and not _loopback(endpoint):  # said once the key exists, not before an error
                print("warning: no --usage-plan-id: in AWS, API Gateway refuses this tenant's requests until its "
                      "API key is in the usage plan (run again with --usage-plan-id <UsagePlanId> --no-key).",
                      file=sys.stderr)
    except NoCredentialsError:
        print(f"error: no AWS credentials to write to the table '{table}' in AWS. For the local stack, start it "
              f"first (`make dev` writes {stack_file}) and run this from the repository root; for AWS, configure "
              "credentials (AWS_PROFILE, AWS_ACCESS_KEY_ID...).", file=sys.stderr)
        return 2
    except EndpointConnectionError:
        print(f"error: cannot reach DynamoDB at {endpoint or 'AWS'}"
              + (" - is the local stack still running (`make dev`)?" if _loopback(endpoint) else "."),
              file=sys.stderr)
        return 2
    except (BotoCoreError, ClientError) as exc:
        print(f"error: could not write to the table '{table}': {exc}", file=sys.stderr)
        return 2
    print(secret)
    return 0


if __name__ == "__main__":
    sys.exit(main())
