"""Hosted Environments: each `openai_hosted` Environment runs in a bubblewrap sandbox of its own.

A Runtime started with `--hosted-environments DIR` is an operator's host for hosted Environments. The
host is shared by every tenant, so each Environment's native Harness process, its tools, its stdio MCP
servers and its setup run inside one sandbox that sees only:
- its private workspace at `/workspace` and its own home at `/home/agent` (both kept on this host under
  DIR/envs/<env_id>, owned by a uid of the Environment's own when the Runtime runs as root);
- its Harness state at `/state` (CODEX_HOME, Claude's config directory; one directory per Session);
- the Harness binary, read-only, at `/opt/agents-core/<harness>`;
- read-only system directories (/usr and the few /etc files a process needs), a fresh /tmp, /proc of its
  own pid namespace;
- an environment cleared to PATH, HOME, LANG, what the Session declares (`env`, never over a variable the
  adapter sets) and what the Harness needs. bwrap itself is started with that same environment, so the
  sandbox's pid 1 (readable at /proc/1/environ from inside) holds nothing else.
It never sees the Runtime's state directory, its Core token, the operator's model key or another
Environment, and it never shares the host's network: every sandbox has a network namespace of its own
that holds only loopback, whatever its `network.access`. The ways out are Unix sockets bound into it and
relayed to loopback ports inside by a small forwarder:
- the model bridge (`runtime/bridge.py`) at 127.0.0.1:8555: the Harness calls the provider's inference
  routes with a token of this Environment's own, and the bridge adds the operator's key outside;
- with `network.access: enabled`, the egress proxy (`runtime/egress.py`) at 127.0.0.1:8556, advertised as
  HTTP_PROXY/HTTPS_PROXY: the public internet only (no host loopback, link-local or metadata service,
  private range, host address or other sandbox), checked after DNS resolution on every connection;
- while packages install, a proxy socket that reaches only the package registries.

An Environment is prepared once on its host (files, packages, setup commands; `prepare`), and its
Turns always run here (Core keeps the affinity). A Harness process stops when idle (the driver's idle
bound), which stops its sandbox; the next Turn starts a new one over the same workspace.
"""

from __future__ import annotations

import base64
import hashlib
import json
import logging
import os
import pathlib
import re
import secrets
import shutil
import subprocess
import sys
import threading
import time
from dataclasses import dataclass, field
from typing import Any, Optional

log = logging.getLogger("runtime.sandbox")

INSIDE_WORKSPACE = "/workspace"
INSIDE_HOME = "/home/agent"
INSIDE_STATE = "/state"
INSIDE_RUN = "/run/agents-core"
INSIDE_OPT = "/opt/agents-core"
INSIDE_TMP = "/tmp"  # noqa: S108 - the sandbox's own fresh tmpfs
BRIDGE_PORT = 8555  # inside a namespace: the model bridge's loopback port (the forwarder's)
EGRESS_PORT = 8556  # inside a namespace with egress: the egress proxy's loopback port
UID_BASE = 200_000  # Environments' own host uids (when the Runtime runs as root): UID_BASE .. UID_BASE + UID_COUNT - 1,
UID_COUNT = 65_536  # the range a host firewall matches (README: operator hardening)
SETUP_TIMEOUT = float(os.environ.get("AGENTS_CORE_SETUP_TIMEOUT", "300"))
PACKAGE_TIMEOUT = float(os.environ.get("AGENTS_CORE_PACKAGE_TIMEOUT", "600"))
_ENV_ID = re.compile(r"env_[A-Za-z0-9_-]{1,120}")
_SYSTEM_FILES = ("/etc/ssl", "/etc/ca-certificates", "/etc/resolv.conf", "/etc/hosts", "/etc/nsswitch.conf",
                 "/etc/host.conf", "/etc/gai.conf", "/etc/localtime", "/etc/alternatives", "/etc/mime.types",
                 "/etc/pki", "/etc/crypto-policies")
