"""python -m runtime --url wss://... [--harness scripted --harness codex ...] [--native codex]
python -m runtime --url <remote_url> --enrollment-token <token> --workspace DIR [--native codex,claude_code]
                  [--model-provider ...] [--tool-env-file FILE]
python -m runtime --url wss://... --hosted-environments DIR [--native codex,claude_code]

Serves the named Harnesses over Core's WebSocket API. `--native` names the Harnesses this Runtime runs
on their real engines (codex, claude_code); the others run on the scripted engine, which impersonates a
native name with that Harness's capability set. The Runtime token comes from --token-file,
$AGENTS_CORE_RUNTIME_TOKEN, or a running local stack's state file (never put it on a command line
others can read with `ps`; --token is kept for convenience).

With an Environment enrollment (`POST /v1/agents/environments/{id}/enrollments`), this machine becomes
that self_hosted Environment: it runs exactly that Environment's Sessions, in the workspace directory
it is bound to (`--workspace`; a Session's `/workspace` means that directory). The enrollment token
(from $AGENTS_CORE_ENROLLMENT_TOKEN, --enrollment-token-file or --enrollment-token) is spent at the
first connection for a durable credential, kept in the state directory with mode 0600 and used on every
reconnect. stdio MCP variables come from --tool-env-file.

With --hosted-environments DIR, this is an operator's host for openai_hosted Environments: each
Environment's Harness, tools, stdio MCP servers and setup run in a bubblewrap sandbox of its own (its
workspace, home and state under DIR/envs/<id>, an unprivileged uid of its own when run as root), and
the model provider is reached through a bridge that adds the key outside the sandbox. Core pins each
Environment to the host that prepared it; connect more hosts to scale out.

An operator's Runtime (shared or hosted) makes every connection for a tenant through its egress proxy:
the public internet only, never this host's loopback, a private or link-local address (the cloud metadata
service) or this host's own addresses. A shared Runtime's native Harness processes run in a network
namespace of their own (bubblewrap) for that. AGENTS_CORE_EGRESS_ALLOW (comma-separated CIDRs, empty by
default) adds what they may reach too; AGENTS_CORE_PACKAGE_REGISTRIES (host names) lists the registries a
hosted Environment's package installs reach.
"""

from __future__ import annotations

import argparse
import json
import logging
import os
import signal
import sys
import threading
from typing import Any

from agents_contract.protocol import HEARTBEAT_CADENCE_SECONDS

HARNESSES = ("scripted", "codex", "claude_code", "minimax_code")
NATIVE = ("codex", "claude_code")  # Harnesses this Runtime can run on their real engines


def _list(value: str) -> list[str]:
    names = [v.strip() for v in value.split(",") if v.strip()]
    for name in names:
        if name not in NATIVE:
            raise argparse.ArgumentTypeError(f"'{name}' cannot run natively here (choose from {', '.join(NATIVE)})")
    return names


