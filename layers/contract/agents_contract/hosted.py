"""Admission of an `openai_hosted` Environment's configuration (Session create and `environments.create`).

"Creates an OpenAI-hosted environment": this deployment runs each one in its own sandbox on an operator's
hosted Runtime, prepared once from the configuration: `files` (inline only: no Files API here),
`packages.python` / `packages.npm`, `setup_commands` in order, `env` and `network.access`. What it does not
build is a 400 naming the field, before anything is written: restricted network allow/block lists,
`packages.system`, a desktop, container sizes other than `medium` (one sandbox class), templates, plugins,
skills and capability directories.

Two views come out of an accepted configuration, never mixed:
- `public(...)`: what reads, events and the snapshot show (files as {id, path, size_bytes, type}, package
  names, network access); it is the Session's `environment` and the EnvironmentInfo;
- `preparation(...)`: what only the Runtime that claims a Turn receives (file data, setup command bodies,
  env values). "Ordered, confidential setup commands. Command bodies are never returned."
"""

from __future__ import annotations

import base64
import binascii
import hashlib
import posixpath
import re
from typing import Any, Optional

from . import jsonutil, wire
from .errors import InvalidRequest, UnsupportedConfiguration

WORKSPACE = "/workspace"
MAX_FILES_BYTES = 64 * 1024  # decoded, all inline files of one Environment together
MAX_FILES = 100
MAX_PACKAGES = 64  # per manager
MAX_PACKAGE_CHARS = 200
MAX_SETUP_COMMANDS = 20
MAX_COMMAND_BYTES = 8 * 1024
MAX_ENV = 64
MAX_PATH_CHARS = 1024
MAX_PREPARATION_BYTES = 256 * 1024  # the whole confidential configuration, as JSON (one stored item)
_ENV_NAME = re.compile(r"^[A-Za-z_][A-Za-z0-9_]*$")
_PACKAGE_BAD = re.compile(r"[\s\x00]")
# Members that configure an Environment inline (`environment_id` names an existing one instead).
INLINE_MEMBERS = ("capability_directories", "container_size", "desktop", "env", "environment_template_id", "files",
                  "network", "packages", "plugins", "setup_commands", "skills")


def _unsupported(message: str, param: str) -> UnsupportedConfiguration:
    return UnsupportedConfiguration(message, param=param)


def check_reference(env: wire.EnvironmentOpenAIHosted, at: str = "environment") -> Optional[str]:
    """`environment_id` names an existing Environment: "Cannot be combined with a template or inline
    configuration." Returns the id (None when the configuration is inline)."""
    if not env.given("environment_id"):
        return None
    if not isinstance(env.environment_id, str) or not env.environment_id:
        raise InvalidRequest(f"Invalid '{at}.environment_id': expected an Environment id (env_...).",
                             param=f"{at}.environment_id")
    for member in INLINE_MEMBERS:
        if env.given(member) and getattr(env, member) is not None:
            raise InvalidRequest(
                f"Invalid '{at}.environment_id': an existing Environment cannot be combined with a template or inline "
                f"configuration; '{at}.{member}' was also given. Send either environment_id alone or the "
                "configuration without it.", param=f"{at}.{member}")
    return env.environment_id


def check(env: Any, at: str = "environment") -> None:
    """Everything this deployment cannot build is a 400 naming the field (nothing is written)."""
    if getattr(env, "environment_template_id", None) is not None:
        raise _unsupported("Environment templates are not supported by this deployment; configure the Environment "
                           "inline or name an existing one with environment_id.", f"{at}.environment_template_id")
    for member, what in (("plugins", "Plugins"), ("skills", "Skills"),
                         ("capability_directories", "Capability directories")):
        if getattr(env, member, None):
            raise _unsupported(f"{what} of OpenAI-hosted Environments are not supported by this deployment.",
                               f"{at}.{member}")
    size = getattr(env, "container_size", None)
    if size is not None and size != "medium":
        raise _unsupported(f"Invalid '{at}.container_size': this deployment runs one sandbox class, 'medium'; "
                           f"'{size}' is not available.", f"{at}.container_size")
    if env.desktop is not None and env.desktop.enabled:
        raise _unsupported("A desktop is not supported by this deployment's hosted Environments.",
                           f"{at}.desktop.enabled")
    network = env.network
    if network is not None:
        if network.access == "restricted":
            raise _unsupported("Restricted network access (domain allow and block lists) is not supported by this "
                               "deployment; use 'enabled' or 'disabled'.", f"{at}.network.access")
        for member in ("allowed_domains", "blocked_domains"):
            if getattr(network, member):
                raise _unsupported(f"Invalid '{at}.network.{member}': domain lists apply only to restricted "
                                   "access, which this deployment does not support.", f"{at}.network.{member}")
    packages = env.packages
    if packages is not None:
        if packages.system:
            raise _unsupported("System packages are not supported by this deployment's hosted Environments; use "
                               "packages.python or packages.npm, or a setup command.", f"{at}.packages.system")
        for manager in ("python", "npm"):
            _check_packages(getattr(packages, manager) or [], f"{at}.packages.{manager}")
    _files(env.files or [], at)
    _setup_commands(env.setup_commands or [], at)
    _env(env.env or {}, at)
    if len(jsonutil.dumps(_preparation(env)).encode()) > MAX_PREPARATION_BYTES:
        raise InvalidRequest(f"Invalid '{at}': the files, setup commands and env of one Environment hold at most "
                             f"{MAX_PREPARATION_BYTES} bytes of JSON together.", param=at)