_PATH = f"{INSIDE_HOME}/.local/bin:{INSIDE_HOME}/.npm-global/bin:/usr/local/bin:/usr/bin:/bin"
# `python3 -I forward.py PORT SOCKET [PORT SOCKET ...] -- COMMAND...`: binds each loopback PORT of the
# namespace (relayed to the Unix SOCKET bound into it), then runs COMMAND as its child (stdio inherited,
# signals passed on, its exit status returned): the ports answer before the command starts, with no polling.
FORWARDER = """\
import os, signal, socket, sys, threading
def pipe(a, b):
    try:
        while True:
            data = a.recv(262144)
            if not data:
                break
            b.sendall(data)
    except OSError:
        pass
    finally:
        for s in (a, b):
            try:
                s.shutdown(socket.SHUT_RDWR)
            except OSError:
                pass
def serve(client, path):
    upstream = socket.socket(socket.AF_UNIX)
    try:
        upstream.connect(path)
    except OSError:
        client.close()
        return
    threading.Thread(target=pipe, args=(client, upstream), daemon=True).start()
    pipe(upstream, client)
def accept(server, path):
    while True:
        conn, _ = server.accept()
        threading.Thread(target=serve, args=(conn, path), daemon=True).start()
args = sys.argv[1:]
split = args.index("--")
command = args[split + 1:]
servers = []
for port, path in zip(args[:split:2], args[1:split:2]):
    server = socket.socket()
    server.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
    server.bind(("127.0.0.1", int(port)))
    server.listen(64)
    servers.append((server, path))
child = os.fork()
if child == 0:
    os.execvp(command[0], command)
for server, path in servers:
    threading.Thread(target=accept, args=(server, path), daemon=True).start()
for number in (signal.SIGTERM, signal.SIGINT, signal.SIGHUP):
    signal.signal(number, lambda n, _: os.kill(child, n))
status = os.waitpid(child, 0)[1]
code = os.waitstatus_to_exitcode(status)
sys.exit(code if code >= 0 else 128 - code)
"""


class SandboxError(Exception):
    """The sandbox cannot start or the Environment cannot be prepared; the message is safe to show."""


class PreparationFailed(SandboxError):
    def __init__(self, message: str, code: str = "environment_setup_failed"):
        super().__init__(message)
        self.code = code


def check_bubblewrap() -> str:
    """The bwrap binary, after a trivial sandbox ran: a clear error at Runtime start otherwise."""
    binary = shutil.which("bwrap")
    if binary is None:
        raise SandboxError("--hosted-environments needs bubblewrap (bwrap) to isolate each Environment, and it is "
                           "not installed: install Debian's `bubblewrap` (apt-get install bubblewrap).")
    probe = [binary, "--unshare-user", "--unshare-pid", "--die-with-parent", "--ro-bind", "/usr", "/usr",
             "--symlink", "usr/bin", "/bin", "--symlink", "usr/lib", "/lib", "--symlink", "usr/lib64", "/lib64",
             "--proc", "/proc", "--dev", "/dev", "/bin/true"]
    try:
        done = subprocess.run(probe, capture_output=True, text=True, timeout=30, env={"PATH": "/usr/bin:/bin"})  # noqa: S603
    except (OSError, subprocess.SubprocessError) as exc:
        raise SandboxError(f"bubblewrap does not run here: {exc}") from None
    if done.returncode != 0:
        raise SandboxError("bubblewrap cannot create a sandbox on this host (user namespaces disabled?): "
                           f"{done.stderr.strip()[:300]}")
    return binary