def parser() -> argparse.ArgumentParser:
    p = argparse.ArgumentParser(prog="python -m runtime", description=__doc__,
                                formatter_class=argparse.RawDescriptionHelpFormatter)
    p.add_argument("--url", default=os.environ.get("AGENTS_CORE_WS_URL"), help="the WebSocket URL")
    p.add_argument("--token", default=os.environ.get("AGENTS_CORE_RUNTIME_TOKEN"),
                   help="a Runtime token (prefer --token-file or $AGENTS_CORE_RUNTIME_TOKEN)")
    p.add_argument("--token-file", help="read the Runtime token from this file")
    p.add_argument("--enrollment-token", default=os.environ.get("AGENTS_CORE_ENROLLMENT_TOKEN"),
                   help="connect as a self_hosted Environment with this enrollment (prefer "
                        "$AGENTS_CORE_ENROLLMENT_TOKEN or --enrollment-token-file)")
    p.add_argument("--enrollment-token-file", help="read the enrollment token from this file")
    p.add_argument("--workspace", help="as an Environment: the workspace directory this machine runs its "
                                       "Sessions in (a Session's /workspace is this directory)")
    p.add_argument("--tool-env-file", help="as an Environment: KEY=VALUE lines, the variables its stdio MCP "
                                           "servers may use (env_vars); values never reach Core")
    p.add_argument("--tool-env-inherit", action="store_true",
                   help="as an Environment: also take env_vars from this process's own environment")
    p.add_argument("--exec-server-listen", "--executor-listen", dest="exec_server_listen", metavar="HOST:PORT",
                   help="host self_hosted Codex Environments connected with the stock `codex exec-server --remote`: "
                        "listen here for their exec-server WebSockets (needs --native codex)")
    p.add_argument("--exec-server-url", "--executor-url", dest="exec_server_url", metavar="URL",
                   help="the public wss:// URL of --exec-server-listen (default: ws://HOST:PORT/executor)")
    p.add_argument("--hosted-environments", metavar="DIR",
                   help="host openai_hosted Environments: each runs in a bubblewrap sandbox of its own, its workspace "
                        "and state under DIR (needs Debian's bubblewrap; DIR must be traversable by other users "
                        "when running as root, e.g. /var/lib/agents-core/hosted)")
    p.add_argument("--credential-file", help="as an Environment: where the durable credential is kept "
                                             "(default: <state-dir>/environment-credential, mode 0600)")
    p.add_argument("--harness", action="append", choices=HARNESSES,
                   help="serve this Harness (repeatable; default: all four)")
    p.add_argument("--native", type=_list, default=[],
                   help="comma list of Harnesses run on their real engines (codex, claude_code); the rest are "
                        "scripted")
    p.add_argument("--model-provider", choices=("real", "scripted"),
                   default=os.environ.get("AGENTS_CORE_MODEL_PROVIDER", "real"),
                   help="native Harnesses talk to the real provider (OPENAI_API_KEY for Codex, "
                        "ANTHROPIC_API_KEY for Claude Code) or to the "
                        "embedded scripted model provider on loopback (no key, no network)")
    p.add_argument("--openai-base-url", default=os.environ.get("OPENAI_BASE_URL", "https://api.openai.com/v1"),
                   help="with --model-provider real: the Responses API base URL for Codex")
    p.add_argument("--anthropic-base-url", default=os.environ.get("ANTHROPIC_BASE_URL"),
                   help="with --model-provider real: the Anthropic API base URL for Claude Code (optional)")
    p.add_argument("--provider-log", default=os.environ.get("AGENTS_CORE_PROVIDER_LOG"),
                   help="with --model-provider scripted: log every model request here (JSON lines)")
    p.add_argument("--state-dir", default=os.environ.get("AGENTS_CORE_RUNTIME_STATE", "~/.agents-core/runtime"),
                   help="native state per Session (CODEX_HOME, thread ids), kept so a restart resumes history")
    p.add_argument("--warm-sessions", type=int, default=int(os.environ.get("AGENTS_CORE_WARM_SESSIONS", "4")),
                   help="idle native processes kept warm per Harness (least recently used stop first; "
                        "a stopped Session resumes its native thread on its next Turn)")
    p.add_argument("--heartbeat", type=float, metavar="SECONDS",
                   default=float(os.environ.get("AGENTS_CORE_HEARTBEAT", str(HEARTBEAT_CADENCE_SECONDS))),
                   help="the connection sends runtime.heartbeat (itself and every Turn it runs, one message) this "
                        "often, or at the shorter cadence Core's welcome names (a third of its bound); against a Core "
                        f"that names none, each Turn sends turn.heartbeat this often (default {HEARTBEAT_CADENCE_SECONDS})")
    p.add_argument("--rotation-margin", type=float, metavar="SECONDS",
                   default=float(os.environ.get("AGENTS_CORE_ROTATION_MARGIN", "300")),
                   help="open the next connection this long before the WebSocket API's maximum connection duration "
                        "(at most a quarter of it); the claimed Turns go on over it (default 300)")
    p.add_argument("--max-connection-seconds", type=float, metavar="SECONDS",
                   default=float(os.environ["AGENTS_CORE_MAX_CONNECTION_SECONDS"])
                   if os.environ.get("AGENTS_CORE_MAX_CONNECTION_SECONDS") else None,
                   help="the maximum connection duration (default: as Core's welcome says; API Gateway's is 7200)")
    p.add_argument("--stack", default=os.environ.get("AGENTS_CORE_STACK_FILE") or os.environ.get(
        "AGENTS_CORE_STATE_FILE") or ".local/stack.json",  # the second is the variable's old name
                   help="read url and token from a running local stack's stack file")
    p.add_argument("--dry-run", action="store_true",
                   help="print the native configuration the Harness would start with, then exit")
    p.add_argument("--snapshot", help="with --dry-run: a Session snapshot or turn.start JSON file")
    return p


