"""Admission of an `openai_hosted` Environment's configuration (Session create and `environments.create`).

"Creates an OpenAI-hosted environment": this deployment runs each one in its own sandbox on an operator's
hosted Runtime, prepared once from the configuration: `files` (inline, or `file_id`: a file of the Files API, resolved by Core),
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
            _check_packages(manager, getattr(packages, manager) or [], f"{at}.packages.{manager}")
    _files(env.files or [], at)
    _setup_commands(env.setup_commands or [], at)
    _env(env.env or {}, at)
    if len(jsonutil.dumps(_preparation(env)).encode()) > MAX_PREPARATION_BYTES:
        raise InvalidRequest(f"Invalid '{at}': the files, setup commands and env of one Environment hold at most "
                             f"{MAX_PREPARATION_BYTES} bytes of JSON together.", param=at)


def _check_packages(manager: str, names: list[str], at: str) -> None:
    """The SDK's "Python and npm packages to install", from the registries only. Each entry reaches `pip install`
    or `npm install` as one argument, and either installer reads a path, a URL, a VCS reference, an archive
    or an alias there as a source of code to build or run at install time, so only registry forms are
    accepted: PEP 508 requirements without a URL for Python, `name[@version|range|dist-tag]` for npm."""
    if len(names) > MAX_PACKAGES:
        raise InvalidRequest(f"Invalid '{at}': at most {MAX_PACKAGES} packages.", param=at)
    for i, name in enumerate(names):
        where = f"{at}[{i}]"
        if manager == "python":
            # PEP 508 separates a requirement's parts with spaces ("pkg; python_version >= '3.8'").
            if not name or len(name) > MAX_PACKAGE_CHARS or _PYTHON_BAD.search(name) or name != name.strip() \
                    or name.startswith("-"):
                raise InvalidRequest(f"Invalid '{where}': a requirement of 1 to {MAX_PACKAGE_CHARS} characters "
                                     "without NUL or whitespace other than spaces between its parts, not starting "
                                     "with '-'.", param=where)
            if not _python_requirement(name):
                raise InvalidRequest(f"Invalid '{where}': expected a requirement specifier (a package name with "
                                     "optional extras, version constraints and markers, such as 'requests>=2.31'); "
                                     "paths, URLs and VCS references are not accepted.", param=where)
            continue
        if not name or len(name) > MAX_PACKAGE_CHARS or _PACKAGE_BAD.search(name) or name.startswith("-"):
            raise InvalidRequest(f"Invalid '{where}': a package name (or requirement) of 1 to {MAX_PACKAGE_CHARS} "
                                 "characters without whitespace or NUL, not starting with '-'.", param=where)
        if not _npm_spec(name):
            raise InvalidRequest(f"Invalid '{where}': expected a registry package name (lowercase, optionally "
                                 "'@scope/'-prefixed) with an optional '@' and a version, range or dist-tag, such as "
                                 "'left-pad', '@scope/pkg@^1.2.3' or 'react@next'; paths, URLs, git and GitHub "
                                 "references, 'npm:' aliases and tarballs are not accepted.", param=where)


# pip installs an argument that names an archive as a file (pip's ARCHIVE_EXTENSIONS, any case), even when it
# also parses as a name ("pkg.whl", "x.tar.gz").
_PIP_ARCHIVES = (".zip", ".whl", ".tar.bz2", ".tbz", ".tar.xz", ".txz", ".tlz", ".tar.lz", ".tar.lzma", ".tar.gz",
                 ".tgz", ".tar")
# Before its markers, a requirement without a URL has no '/', '\\', ':' or '@' (pip reads those as a path or a
# URL); arbitrary equality ("pkg===<anything>") is the one specifier that could carry them.
_PYTHON_HEAD = re.compile(r"[A-Za-z0-9._\-\[\],<>=!~*+() ]+")
_PYTHON_BAD = re.compile(r"[^\S ]|\x00")


def _python_requirement(entry: str) -> bool:
    """A PEP 508 requirement without a URL, parsed by `packaging` (the parser pip itself uses)."""
    from packaging.requirements import InvalidRequirement, Requirement

    try:
        requirement = Requirement(entry)
    except InvalidRequirement:
        return False
    head = entry.split(";", 1)[0].strip()
    return requirement.url is None and bool(_PYTHON_HEAD.fullmatch(head)) and \
        not any(part.lower().endswith(_PIP_ARCHIVES) for part in (requirement.name, head))


# npm (validate-npm-package-name, new packages): lowercase and URL-safe, an optional '@scope/', no leading '.',
# '_' or '-' (its 214 characters are more than an entry's MAX_PACKAGE_CHARS). npm-package-arg reads a name or a
# spec ending in .tgz, .tar.gz or .tar as a tarball on disk.
_NPM_NAME = re.compile(r"(?:@[a-z0-9][a-z0-9._-]*/)?[a-z0-9][a-z0-9._-]*")
_NPM_EXCLUDED = ("node_modules", "favicon.ico")
_NPM_TARBALLS = (".tgz", ".tar.gz", ".tar")
# node-semver's range grammar (its README), whitespace included for fidelity (entries refuse it before).
_NR = r"(?:0|[1-9][0-9]*)"
_XR = rf"(?:[xX*]|{_NR})"
_PARTS = r"[-0-9A-Za-z]+(?:\.[-0-9A-Za-z]+)*"
_PARTIAL = rf"{_XR}(?:\.{_XR}(?:\.{_XR}(?:-{_PARTS})?(?:\+{_PARTS})?)?)?"
_SIMPLE = rf"(?:(?:<=|>=|<|>|=|~|\^)?{_PARTIAL})"
_RANGE = rf"(?:{_PARTIAL} - {_PARTIAL}|{_SIMPLE}(?: {_SIMPLE})*|)"
_NPM_RANGE = re.compile(rf"{_RANGE}(?: *\|\| *{_RANGE})*")
# A dist-tag: what npm-package-arg reads as a tag and `npm dist-tag add` allows (not a range, URL-safe).
_NPM_TAG = re.compile(r"[A-Za-z0-9][A-Za-z0-9._-]*")


def _npm_spec(entry: str) -> bool:
    """`name`, `name@<version or range>` or `name@<dist-tag>`: what npm resolves from the registry."""
    cut = entry.find("@", 1)  # past a scope's leading '@', as npm-package-arg splits
    name, spec = (entry, None) if cut < 0 else (entry[:cut], entry[cut + 1:])
    if not _NPM_NAME.fullmatch(name) or name in _NPM_EXCLUDED or name.endswith(_NPM_TARBALLS):
        return False
    if spec is None:
        return True
    if not spec.strip():
        return False
    return bool(_NPM_RANGE.fullmatch(spec)) or (bool(_NPM_TAG.fullmatch(spec)) and
                                                not spec.lower().endswith(_NPM_TARBALLS))


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
        if kind == "file_id":  # a file of the Files API: Core checks it is the tenant's (agents_core.files.environment)
            for name in sorted(set(f) - {"type", "path", "file_id"}):
                raise InvalidRequest(f"Unknown parameter: '{where}.{name[:64]}'.", param=f"{where}.{name[:64]}")
            for name in ("path", "file_id"):
                if name not in f:
                    raise InvalidRequest(f"Missing required parameter: '{where}.{name}'.", param=f"{where}.{name}")
            if not isinstance(f["file_id"], str) or not 1 <= len(f["file_id"]) <= 256:
                raise InvalidRequest(f"Invalid '{where}.file_id': expected a file id (1 to 256 characters).",
                                     param=f"{where}.file_id")
            path = _workspace_path(f["path"], f"{where}.path")
            if path in seen:
                raise InvalidRequest(f"Invalid '{where}.path': '{path}' is given twice.", param=f"{where}.path")
            seen.add(path)
            continue
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
        "files": [_public_file(f) for f in env.files or []],
    }


def _public_file(f: dict[str, Any]) -> dict[str, Any]:
    path = posixpath.normpath(f["path"])
    if f.get("type") == "file_id":  # its size is the File's, filled in by Core when it resolves the id
        return {"id": file_id(path), "file_id": f["file_id"], "path": path, "size_bytes": 0, "type": "file_id"}
    return {"id": file_id(path), "path": path, "size_bytes": len(base64.b64decode(f["data"])), "type": "inline"}


def _preparation(env: Any) -> dict[str, Any]:
    packages = env.packages
    network = env.network
    return {
        "files": [{"path": posixpath.normpath(f["path"]), "file_id": f["file_id"]} if f.get("type") == "file_id"
                  else {"path": posixpath.normpath(f["path"]), "data": f["data"]} for f in env.files or []],
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