@dataclass
class Sandbox:
    """One hosted Environment on this host."""

    hosts: HostedEnvironments
    env_id: str
    root: pathlib.Path
    uid: Optional[int]
    config: dict[str, Any] = field(default_factory=dict)

    @property
    def workspace(self) -> pathlib.Path:
        return self.root / "workspace"

    @property
    def home(self) -> pathlib.Path:
        return self.root / "home"

    @property
    def state(self) -> pathlib.Path:
        return self.root / "state"

    @property
    def network(self) -> str:
        return ((self.config.get("network") or {}).get("access")) or "disabled"

    def session_dir(self, harness: str, session_id: str) -> pathlib.Path:
        path = self.state / harness / _safe(session_id)
        path.mkdir(parents=True, exist_ok=True)
        self._own(self.state / harness, path)
        return path

    def inside(self, host_path: pathlib.Path | str) -> str:
        """The path a host path of this Environment has inside its sandbox."""
        path = pathlib.Path(host_path)
        for host, inner in ((self.workspace, INSIDE_WORKSPACE), (self.home, INSIDE_HOME), (self.state, INSIDE_STATE)):
            try:
                rel = path.relative_to(host)
            except ValueError:
                continue
            return inner if str(rel) == "." else f"{inner}/{rel}"
        raise SandboxError(f"{host_path} is not inside the Environment {self.env_id}")

    def provider_url(self, harness: str) -> str:
        """The model provider's base URL as the Harness inside this sandbox sees it: the bridge."""
        return f"http://127.0.0.1:{BRIDGE_PORT}{self.hosts.provider_paths.get(harness, '')}"

    @property
    def bridge_token(self) -> str:
        """What the Harness sends where the provider key would be: this Environment's own token."""
        return self.hosts.bridge.token(self.env_id)

    # -- the environment and the command line ------------------------------------------------------
    def environ(self, extra: Optional[dict[str, str]] = None, *, network: Optional[str] = None) -> dict[str, str]:
        """Everything a process in this sandbox sees (`sandbox_environ`)."""
        return sandbox_environ(self.config, extra, network=network or self.network)

    def sockets(self, network: str, binaries: tuple[str, ...]) -> list[tuple[int, str]]:
        """(loopback port inside, Unix socket on this host) for each way out of this sandbox's namespace."""
        pairs = []
        if self.hosts.bridge is not None and any(h in self.hosts.provider_paths for h in binaries):
            pairs.append((BRIDGE_PORT, self.hosts.bridge.socket_for(self.env_id, owner=self.uid)))
        if network == "enabled":
            bridge = pairs[0][1] if pairs else None
            pairs.append((EGRESS_PORT, self.hosts.egress.socket_for(self.env_id, owner=self.uid, bridge=bridge)))
        elif network == "packages":
            pairs.append((EGRESS_PORT, self.hosts.egress.socket_for(self.env_id, packages=True, owner=self.uid)))
        return pairs

    def argv(self, command: list[str], *, network: Optional[str] = None, binaries: tuple[str, ...] = (),
             cwd: str = INSIDE_WORKSPACE) -> list[str]:
        """The bwrap (and setpriv) command line that runs `command` inside this sandbox. `network`:
        `disabled` (loopback only), `enabled` (the egress proxy) or `packages` (the registries only); the
        namespace is the sandbox's own in every case."""
        network = network or self.network
        words: list[str] = []
        if self.uid is not None:
            words += [self.hosts.setpriv, f"--reuid={self.uid}", f"--regid={self.uid}", "--clear-groups",
                      "--inh-caps=-all"]
        words += [self.hosts.bwrap, "--unshare-user", "--uid", "1000", "--gid", "1000", "--unshare-pid", "--unshare-ipc",
                  "--unshare-uts", "--unshare-net", "--unshare-cgroup-try", "--die-with-parent", "--new-session",
                  "--hostname", "sandbox",
                  "--ro-bind", "/usr", "/usr", "--symlink", "usr/bin", "/bin", "--symlink", "usr/sbin", "/sbin",
                  "--symlink", "usr/lib", "/lib", "--symlink", "usr/lib64", "/lib64",
                  "--proc", "/proc", "--dev", "/dev", "--tmpfs", "/tmp", "--dir", "/run", "--dir", "/var/tmp"]  # noqa: S108 - its own
        for path in _SYSTEM_FILES:
            words += ["--ro-bind-try", path, path]
        words += ["--ro-bind", str(self.hosts.passwd), "/etc/passwd", "--ro-bind", str(self.hosts.group), "/etc/group",
                  "--bind", str(self.workspace), INSIDE_WORKSPACE, "--bind", str(self.home), INSIDE_HOME,
                  "--bind", str(self.state), INSIDE_STATE]
        for name in binaries:
            host_dir = self.hosts.binaries[name]
            words += ["--ro-bind", host_dir, f"{INSIDE_OPT}/{name}"]
        pairs = self.sockets(network, binaries)
        inside = []
        for port, host_socket in pairs:
            words += ["--bind", host_socket, f"{INSIDE_RUN}/{port}.sock"]
            inside.append((port, f"{INSIDE_RUN}/{port}.sock"))
        if pairs:
            words += ["--ro-bind", str(self.hosts.forwarder), f"{INSIDE_RUN}/forward.py"]
        words += ["--chdir", cwd, "--"]
        return words + forwarding(f"{INSIDE_RUN}/forward.py", inside) + command

    def launcher(self, harness: str, inside_binary: str, keep: list[str]) -> str:
        """An executable that starts `inside_binary` in this sandbox with only the variables named in
        `keep` (for SDKs that merge the parent's whole environment into their child's). It holds names
        and paths, never a value."""
        path = self.root / "launch" / harness
        path.parent.mkdir(parents=True, exist_ok=True)
        argv = self.argv([inside_binary], binaries=(harness,))
        text = (f"#!{sys.executable} -I\nimport os, sys\nKEEP = {sorted(set(keep))!r}\nARGV = {argv!r}\n"
                "env = {k: v for k, v in os.environ.items() if k in KEEP}\n"
                "os.execve(ARGV[0], ARGV + sys.argv[1:], env)\n")
        return _executable(path, text)

    def run(self, command: str, *, network: str, timeout: float, cwd: str = INSIDE_WORKSPACE,
            env: Optional[dict[str, str]] = None) -> int:
        """One shell command inside the sandbox (setup, packages); its output goes to the Runtime's debug log
        only. `env`: the whole environment (default: the sandbox's, with the Session's `env`)."""
        argv = self.argv(["/bin/sh", "-c", command], network=network, cwd=cwd)
        try:
            done = subprocess.run(argv, env=env if env is not None else self.environ(network=network),  # noqa: S603
                                  stdin=subprocess.DEVNULL, capture_output=True,
                                  timeout=timeout, cwd=str(self.workspace))
        except subprocess.TimeoutExpired:
            return -1
        log.debug("sandbox %s: exit %s", self.env_id, done.returncode)
        return done.returncode

    # -- preparation -----------------------------------------------------------------------------------
    def prepared(self) -> bool:
        return (self.root / "prepared.json").exists()

    def prepare(self) -> bool:
        """Files, packages and setup commands, once per Environment on this host. Returns whether it
        prepared now (False: it already was). Raises PreparationFailed naming what failed, never a
        command's body."""
        with self.hosts.lock_for(self.env_id):
            if self.prepared():
                return False
            for i, entry in enumerate(self.config.get("files") or []):
                self._write_file(i, entry)
            packages = self.config.get("packages") or {}
            python = [str(p) for p in packages.get("python") or []]
            if python:
                # Isolated Python (-I: no PYTHON* variable, no user site, no script directory on the import path) with
                # no configuration file, in the registries-only namespace, with none of the Session's `env`.
                code = self.run(_quote(["/usr/bin/python3", "-I", "-m", "pip", "install", "--user", "--quiet",
                                        "--break-system-packages", "--no-warn-script-location", "--no-input",
                                        "--disable-pip-version-check", "--", *python]),
                                network="packages", timeout=PACKAGE_TIMEOUT, cwd=INSIDE_TMP, env=self.package_environ())
                if code != 0:
                    raise PreparationFailed(f"Installing packages.python failed (exit code {code}).",
                                            "package_install_failed")
            npm = [str(p) for p in packages.get("npm") or []]
            if npm:
                # No lifecycle script runs, no npmrc is read (the user's, the global or a project's).
                code = self.run(_quote(["npm", "install", "--global", "--silent", "--ignore-scripts", "--no-audit",
                                        "--no-fund", "--prefix", f"{INSIDE_HOME}/.npm-global", "--", *npm]),
                                network="packages", timeout=PACKAGE_TIMEOUT, cwd=INSIDE_TMP, env=self.package_environ())
                if code != 0:
                    raise PreparationFailed(f"Installing packages.npm failed (exit code {code}).",
                                            "package_install_failed")
            for i, step in enumerate(self.config.get("setup_commands") or []):
                code = self.run(str(step.get("command") or ""), network=self.network, timeout=SETUP_TIMEOUT,
                                cwd=str(step.get("cwd") or INSIDE_WORKSPACE))
                if code == -1:
                    raise PreparationFailed(f"setup_commands[{i}] did not finish within {SETUP_TIMEOUT:g} seconds.",
                                            "setup_command_timeout")
                if code != 0:
                    raise PreparationFailed(f"setup_commands[{i}] exited with code {code}.", "setup_command_failed")
            (self.root / "prepared.json").write_text(json.dumps({"prepared_at": int(time.time())}))
            return True

    def package_environ(self) -> dict[str, str]:
        """A package install's environment: cleared (never the Session's `env`: no PYTHONPATH, PIP_*,
        NPM_CONFIG_*, NODE_OPTIONS), with the registries-only proxy and no configuration file."""
        env = {"PATH": _PATH, "HOME": INSIDE_HOME, "LANG": "C.UTF-8", "USER": "agent", "LOGNAME": "agent",
               "SHELL": "/bin/sh", "TERM": "dumb", "PIP_CONFIG_FILE": os.devnull, "PYTHONUSERBASE": f"{INSIDE_HOME}/.local",
               "npm_config_userconfig": os.devnull, "npm_config_globalconfig": os.devnull,
               "npm_config_cache": "/tmp/npm-cache", "npm_config_update_notifier": "false",  # noqa: S108 - its own /tmp
               "npm_config_ignore_scripts": "true"}
        env.update(proxy_variables(no_proxy=True))
        return env

    def _write_file(self, index: int, entry: dict[str, Any]) -> None:
        path = str(entry.get("path") or "")
        if not path.startswith(INSIDE_WORKSPACE + "/"):
            raise PreparationFailed(f"files[{index}].path must be inside {INSIDE_WORKSPACE}.", "invalid_file")
        rel = pathlib.PurePosixPath(path).relative_to(INSIDE_WORKSPACE)
        if not rel.parts or any(part in ("..", "") for part in rel.parts):
            raise PreparationFailed(f"files[{index}].path must be inside {INSIDE_WORKSPACE}.", "invalid_file")
        data = None
        if "file_id" not in entry:  # a file_id entry is downloaded from its URL (runtime/environments/downloads.py)
            try:
                data = base64.b64decode(str(entry.get("data") or ""), validate=True)
            except ValueError:
                raise PreparationFailed(f"files[{index}].data is not standard base64.", "invalid_file") from None
        target = self.workspace.joinpath(*rel.parts)
        parent = self.workspace
        for part in rel.parts[:-1]:  # no symlink of the workspace may lead a write outside it
            parent = parent / part
            if parent.is_symlink():
                raise PreparationFailed(f"files[{index}].path goes through a symbolic link.", "invalid_file")
            parent.mkdir(exist_ok=True)
            self._own(parent)
        if target.is_symlink():
            target.unlink()
        if data is None:
            from .downloads import DownloadFailed, fetch

            try:
                fetch(index, entry, target)
            except DownloadFailed as exc:
                raise PreparationFailed(str(exc), "invalid_file") from None
        else:
            target.write_bytes(data)
        self._own(target)

    def _own(self, *paths: pathlib.Path) -> None:
        if self.uid is not None:
            for path in paths:
                os.chown(path, self.uid, self.uid, follow_symlinks=False)