def _check_packages(names: list[str], at: str) -> None:
    if len(names) > MAX_PACKAGES:
        raise InvalidRequest(f"Invalid '{at}': at most {MAX_PACKAGES} packages.", param=at)
    for i, name in enumerate(names):
        if not name or len(name) > MAX_PACKAGE_CHARS or _PACKAGE_BAD.search(name) or name.startswith("-"):
            raise InvalidRequest(f"Invalid '{at}[{i}]': a package name (or requirement) of 1 to {MAX_PACKAGE_CHARS} "
                                 "characters without whitespace or NUL, not starting with '-'.", param=f"{at}[{i}]")


def _workspace_path(value: Any, at: str) -> str:
    if not isinstance(value, str):
        raise InvalidRequest(f"Invalid type for '{at}': expected a string.", param=at)
    normal = posixpath.normpath(value) if value else ""
    if not value.startswith("/") or "\x00" in value or len(value) > MAX_PATH_CHARS or \
            not normal.startswith(WORKSPACE + "/") or normal != value.rstrip("/"):
        raise InvalidRequest(f"Invalid '{at}': expected an absolute path inside {WORKSPACE} (such as "
                             f"{WORKSPACE}/data.csv), without '.' or '..' segments.", param=at)
    return normal


def _files(files: list[dict[str, Any]], at: str) -> None:
    if len(files) > MAX_FILES:
        raise InvalidRequest(f"Invalid '{at}.files': at most {MAX_FILES} files.", param=f"{at}.files")
    total, seen = 0, set()
    for i, f in enumerate(files):
        where = f"{at}.files[{i}]"
        kind = f.get("type")
        if "type" not in f:
            raise InvalidRequest(f"Missing required parameter: '{where}.type'.", param=f"{where}.type")
        if kind == "file_id":
            raise _unsupported(f"Invalid '{where}': a file_id needs the Files API, which this deployment does not "
                               "have; send the file inline ({type: 'inline', path, data}).", f"{where}.file_id")
        if kind != "inline":
            raise InvalidRequest(f"Invalid value for '{where}.type': expected 'inline' or 'file_id'.",
                                 param=f"{where}.type")
        for name in sorted(set(f) - {"type", "path", "data"}):
            raise InvalidRequest(f"Unknown parameter: '{where}.{name[:64]}'.", param=f"{where}.{name[:64]}")
        for name in ("path", "data"):
            if name not in f:
                raise InvalidRequest(f"Missing required parameter: '{where}.{name}'.", param=f"{where}.{name}")
        path = _workspace_path(f["path"], f"{where}.path")
        if path in seen:
            raise InvalidRequest(f"Invalid '{where}.path': '{path}' is given twice.", param=f"{where}.path")
        seen.add(path)
        data = f["data"]
        if not isinstance(data, str):
            raise InvalidRequest(f"Invalid type for '{where}.data': expected a string.", param=f"{where}.data")
        try:
            total += len(base64.b64decode(data, validate=True)) if len(data) <= 4 * MAX_FILES_BYTES else \
                MAX_FILES_BYTES + 1
        except (binascii.Error, ValueError):
            raise InvalidRequest(f"Invalid '{where}.data': expected standard base64.", param=f"{where}.data") from None
        if total > MAX_FILES_BYTES:
            raise InvalidRequest(f"Invalid '{where}.data': the inline files of one Environment hold at most "
                                 f"{MAX_FILES_BYTES} bytes (decoded) together.", param=f"{where}.data")