def build_drivers(args: argparse.Namespace, harnesses: list[str]) -> tuple[dict[str, Any], Any]:
    """Harness name -> driver; also the embedded scripted provider when one was started."""
    from .harnesses.scripted.driver import ScriptedDriver

    drivers: dict[str, Any] = {}
    provider = None
    for harness in harnesses:
        if harness not in args.native:
            drivers[harness] = ScriptedDriver(harness)
            continue
        if harness == "codex":
            from .harnesses.codex.config import Provider
            from .harnesses.codex.driver import CodexDriver

            if args.model_provider == "scripted":
                if provider is None:
                    from .providers import ScriptedProvider

                    provider = ScriptedProvider(log_path=args.provider_log).start()
                model = Provider("scripted", provider.base_url + "/v1")
            else:
                if not os.environ.get("OPENAI_API_KEY"):
                    raise SystemExit("error: --native codex with the real provider needs OPENAI_API_KEY "
                                     "(or use --model-provider scripted)")
                model = Provider("openai", args.openai_base_url, env_key="OPENAI_API_KEY")
            drivers[harness] = CodexDriver(model, args.state_dir, max_warm=args.warm_sessions)
        elif harness == "claude_code":
            from .harnesses.claude_code.driver import ClaudeCodeDriver
            from .harnesses.claude_code.session import Provider as ClaudeProvider

            if args.model_provider == "scripted":
                if provider is None:
                    from .providers import ScriptedProvider

                    provider = ScriptedProvider(log_path=args.provider_log).start()
                claude_model = ClaudeProvider("scripted", provider.base_url)
            else:
                if not os.environ.get("ANTHROPIC_API_KEY"):
                    raise SystemExit("error: --native claude_code with the real provider needs ANTHROPIC_API_KEY "
                                     "(or use --model-provider scripted)")
                claude_model = ClaudeProvider("anthropic", args.anthropic_base_url)
            drivers[harness] = ClaudeCodeDriver(claude_model, args.state_dir, max_warm=args.warm_sessions)
    return drivers, provider