def sandbox_environ(config: dict[str, Any], extra: Optional[dict[str, str]] = None, *,
                    network: Optional[str] = None) -> dict[str, str]:
    """Everything a process in a hosted Environment's sandbox sees: nothing of the Runtime's own environment;
    the Environment's `env`, under what the adapter sets ("a variable the adapter sets, such as HOME, keeps the
    adapter's value": PATH, HOME and the rest below, the Harness's own `extra`); the egress proxy when the
    sandbox has egress."""
    env = {str(k): str(v) for k, v in (config.get("env") or {}).items()}
    env.update({"PATH": _PATH, "HOME": INSIDE_HOME, "LANG": "C.UTF-8", "USER": "agent", "LOGNAME": "agent",
                "SHELL": "/bin/sh", "TERM": "dumb"})
    env.update(extra or {})
    if (network or (config.get("network") or {}).get("access") or "disabled") in ("enabled", "packages"):
        env.update(proxy_variables(no_proxy=True))
    return env


class HostedEnvironments:
    """This host's hosted Environments, under DIR/envs/<env_id>; DIR/host-id names the host to Core."""

    def __init__(self, directory: str, binaries: dict[str, str], *, egress: Any, bridge: Any = None,
                 provider_paths: Optional[dict[str, str]] = None):
        """`egress`: the egress proxy (runtime.environments.egress.EgressProxy); `bridge`: the model bridge
        (runtime.environments.bridge.ProviderBridge), with `provider_paths` the base path each native Harness's
        provider has behind it."""
        self.bwrap = check_bubblewrap()
        self.egress = egress
        self.bridge = bridge
        self.provider_paths = dict(provider_paths or {})
        self.setpriv = shutil.which("setpriv") or "/usr/bin/setpriv"
        self.directory = pathlib.Path(directory).expanduser().resolve()
        self.directory.mkdir(parents=True, exist_ok=True)
        # Traversable, not listable: each Environment's uid reaches its own directory, and no other.
        os.chmod(self.directory, 0o711)  # noqa: S103
        (self.directory / "envs").mkdir(exist_ok=True)
        os.chmod(self.directory / "envs", 0o711)  # noqa: S103
        self.as_root = os.geteuid() == 0
        if self.as_root:
            _check_traversable(self.directory)
        self.binaries = binaries  # harness -> host directory bound read-only at /opt/agents-core/<harness>
        self.host_id = self._host_id()
        self.forwarder = self.directory / "forward.py"
        self.forwarder.write_text(FORWARDER)
        self.forwarder.chmod(0o644)
        self.passwd, self.group = self._identity_files()
        self._locks: dict[str, threading.Lock] = {}
        self._guard = threading.Lock()
        self.sandboxes: dict[str, Sandbox] = {}

    def _host_id(self) -> str:
        path = self.directory / "host-id"
        if not path.exists():
            path.write_text("host_" + secrets.token_hex(8))
        return path.read_text().strip()

    def _identity_files(self) -> tuple[pathlib.Path, pathlib.Path]:
        """An /etc/passwd and /etc/group naming only the sandbox's user (not the host's accounts)."""
        passwd, group = self.directory / "passwd", self.directory / "group"
        passwd.write_text(f"agent:x:1000:1000:agent:{INSIDE_HOME}:/bin/sh\n"
                          "nobody:x:65534:65534:nobody:/nonexistent:/usr/sbin/nologin\n")
        group.write_text("agent:x:1000:\nnogroup:x:65534:\n")
        for path in (passwd, group):
            path.chmod(0o644)
        return passwd, group

    def declaration(self) -> dict[str, str]:
        """What `runtime.hello` says of this Runtime's isolation."""
        return {"type": "bubblewrap", "host_id": self.host_id}

    def lock_for(self, env_id: str) -> threading.Lock:
        with self._guard:
            return self._locks.setdefault(env_id, threading.Lock())

    def _uid(self, root: pathlib.Path) -> Optional[int]:
        """The Environment's own host uid (stable: kept beside it), or None when not running as root."""
        if not self.as_root:
            return None
        path = root / "uid"
        if path.exists():
            return int(path.read_text())
        with self._guard:
            taken = {int(p.read_text()) for p in (self.directory / "envs").glob("*/uid")}
            digest = int(hashlib.sha256(root.name.encode()).hexdigest(), 16)
            uid = UID_BASE + digest % UID_COUNT
            while uid in taken:
                uid = UID_BASE + (uid - UID_BASE + 1) % UID_COUNT
            path.write_text(str(uid))
        return uid

    def sandbox(self, environment: dict[str, Any]) -> Sandbox:
        """The Environment of a turn.start (`environment.id`, `environment.hosted`), its directories made."""
        env_id = str(environment.get("id") or "")
        if not _ENV_ID.fullmatch(env_id):
            raise SandboxError("The Turn names no hosted Environment this Runtime can run.")
        config = environment.get("hosted") or {}
        root = self.directory / "envs" / env_id
        root.mkdir(exist_ok=True)
        os.chmod(root, 0o711)  # noqa: S103
        uid = self._uid(root)
        sandbox = Sandbox(self, env_id, root, uid, config)
        for path in (sandbox.workspace, sandbox.home, sandbox.state):
            path.mkdir(exist_ok=True)
            os.chmod(path, 0o700)
            sandbox._own(path)
        (root / "launch").mkdir(exist_ok=True)
        os.chmod(root / "launch", 0o700)
        self.sandboxes[env_id] = sandbox
        return sandbox


