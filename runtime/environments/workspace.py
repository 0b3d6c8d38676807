"""The Environment this Runtime is: the workspace directory it is bound to and the variables its
tools may use.

An enrolled Runtime (`--workspace DIR`) serves exactly one self_hosted Environment. A Session names
its workspace as `/workspace` (an alias of the bound directory) or exactly the bound directory;
anything else fails the Turn with an error saying so, so a Session can never point the native
Harness at another directory of the machine. stdio MCP `env_vars` "name variables of the
Environment, whose values never reach Core": they come from `--tool-env-file` (and from this
process's own environment only where the operator says so, `--tool-env-inherit`); a missing one
fails the start naming it. Values are never sent to Core, logged or put on a command line.
"""

from __future__ import annotations

import copy
import os
import pathlib
import re
from collections.abc import Callable
from typing import Any, Optional

ALIAS = "/workspace"
WORKSPACE_PLACEMENTS = ("self_hosted", "openai_hosted")
_NAME = re.compile(r"[A-Za-z_][A-Za-z0-9_]*")


class WorkspaceError(Exception):
    """A Turn that cannot run in this Environment; the message says why (and names no value)."""


def read_env_file(path: str) -> dict[str, str]:
    """KEY=VALUE lines (blank lines and # comments skipped; `export ` and matching quotes allowed)."""
    values: dict[str, str] = {}
    for number, raw in enumerate(pathlib.Path(path).read_text().splitlines(), 1):
        line = raw.strip()
        if not line or line.startswith("#"):
            continue
        line = line.removeprefix("export ").strip()
        name, sep, value = line.partition("=")
        name = name.strip()
        if not sep or not _NAME.fullmatch(name):
            raise ValueError(f"{path}:{number}: expected NAME=VALUE")
        value = value.strip()
        if len(value) >= 2 and value[0] == value[-1] and value[0] in "'\"":
            value = value[1:-1]
        values[name] = value
    return values


class Workspace:
    def __init__(self, directory: str, tool_env: Optional[dict[str, str]] = None, inherit: bool = False):
        self.directory = str(pathlib.Path(directory).expanduser().resolve())
        self.tool_env = dict(tool_env or {})
        self.inherit = inherit

    def _map(self, path: str) -> str:
        if path == ALIAS or path.startswith(ALIAS + "/"):
            return self.directory + path[len(ALIAS):]
        return path

    def bind(self, start: dict[str, Any]) -> dict[str, Any]:
        """turn.start as this Environment runs it: the workspace directory (and stdio cwd under the
        alias) mapped to the bound directory; every stdio variable present."""
        environment = start.get("environment") or {}
        if environment.get("type") not in WORKSPACE_PLACEMENTS:
            raise WorkspaceError("This Runtime is an Environment's: it runs workspace Sessions only.")
        declared = environment.get("workspace_directory") or ALIAS
        if declared != ALIAS and str(pathlib.PurePosixPath(declared)) != self.directory:
            raise WorkspaceError(f"The Session's workspace_directory {declared} is not this Environment's "
                                 f"workspace: the Runtime is bound to {self.directory}; use /workspace or "
                                 f"{self.directory}.")
        bound = copy.deepcopy(start)
        bound["environment"]["workspace_directory"] = self.directory
        for transport in stdio_transports(bound):
            if transport.get("cwd"):
                transport["cwd"] = self._map(transport["cwd"])
        check_stdio_variables(bound, lambda name: name in self.tool_env or (self.inherit and name in os.environ),
                              "set it in the Runtime's --tool-env-file")
        os.makedirs(self.directory, exist_ok=True)
        return bound

    def process_env(self) -> dict[str, str]:
        """What this Environment's tool processes see of the tool variables."""
        return dict(self.tool_env)


def stdio_transports(start: dict[str, Any]) -> list[dict[str, Any]]:
    """The stdio transports of a turn.start's declared MCP servers (the message's own objects)."""
    tools = (start.get("agent") or {}).get("tools") or []
    return [t["transport"] for t in tools
            if t.get("type") == "mcp" and (t.get("transport") or {}).get("type") == "stdio"]


def check_stdio_variables(start: dict[str, Any], is_set: Callable[[str], bool], remedy: str) -> None:
    """stdio MCP `env_vars` "name variables of the Environment ...: the start fails when the Environment does
    not set one", on every workspace placement and Harness: the first missing one, named with its server
    (never a value). `is_set` says whether the Environment sets a name; `remedy` says where to set it."""
    for tool in (start.get("agent") or {}).get("tools") or []:
        transport = tool.get("transport") or {} if tool.get("type") == "mcp" else {}
        if transport.get("type") != "stdio":
            continue
        for name in transport.get("env_vars") or []:
            if not is_set(name):
                raise WorkspaceError(f"The Environment does not set {name}, which the stdio MCP server "
                                     f"'{tool.get('server_label')}' needs: {remedy}.")


def check_hosted_variables(start: dict[str, Any]) -> None:
    """An openai_hosted Turn's stdio `env_vars` are variables its sandbox's processes see (its Environment's
    `env`, or one the sandbox sets): otherwise the start fails naming the first missing one, before anything
    is prepared or started."""
    from .sandbox import sandbox_environ

    seen = sandbox_environ((start.get("environment") or {}).get("hosted") or {})
    check_stdio_variables(start, seen.__contains__, "set it in the Environment's env")