def main(argv: list[str] | None = None) -> int:
    p = parser()
    args = p.parse_args(argv)
    if args.dry_run:
        return dry_run(p, args)
    if args.token_file:
        with open(args.token_file) as fh:
            args.token = fh.read().strip()
    if args.enrollment_token_file:
        with open(args.enrollment_token_file) as fh:
            args.enrollment_token = fh.read().strip()
    # No child process (native Harness, tool, MCP server) ever sees a Core token.
    for name in ("AGENTS_CORE_ENROLLMENT_TOKEN", "AGENTS_CORE_RUNTIME_TOKEN"):
        os.environ.pop(name, None)
    exit_with_parent = os.environ.pop("AGENTS_CORE_EXIT_WITH_PARENT", None) == "1"  # ours, not the tools'
    workspace = None
    credential_file = None
    if args.enrollment_token or args.workspace:
        if not args.workspace:
            p.error("an Environment's Runtime needs --workspace DIR (the directory its Sessions run in)")
        from .client import load_credential
        from .environments.workspace import Workspace, read_env_file

        try:
            tool_env = read_env_file(args.tool_env_file) if args.tool_env_file else {}
        except (OSError, ValueError) as exc:
            p.error(f"--tool-env-file: {exc}")
        os.environ.update(tool_env)  # the native Harness starts stdio servers with its own environment
        workspace = Workspace(args.workspace, tool_env, inherit=args.tool_env_inherit)
        os.makedirs(workspace.directory, exist_ok=True)
        credential_file = args.credential_file or os.path.join(os.path.expanduser(args.state_dir),
                                                               "environment-credential")
        args.token = args.enrollment_token or load_credential(credential_file)
        if not args.url or not args.token:
            p.error("--url and an enrollment token (or a saved credential) are required to connect an Environment")
    if args.hosted_environments and (args.enrollment_token or args.workspace):
        p.error("--hosted-environments is an operator's Runtime; it cannot also be an enrolled Environment")
    if (not args.url or not args.token) and os.path.exists(args.stack):
        with open(args.stack) as fh:
            stack = json.load(fh)
        args.url = args.url or stack["websocket_url"]
        args.token = args.token or stack["runtime_token"]
    if not args.url or not args.token:
        p.error("--url and a Runtime token are required (or run the local stack: make dev)")
    harnesses = args.harness or list(HARNESSES)
    missing = [n for n in args.native if n not in harnesses]
    if missing:
        p.error(f"--native {','.join(missing)} is not among the served Harnesses")
    logging.basicConfig(level=logging.INFO, format="%(asctime)s runtime %(levelname)s %(message)s")
    from .client import RuntimeClient
    from .harnesses.native import HarnessUnavailable

    try:
        drivers, provider = build_drivers(args, harnesses)
    except HarnessUnavailable as exc:
        print(f"error: {exc}", file=sys.stderr)
        return 2
    if provider is not None:
        logging.getLogger("runtime").info("scripted model provider on %s", provider.base_url)
    hosted = egress = None
    if workspace is None:  # an operator's Runtime: every connection made for a tenant follows the egress policy
        try:
            egress = egress_proxy(os.path.expanduser(args.hosted_environments or args.state_dir))
        except ValueError as exc:
            print(f"error: {exc}", file=sys.stderr)
            for driver in drivers.values():
                driver.close()
            return 2
    if args.hosted_environments:
        from .environments.sandbox import SandboxError

        try:
            hosted = hosted_environments(args.hosted_environments, drivers, egress)
        except SandboxError as exc:
            print(f"error: {exc}", file=sys.stderr)
            for driver in drivers.values():
                driver.close()
            return 2
        logging.getLogger("runtime").info("hosting Environments in %s (host %s)", hosted.directory, hosted.host_id)
    namespace = None
    if egress is not None and hosted is None and any(getattr(d, "binary", None) for d in drivers.values()):
        from .environments.sandbox import SandboxError

        try:
            namespace = harness_namespace(os.path.expanduser(args.state_dir), drivers, egress)
        except SandboxError as exc:
            print(f"error: {exc}", file=sys.stderr)
            for driver in drivers.values():
                driver.close()
            return 2
    client = RuntimeClient(args.url, args.token, drivers, args.heartbeat, workspace=workspace,
                           credential_file=credential_file, hosted=hosted, egress=egress, namespace=namespace,
                           rotation_margin=args.rotation_margin, max_connection_seconds=args.max_connection_seconds)
    if args.exec_server_listen:
        if "codex" not in args.native or workspace is not None or hosted is not None:
            p.error("--executor-listen needs --native codex on an operator's shared Runtime (not an Environment's, "
                    "not --hosted-environments)")
        from .environments.exec_server import ExecServerHub
        from .harnesses.codex.exec_server import install

        install(drivers["codex"])
        client.runtime.exec_server_hub = ExecServerHub(args.exec_server_listen, args.exec_server_url, client.send).start()
    stop = threading.Event()
    signal.signal(signal.SIGTERM, lambda *_: stop.set())
    client.start()
    # A Runtime a local stack or a test started stops with it (AGENTS_CORE_EXIT_WITH_PARENT=1): one whose
    # parent died without stopping it would otherwise reconnect to a stack that is gone, forever.
    parent = os.getppid() if exit_with_parent else None
    try:
        while not stop.wait(0.5) and client.fatal is None:
            if parent is not None and (os.getppid() != parent or parent == 1):  # reparented: its parent died
                logging.getLogger("runtime").info("the process that started this Runtime is gone: stopping")
                break
    except KeyboardInterrupt:
        pass
    client.stop()
    if provider is not None:
        provider.stop()
    return 2 if client.fatal else 0


def provider_bridge(drivers: dict[str, Any], directory: str) -> tuple[Any, dict[str, str]]:
    """The model bridge of the native Harnesses' providers (their inference routes only, the operator's key
    added on this side), and the base path each provider has behind it; the keys leave this process's
    environment, so no child process inherits them."""
    import urllib.parse

    from .environments.bridge import ProviderBridge, inference_routes

    routes, paths = [], {}
    for harness, driver in drivers.items():
        provider = getattr(driver, "provider", None)
        if provider is None:
            continue
        base = provider.base_url or "https://api.anthropic.com"
        header = None
        if harness == "codex" and getattr(provider, "env_key", None):
            header = ("Authorization", f"Bearer {os.environ.get(provider.env_key, '')}")
        elif harness == "claude_code" and provider.kind != "scripted":
            header = ("x-api-key", os.environ.get("ANTHROPIC_API_KEY", ""))
        routes += inference_routes(harness, base, header)
        paths[harness] = urllib.parse.urlsplit(base).path.rstrip("/")
    for name in ("OPENAI_API_KEY", "ANTHROPIC_API_KEY"):
        os.environ.pop(name, None)  # the bridge holds them now
    return ProviderBridge(routes, os.path.join(directory, "bridge")).start(), paths