def _setup_commands(commands: list[dict[str, Any]], at: str) -> None:
    if len(commands) > MAX_SETUP_COMMANDS:
        raise InvalidRequest(f"Invalid '{at}.setup_commands': at most {MAX_SETUP_COMMANDS} commands.",
                             param=f"{at}.setup_commands")
    for i, c in enumerate(commands):
        where = f"{at}.setup_commands[{i}]"
        for name in sorted(set(c) - {"command", "cwd"}):
            raise InvalidRequest(f"Unknown parameter: '{where}.{name[:64]}'.", param=f"{where}.{name[:64]}")
        command = c.get("command")
        if "command" not in c:
            raise InvalidRequest(f"Missing required parameter: '{where}.command'.", param=f"{where}.command")
        if not isinstance(command, str):
            raise InvalidRequest(f"Invalid type for '{where}.command': expected a string.", param=f"{where}.command")
        if not command.strip() or "\x00" in command or len(command.encode()) > MAX_COMMAND_BYTES:
            raise InvalidRequest(f"Invalid '{where}.command': a nonempty shell command of at most {MAX_COMMAND_BYTES} "
                                 "bytes, without NUL.", param=f"{where}.command")
        cwd = c.get("cwd")
        if cwd is not None and (not isinstance(cwd, str) or not cwd.startswith("/") or "\x00" in cwd
                                or len(cwd) > MAX_PATH_CHARS):
            raise InvalidRequest(f"Invalid '{where}.cwd': expected an absolute directory (default {WORKSPACE}).",
                                 param=f"{where}.cwd")


def _env(env: dict[str, str], at: str) -> None:
    if len(env) > MAX_ENV:
        raise InvalidRequest(f"Invalid '{at}.env': at most {MAX_ENV} variables.", param=f"{at}.env")
    for name, value in env.items():
        if not _ENV_NAME.match(name) or len(name) > 256:
            raise InvalidRequest(f"Invalid '{at}.env': '{name[:64]}' is not a variable name ([A-Za-z_][A-Za-z0-9_]*).",
                                 param=f"{at}.env")
        if "\x00" in value:
            raise InvalidRequest(f"Invalid '{at}.env.{name}': values cannot contain NUL.", param=f"{at}.env.{name}")


def file_id(path: str) -> str:
    """An Environment file's id: stable for its path (paths are unique within one Environment)."""
    return "file_" + hashlib.sha256(path.encode()).hexdigest()[:24]


def public(env: Any) -> dict[str, Any]:
    """The accepted configuration as reads show it (the snapshot's `environment`): nothing confidential."""
    network = env.network
    packages = env.packages
    return {
        "type": "openai_hosted",
        # The hosted workspace directory is fixed; the Claude stdio cwd rule compares against it.
        "workspace_directory": WORKSPACE,
        "capability_directories": [],
        "container_size": "medium",
        "desktop": {"enabled": False} if env.desktop is not None else None,
        "network": {"access": network.access if network else "disabled", "allowed_domains": []},
        "packages": {"npm": list((packages.npm if packages else None) or []),
                     "python": list((packages.python if packages else None) or []), "system": []},
        "files": [{"id": file_id(posixpath.normpath(f["path"])), "path": posixpath.normpath(f["path"]),
                   "size_bytes": len(base64.b64decode(f["data"])), "type": "inline"} for f in env.files or []],
    }


def _preparation(env: Any) -> dict[str, Any]:
    packages = env.packages
    network = env.network
    return {
        "files": [{"path": posixpath.normpath(f["path"]), "data": f["data"]} for f in env.files or []],
        "packages": {"python": list((packages.python if packages else None) or []),
                     "npm": list((packages.npm if packages else None) or [])},
        "setup_commands": [{"command": c["command"], "cwd": c.get("cwd") or WORKSPACE}
                           for c in env.setup_commands or []],
        "env": dict(env.env or {}),
        "network": {"access": network.access if network else "disabled"},
    }


def preparation(env: Any) -> dict[str, Any]:
    """The confidential configuration the hosted Runtime prepares the Environment from, exactly as it
    receives it in `turn.start` (`environment.hosted`): file data (standard base64), setup commands
    with their cwd, env values, package names and network access."""
    return _preparation(env)
