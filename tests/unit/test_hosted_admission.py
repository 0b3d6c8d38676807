"""Admission of openai_hosted configurations (agents_contract.hosted), table-driven: what this deployment
builds is accepted and split into the public view (reads, snapshot) and the confidential preparation
(only the claiming Runtime's turn.start); what it does not build is a 400 naming the field. Also the
hosted Runtime's `isolation` declaration. Pure: no store, no network."""

from __future__ import annotations

import base64
import json

import pytest

from agents_contract import hosted, validation, wire
from agents_contract.errors import AgentsError, InvalidRequest, UnsupportedConfiguration
from tests.unit.helpers import resolve, session_body


def b64(data: bytes) -> str:
    return base64.b64encode(data).decode()


def hosted_body(**environment):
    return session_body(env={"type": "openai_hosted", **environment}, harness="scripted")


def rejection(environment) -> AgentsError:
    with pytest.raises(AgentsError) as err:
        resolve(hosted_body(**environment))
    assert err.value.status == 400
    return err.value


# (the spec sentence, the environment's members, the param named, the error kind)
REJECTED = [
    ("a file_id entry names its destination", {"files": [{"type": "file_id", "file_id": "file_1"}]},
     "environment.files[0].path", InvalidRequest),
    ("a file path is inside /workspace", {"files": [{"type": "inline", "path": "/etc/passwd", "data": b64(b"x")}]},
     "environment.files[0].path", InvalidRequest),
    ("no '..' out of /workspace", {"files": [{"type": "inline", "path": "/workspace/../etc/x", "data": b64(b"x")}]},
     "environment.files[0].path", InvalidRequest),
    ("/workspace itself is not a file", {"files": [{"type": "inline", "path": "/workspace", "data": b64(b"x")}]},
     "environment.files[0].path", InvalidRequest),
    ("data is standard base64", {"files": [{"type": "inline", "path": "/workspace/a", "data": "not base64!"}]},
     "environment.files[0].data", InvalidRequest),
    ("inline files hold at most 64 KiB decoded",
     {"files": [{"type": "inline", "path": f"/workspace/{i}", "data": b64(b"x" * 40_000)} for i in range(2)]},
     "environment.files[1].data", InvalidRequest),
    ("a path is given once", {"files": [{"type": "inline", "path": "/workspace/a", "data": ""},
                                        {"type": "inline", "path": "/workspace/a/", "data": ""}]},
     "environment.files[1].path", InvalidRequest),
    ("an inline file has type, path and data only",
     {"files": [{"type": "inline", "path": "/workspace/a", "data": "", "mode": 493}]},
     "environment.files[0].mode", InvalidRequest),
    ("at most 100 files", {"files": [{"type": "inline", "path": f"/workspace/{i}", "data": ""} for i in range(101)]},
     "environment.files", InvalidRequest),
    ("system packages are not built", {"packages": {"system": ["curl"]}}, "environment.packages.system",
     UnsupportedConfiguration),
    ("package names have no whitespace", {"packages": {"python": ["requests numpy"]}}, "environment.packages.python[0]",
     InvalidRequest),
    ("package names are not options", {"packages": {"npm": ["--registry=http://x"]}}, "environment.packages.npm[0]",
     InvalidRequest),
    ("at most 64 packages", {"packages": {"python": [f"p{i}" for i in range(65)]}}, "environment.packages.python",
     InvalidRequest),
    ("a package name is at most 200 characters", {"packages": {"npm": ["x" * 201]}}, "environment.packages.npm[0]",
     InvalidRequest),
    ("at most 20 setup commands", {"setup_commands": [{"command": "true"}] * 21}, "environment.setup_commands",
     InvalidRequest),
    ("a setup command is nonempty", {"setup_commands": [{"command": "   "}]}, "environment.setup_commands[0].command",
     InvalidRequest),
    ("a setup command is at most 8 KiB", {"setup_commands": [{"command": "x" * 8193}]},
     "environment.setup_commands[0].command", InvalidRequest),
    ("a setup command's cwd is absolute", {"setup_commands": [{"command": "true", "cwd": "rel"}]},
     "environment.setup_commands[0].cwd", InvalidRequest),
    ("env names are variable names", {"env": {"1BAD": "x"}}, "environment.env", InvalidRequest),
    ("env values have no NUL", {"env": {"GOOD": "a\x00b"}}, "environment.env.GOOD", InvalidRequest),
    ("at most 64 env variables", {"env": {f"V{i}": "x" for i in range(65)}}, "environment.env", InvalidRequest),
    ("restricted network is not built", {"network": {"access": "restricted"}}, "environment.network.access",
     UnsupportedConfiguration),
    ("domain lists are not built", {"network": {"access": "enabled", "allowed_domains": ["example.com"]}},
     "environment.network.allowed_domains", UnsupportedConfiguration),
    ("a desktop is not built", {"desktop": {"enabled": True}}, "environment.desktop.enabled", UnsupportedConfiguration),
    ("one sandbox class: small", {"container_size": "small"}, "environment.container_size", UnsupportedConfiguration),
    ("one sandbox class: large", {"container_size": "large"}, "environment.container_size", UnsupportedConfiguration),
    ("templates are not built", {"environment_template_id": "tmpl_1"}, "environment.environment_template_id",
     UnsupportedConfiguration),
    ("plugins are not built", {"plugins": [{"type": "inline", "data": "x"}]}, "environment.plugins",
     UnsupportedConfiguration),
    ("skills are not built", {"skills": [{"type": "skill_reference", "skill_id": "s"}]}, "environment.skills",
     UnsupportedConfiguration),
    ("capability directories are not built", {"capability_directories": ["/workspace/caps"]},
     "environment.capability_directories", UnsupportedConfiguration),
    ("environment_id cannot be combined with inline configuration", {"environment_id": "env_1", "env": {"A": "b"}},
     "environment.env", InvalidRequest),
    ("environment_id cannot be combined with a template", {"environment_id": "env_1", "environment_template_id": "t"},
     "environment.environment_template_id", InvalidRequest),
]