class HarnessNamespace:
    """A shared Runtime's native Harness processes (`environment: none`): the host's filesystem as it is,
    and a network namespace of their own, so the MCP servers a tenant declares are reached only through
    the egress proxy (the same policy as a hosted sandbox's: no host loopback, private range, metadata
    service or host address, after DNS resolution, redirects included) and the model only through the
    bridge. A client that honors the proxy variables goes through the proxy; one that does not reaches
    nothing but the namespace's own loopback."""

    def __init__(self, directory: str, *, egress: Any, bridge: Any, provider_paths: dict[str, str]):
        self.bwrap = check_bubblewrap()
        self.egress = egress
        self.bridge = bridge
        self.provider_paths = dict(provider_paths)
        self.forwarder = pathlib.Path(directory).expanduser().resolve() / "forward.py"
        self.forwarder.parent.mkdir(parents=True, exist_ok=True)
        self.forwarder.write_text(FORWARDER)
        self.forwarder.chmod(0o644)

    @staticmethod
    def identity(harness: str) -> str:
        return f"shared-{harness}"

    def provider_url(self, harness: str) -> str:
        return f"http://127.0.0.1:{BRIDGE_PORT}{self.provider_paths.get(harness, '')}"

    def token(self, harness: str) -> str:
        return self.bridge.token(self.identity(harness))

    def environ(self, env: dict[str, str]) -> dict[str, str]:
        """`env` with the egress proxy, for every loopback destination too (loopback inside is only the
        forwarder's, and a tenant's loopback URL must meet the policy, not the namespace)."""
        out = {k: v for k, v in env.items() if k.upper() != "ALL_PROXY"}
        out.update(proxy_variables(no_proxy=False))
        return out

    def argv(self, harness: str, command: list[str]) -> list[str]:
        bridge = self.bridge.socket_for(self.identity(harness))
        egress = self.egress.socket_for(self.identity(harness), bridge=bridge)
        # a pid namespace too, so the forwarder ends with the Harness process
        words = [self.bwrap, "--unshare-user", "--unshare-net", "--unshare-pid", "--die-with-parent",
                 "--bind", "/", "/", "--dev-bind", "/dev", "/dev", "--proc", "/proc", "--"]
        return words + forwarding(str(self.forwarder), [(BRIDGE_PORT, bridge), (EGRESS_PORT, egress)]) + command

    def launcher(self, harness: str, binary: str, directory: pathlib.Path) -> str:
        """An executable that starts `binary` in this namespace with the environment it is given (for SDKs
        that start the CLI themselves). It holds paths, never a value."""
        path = directory / f"{harness}-netns"
        path.parent.mkdir(parents=True, exist_ok=True)
        argv = self.argv(harness, [binary])
        text = (f"#!{sys.executable} -I\nimport os, sys\nARGV = {argv!r}\n"
                "os.execv(ARGV[0], ARGV + sys.argv[1:])\n")
        return _executable(path, text)