def egress_proxy(directory: str) -> Any:
    """The egress proxy every tenant-driven connection leaves through (AGENTS_CORE_EGRESS_ALLOW,
    AGENTS_CORE_PACKAGE_REGISTRIES)."""
    from .environments.egress import REGISTRIES_VARIABLE, EgressPolicy, EgressProxy, parse_registries
    from .environments.sandbox import BRIDGE_PORT

    return EgressProxy(EgressPolicy.from_environment(), os.path.join(directory, "egress"),
                       registries=parse_registries(os.environ.get(REGISTRIES_VARIABLE)),
                       bridge_port=BRIDGE_PORT).start()


def harness_namespace(directory: str, drivers: dict[str, Any], egress: Any) -> Any:
    """A shared Runtime's native Harnesses run `environment: none` Sessions in a network namespace of their
    own: the model through the bridge, the tenant's MCP servers through the egress proxy. The keys stay in
    this process's environment for the Sessions that need them directly (an exec-server Environment's)."""
    from .environments.sandbox import HarnessNamespace

    keys = {name: os.environ[name] for name in ("OPENAI_API_KEY", "ANTHROPIC_API_KEY") if name in os.environ}
    bridge, paths = provider_bridge(drivers, directory)
    os.environ.update(keys)
    return HarnessNamespace(os.path.join(directory, "namespace"), egress=egress, bridge=bridge, provider_paths=paths)


def hosted_environments(directory: str, drivers: dict[str, Any], egress: Any) -> Any:
    """The sandbox host: each Environment's namespace reaches the provider through the bridge and the
    internet through the egress proxy, never the host's network."""
    from .environments.sandbox import HostedEnvironments

    binaries = {h: os.path.dirname(d.binary) for h, d in drivers.items() if getattr(d, "binary", None)}
    root = os.path.expanduser(directory)
    bridge, paths = provider_bridge(drivers, root) if binaries else (None, {})
    return HostedEnvironments(directory, binaries, egress=egress, bridge=bridge, provider_paths=paths)


def dry_run(p: argparse.ArgumentParser, args: argparse.Namespace) -> int:
    """Print the exact native configuration for a Session snapshot (Codex: TOML; others: JSON)."""
    if not args.snapshot or not args.harness or len(args.harness) != 1:
        p.error("--dry-run needs exactly one --harness and --snapshot FILE")
    from .harnesses.claude_code import config as claude_code
    from .harnesses.codex import config as codex
    from .harnesses.common import AdapterError, as_start
    from .harnesses.minimax_code import config as minimax_code

    harness = args.harness[0]
    if harness == "scripted":
        p.error("--dry-run translates for codex, claude_code or minimax_code")
    try:
        with open(args.snapshot) as fh:
            start = as_start(json.load(fh))
    except (OSError, ValueError, KeyError, TypeError) as exc:
        print(f"error: {args.snapshot} is not a Session snapshot or turn.start message ({exc})", file=sys.stderr)
        return 2
    of = start.get("impersonate") or start.get("harness")
    if of and of != harness:
        print(f"error: the snapshot is a '{of}' Session's; translate it with --harness {of}", file=sys.stderr)
        return 2
    try:
        if harness == "codex":
            print(codex.render_toml(codex.session_config(start)), end="")  # placement profile included
            overrides = codex.catalog_overrides(start)
            if overrides:
                print("# model_catalog_json: the bundled catalog with", json.dumps(overrides))
            params = {**codex.turn_params(start), **codex.turn_environment(start)}
            if params:
                print("# per root Turn (turn/start):", json.dumps(params))
        elif harness == "claude_code":
            print(json.dumps(claude_code.options(start), indent=2))
        else:
            print(json.dumps(minimax_code.config(start), indent=2))
    except AdapterError as exc:
        print(f"error: {exc}", file=sys.stderr)
        return 2
    except (KeyError, TypeError) as exc:
        print(f"error: the snapshot lacks what the {harness} adapter needs ({exc})", file=sys.stderr)
        return 2
    return 0


if __name__ == "__main__":
    sys.exit(main())