@pytest.mark.parametrize("rule,environment,param,kind", REJECTED, ids=[r[0] for r in REJECTED])
def test_what_is_not_built_or_malformed_is_a_400_naming_the_field(rule, environment, param, kind):
    error = rejection(environment)
    assert type(error) is kind and error.param == param, error


def test_combining_environment_id_says_the_sdk_rule():
    error = rejection({"environment_id": "env_1", "files": []})
    assert "cannot be combined with a template or inline configuration" in error.message
    assert "'environment.files' was also given" in error.message


def test_environment_id_alone_and_null_members_are_accepted():
    assert resolve(hosted_body(environment_id="env_1")).environment["type"] == "openai_hosted"
    assert resolve(hosted_body(environment_id="env_1", files=None)).environment["type"] == "openai_hosted"


def test_an_accepted_configuration_splits_into_a_public_view_and_a_confidential_preparation():
    body = hosted_body(files=[{"type": "inline", "path": "/workspace/d/data.csv", "data": b64(b"a,b\n")}],
                       packages={"python": ["requests==2.32.3"], "npm": ["left-pad"]},
                       setup_commands=[{"command": "make SECRET=1"}, {"command": "ls", "cwd": "/tmp"}],
                       env={"TOKEN": "s3cret"}, network={"access": "enabled"}, container_size="medium",
                       desktop={"enabled": False})
    environment = resolve(body).environment
    assert environment == {
        "type": "openai_hosted", "workspace_directory": "/workspace", "capability_directories": [],
        "container_size": "medium", "desktop": {"enabled": False},
        "network": {"access": "enabled", "allowed_domains": []},
        "packages": {"npm": ["left-pad"], "python": ["requests==2.32.3"], "system": []},
        "files": [{"id": hosted.file_id("/workspace/d/data.csv"), "path": "/workspace/d/data.csv", "size_bytes": 4,
                   "type": "inline"}]}
    assert "SECRET" not in json.dumps(environment) and "s3cret" not in json.dumps(environment)
    request = validation.parse(wire.SessionCreate, body)
    assert hosted.preparation(request.environment) == {
        "files": [{"path": "/workspace/d/data.csv", "data": b64(b"a,b\n")}],
        "packages": {"python": ["requests==2.32.3"], "npm": ["left-pad"]},
        "setup_commands": [{"command": "make SECRET=1", "cwd": "/workspace"}, {"command": "ls", "cwd": "/tmp"}],
        "env": {"TOKEN": "s3cret"}, "network": {"access": "enabled"}}


def test_defaults_one_medium_sandbox_without_network():
    environment = resolve(hosted_body()).environment
    assert environment["container_size"] == "medium" and environment["network"]["access"] == "disabled"
    assert environment["files"] == [] and environment["desktop"] is None