def _executable(path: pathlib.Path, text: str) -> str:
    """Write a launcher atomically, executable by its owner only."""
    partial = path.with_suffix(".tmp")
    partial.write_text(text)
    partial.chmod(0o700)
    partial.replace(path)
    return str(path)


def firewall_ruleset(table: str = "agents_core_sandboxes") -> str:
    """nftables rules (defence in depth, for `nft -f -`) that refuse, on the host's own network stack, what a
    sandbox's uid must never reach there: loopback, link-local (the metadata service), private and shared
    ranges, IPv6 loopback, link-local and unique-local. Sandboxes have a network namespace of their own, so
    this holds only if one ever shared the host's. The uids are the Environments' own (a root Runtime)."""
    uids = f"{UID_BASE}-{UID_BASE + UID_COUNT - 1}"
    return (f"table inet {table}\ndelete table inet {table}\ntable inet {table} {{\n"
            "  chain output {\n    type filter hook output priority 0; policy accept;\n"
            f"    meta skuid {uids} ip daddr {{ 127.0.0.0/8, 169.254.0.0/16, 10.0.0.0/8, 172.16.0.0/12, "
            "192.168.0.0/16, 100.64.0.0/10 } reject\n"
            f"    meta skuid {uids} ip6 daddr {{ ::1, fe80::/10, fc00::/7 }} reject\n  }}\n}}\n")


