"""python -m runtime --url ws://127.0.0.1:8001 --token rt-... [--harness scripted --harness codex ...]"""

from __future__ import annotations

import argparse
import json
import logging
import os
import signal
import sys
import threading

HARNESSES = ("scripted", "codex", "claude_code", "minimax_code")


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(prog="python -m runtime", description=__doc__)
    parser.add_argument("--url", default=os.environ.get("AGENTS_CORE_WS_URL"), help="the WebSocket URL")
    parser.add_argument("--token", default=os.environ.get("AGENTS_CORE_RUNTIME_TOKEN"), help="a Runtime token")
    parser.add_argument("--harness", action="append", choices=HARNESSES,
                        help="serve this Harness (repeatable; default: all four, natives impersonated)")
    parser.add_argument("--heartbeat", type=float, default=float(os.environ.get("AGENTS_CORE_HEARTBEAT", "5")))
    parser.add_argument("--stack", default=".local/stack.json", help="read url and token from a running local stack")
    parser.add_argument("--dry-run", action="store_true",
                        help="print the native configuration the Harness would start with, then exit")
    parser.add_argument("--snapshot", help="with --dry-run: a Session snapshot or turn.start JSON file")
    args = parser.parse_args(argv)
    if args.dry_run:
        return dry_run(parser, args)
    if (not args.url or not args.token) and os.path.exists(args.stack):
        with open(args.stack) as fh:
            stack = json.load(fh)
        args.url = args.url or stack["websocket_url"]
        args.token = args.token or stack["runtime_token"]
    if not args.url or not args.token:
        parser.error("--url and --token are required (or run the local stack: make dev)")
    logging.basicConfig(level=logging.INFO, format="%(asctime)s runtime %(levelname)s %(message)s")
    from .client import RuntimeClient

    client = RuntimeClient(args.url, args.token, args.harness or list(HARNESSES), args.heartbeat)
    stop = threading.Event()
    signal.signal(signal.SIGTERM, lambda *_: stop.set())
    client.start()
    try:
        while not stop.wait(0.5):
            pass
    except KeyboardInterrupt:
        pass
    client.stop()
    return 0


def dry_run(parser: argparse.ArgumentParser, args: argparse.Namespace) -> int:
    """Print the exact native configuration for a Session snapshot (Codex: TOML; others: JSON)."""
    if not args.snapshot or not args.harness or len(args.harness) != 1:
        parser.error("--dry-run needs exactly one --harness and --snapshot FILE")
    from .adapters import AdapterError, as_start, claude_code, codex, minimax_code

    with open(args.snapshot) as fh:
        start = as_start(json.load(fh))
    try:
        harness = args.harness[0]
        if harness == "codex":
            native = codex.config(start)
            print(codex.render_toml(native), end="")
            params = codex.turn_params(start)
            if params:
                print("# per root Turn (turn/start):", json.dumps(params))
        elif harness == "claude_code":
            print(json.dumps(claude_code.options(start), indent=2))
        elif harness == "minimax_code":
            print(json.dumps(minimax_code.config(start), indent=2))
        else:
            parser.error("--dry-run translates for codex, claude_code or minimax_code")
    except AdapterError as exc:
        print(f"error: {exc}", file=sys.stderr)
        return 2
    return 0


if __name__ == "__main__":
    sys.exit(main())