def test_environments_create_takes_the_sdk_create_shape():
    request = validation.parse(wire.EnvironmentCreate, {"environment": {"type": "openai_hosted", "env": {"A": "b"}},
                                                        "vault_ids": None})
    hosted.check(request.environment)
    for body, param in (({"environment": {"type": "openai_hosted", "container_size": "medium"}},
                         "environment.container_size"),
                        ({"environment": {"type": "self_hosted"}}, "environment.type"),
                        ({}, "environment")):
        with pytest.raises(InvalidRequest) as err:
            validation.parse(wire.EnvironmentCreate, body)
        assert err.value.param == param, err.value


# ---- the hosted Runtime's isolation ------------------------------------------------------------------

@pytest.mark.parametrize("kind,isolation,param", [
    ("shared", [], "isolation"),
    ("shared", {"type": "bubblewrap", "host_id": ""}, "isolation.host_id"),
    ("shared", {"type": "gvisor", "host_id": "h"}, "isolation.type"),
    ("enrolling", {"type": "bubblewrap", "host_id": "h"}, "isolation"),
    ("enrolled", {"type": "bubblewrap", "host_id": "h"}, "isolation"),
    ("hosted", {"type": "bubblewrap", "host_id": "other"}, "isolation.host_id"),
    ("hosted", None, "isolation"),
])
def test_isolation_is_declared_only_by_an_operator_runtime_and_only_well_formed(kind, isolation, param):
    from agents_core.runtimes.connections import _isolation

    message = {"action": "runtime.hello"} if isolation is None else {"action": "runtime.hello", "isolation": isolation}
    with pytest.raises(InvalidRequest) as err:
        _isolation(message, {"runtime_kind": kind, "host_id": "h"})
    assert err.value.param == param


def test_isolation_names_the_host():
    from agents_core.runtimes.connections import _isolation

    hello = {"isolation": {"type": "bubblewrap", "host_id": "rack-7_b"}}
    assert _isolation(hello, {"runtime_kind": "shared"}) == "rack-7_b"
    assert _isolation(hello, {"runtime_kind": "hosted", "host_id": "rack-7_b"}) == "rack-7_b"
    assert _isolation({}, {"runtime_kind": "shared"}) is None


# ---- who may serve a hosted Turn ---------------------------------------------------------------------

class _Pool:
    """A store whose pool query answers fixed declaration rows (newest first)."""

    def __init__(self, rows):
        self.rows, self.asked = rows, []

    def query(self, *, pk, **_):
        from types import SimpleNamespace

        self.asked.append(pk)
        return SimpleNamespace(items=[r for r in self.rows if r["GSI1PK"] == pk])


def _row(kind, host=None, pool="RUNTIME#HOSTED#scripted"):
    from runtime.capabilities import declarations

    caps = declarations(["scripted"])[0]["capabilities"]
    return {"GSI1PK": pool, "connection_id": f"{kind}-{host}", "runtime_kind": kind, "host_id": host,
            "environment_id": None, "capabilities": sorted(k for k, v in caps.items() if v)}


def test_a_bound_environment_is_served_only_by_its_hosts_connections():
    from agents_core.runtimes.connections import eligible_runtimes

    store = _Pool([_row("hosted", "host-b"), _row("hosted", "host-a"), _row("shared", pool="RUNTIME#scripted")])
    unbound = eligible_runtimes(store, "scripted", frozenset(), "openai_hosted", "env_1")  # type: ignore[arg-type]
    assert [r["connection_id"] for r in unbound] == ["hosted-host-b", "hosted-host-a"]
    bound = eligible_runtimes(store, "scripted", frozenset(), "openai_hosted", "env_1", "host-a")  # type: ignore[arg-type]
    assert [r["connection_id"] for r in bound] == ["hosted-host-a"]
    assert store.asked == ["RUNTIME#HOSTED#scripted"] * 2  # never the shared pool
    assert eligible_runtimes(store, "scripted", frozenset(), "none") == [
        r for r in store.rows if r["runtime_kind"] == "shared"]  # type: ignore[arg-type]


def test_a_session_runs_in_the_environment_it_names_or_its_own():
    from agents_core.environments.placement import session_environment_id

    assert session_environment_id("sess_abc", {"type": "openai_hosted"}) == "env_abc"
    assert session_environment_id("sess_abc", {"type": "openai_hosted", "id": "env_shared"}) == "env_shared"
    assert session_environment_id("sess_abc", {"type": "none"}) is None