def _check_traversable(directory: pathlib.Path) -> None:
    """Each Environment runs as a uid of its own, which must reach its directory under `directory`."""
    for parent in [directory, *directory.parents]:
        if not parent.stat().st_mode & 0o001:
            raise SandboxError(f"--hosted-environments {directory}: {parent} is not traversable by other users "
                               f"(mode {parent.stat().st_mode & 0o777:o}), so the Environments' own uids cannot "
                               "reach their workspaces; choose a directory such as /var/lib/agents-core/hosted.")


PROXY_VARIABLES = ("HTTP_PROXY", "HTTPS_PROXY", "http_proxy", "https_proxy", "NO_PROXY", "no_proxy")


def proxy_variables(*, no_proxy: bool) -> dict[str, str]:
    """The egress proxy as every common client reads it (upper and lower case). `no_proxy`: loopback goes
    direct (inside a sandbox, loopback is the sandbox's own: its bridge and its own servers)."""
    url = f"http://127.0.0.1:{EGRESS_PORT}"
    env = {"HTTP_PROXY": url, "HTTPS_PROXY": url, "http_proxy": url, "https_proxy": url}
    exempt = "localhost,127.0.0.1,::1" if no_proxy else ""
    env.update(NO_PROXY=exempt, no_proxy=exempt)
    return env


def forwarding(script: str, pairs: list[tuple[int, str]]) -> list[str]:
    """The argv prefix that runs the command behind the forwarder (loopback port -> Unix socket, for each
    pair) inside a namespace: the ports are bound before the command starts."""
    if not pairs:
        return []
    return ["/usr/bin/python3", "-I", script, *[str(w) for pair in pairs for w in pair], "--"]


def _safe(name: str) -> str:
    return re.sub(r"[^A-Za-z0-9_.-]", "_", name)[:128]


def _quote(words: list[str]) -> str:
    import shlex

    return " ".join(shlex.quote(w) for w in words)
