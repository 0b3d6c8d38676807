"""The openai_hosted configuration's own request checks (agents_contract.hosted), called as Session creation and
`environments.create` call them: the exact messages and params of malformed files, setup commands and references,
and the size bound of the confidential preparation. The admission matrix is in test_hosted_admission.py. Pure."""

from __future__ import annotations

import base64

import pytest

from agents_contract import hosted, validation, wire
from agents_contract.errors import InvalidRequest


def environment(**members):
    return validation.parse(wire.EnvironmentOpenAIHosted, {"type": "openai_hosted", **members}, prefix="environment")


def inline(path="/workspace/a.txt", data=b"a"):
    return {"type": "inline", "path": path, "data": base64.b64encode(data).decode()}


# ---- environment_id -----------------------------------------------------------------------------------

def test_an_inline_configuration_names_no_environment():
    assert hosted.check_reference(environment(env={"A": "b"})) is None
    assert hosted.check_reference(environment()) is None


def test_environment_id_alone_names_it_and_null_members_do_not_count():
    assert hosted.check_reference(environment(environment_id="env_1")) == "env_1"
    assert hosted.check_reference(environment(environment_id="env_1", files=None, env=None)) == "env_1"


@pytest.mark.parametrize("environment_id", [None, ""])
def test_a_null_or_empty_environment_id_is_rejected(environment_id):
    with pytest.raises(InvalidRequest) as err:
        hosted.check_reference(environment(environment_id=environment_id))
    assert (err.value.message, err.value.param) == (
        "Invalid 'environment.environment_id': expected an Environment id (env_...).", "environment.environment_id")


def test_a_reference_with_inline_configuration_names_the_first_member_given():
    with pytest.raises(InvalidRequest) as err:
        hosted.check_reference(environment(environment_id="env_1", setup_commands=[], packages={"python": []}),
                               at="body.environment")
    assert (err.value.message, err.value.param) == (
        "Invalid 'body.environment.environment_id': an existing Environment cannot be combined with a template or "
        "inline configuration; 'body.environment.packages' was also given. Send either environment_id alone or the "
        "configuration without it.", "body.environment.packages")


# ---- files and setup commands --------------------------------------------------------------------------

REJECTED = [
    ("a file without type", {"files": [{"path": "/workspace/a", "data": ""}]},
     "Missing required parameter: 'environment.files[0].type'.", "environment.files[0].type"),
    ("an unknown file type", {"files": [inline(), {"type": "url", "path": "/workspace/b", "data": ""}]},
     "Invalid value for 'environment.files[1].type': expected 'inline' or 'file_id'.", "environment.files[1].type"),
    ("a null file type", {"files": [{"type": None, "path": "/workspace/a", "data": ""}]},
     "Invalid value for 'environment.files[0].type': expected 'inline' or 'file_id'.", "environment.files[0].type"),
    ("a file without path", {"files": [{"type": "inline", "data": ""}]},
     "Missing required parameter: 'environment.files[0].path'.", "environment.files[0].path"),
    ("a file without data", {"files": [{"type": "inline", "path": "/workspace/a"}]},
     "Missing required parameter: 'environment.files[0].data'.", "environment.files[0].data"),
    ("a path that is not a string", {"files": [{"type": "inline", "path": ["/workspace/a"], "data": ""}]},
     "Invalid type for 'environment.files[0].path': expected a string.", "environment.files[0].path"),
    ("an empty path", {"files": [{"type": "inline", "path": "", "data": ""}]},
     "Invalid 'environment.files[0].path': expected an absolute path inside /workspace (such as "
     "/workspace/data.csv), without '.' or '..' segments.", "environment.files[0].path"),
    ("a '.' segment", {"files": [inline("/workspace/./a")]},
     "Invalid 'environment.files[0].path': expected an absolute path inside /workspace (such as "
     "/workspace/data.csv), without '.' or '..' segments.", "environment.files[0].path"),
    ("data that is not a string", {"files": [{"type": "inline", "path": "/workspace/a", "data": 42}]},
     "Invalid type for 'environment.files[0].data': expected a string.", "environment.files[0].data"),
    ("urlsafe base64 is not standard", {"files": [{"type": "inline", "path": "/workspace/a", "data": "-_-_"}]},
     "Invalid 'environment.files[0].data': expected standard base64.", "environment.files[0].data"),
    ("an unknown file member, truncated", {"files": [{**inline(), "m" * 100: 1}]},
     f"Unknown parameter: 'environment.files[0].{'m' * 64}'.", f"environment.files[0].{'m' * 64}"),
    ("an unknown setup command member", {"setup_commands": [{"command": "make", "timeout": 5}]},
     "Unknown parameter: 'environment.setup_commands[0].timeout'.", "environment.setup_commands[0].timeout"),
    ("a setup command without command", {"setup_commands": [{"command": "true"}, {"cwd": "/workspace"}]},
     "Missing required parameter: 'environment.setup_commands[1].command'.", "environment.setup_commands[1].command"),
    ("a command that is not a string", {"setup_commands": [{"command": ["make", "all"]}]},
     "Invalid type for 'environment.setup_commands[0].command': expected a string.",
     "environment.setup_commands[0].command"),
    ("a command with NUL", {"setup_commands": [{"command": "make\x00"}]},
     "Invalid 'environment.setup_commands[0].command': a nonempty shell command of at most 8192 bytes, without NUL.",
     "environment.setup_commands[0].command"),
    ("a cwd that is not a string", {"setup_commands": [{"command": "ls", "cwd": 1}]},
     "Invalid 'environment.setup_commands[0].cwd': expected an absolute directory (default /workspace).",
     "environment.setup_commands[0].cwd"),
]


@pytest.mark.parametrize("what, members, message, param", REJECTED, ids=[r[0] for r in REJECTED])
def test_malformed_files_and_setup_commands_are_400s_naming_the_field(what, members, message, param):
    with pytest.raises(InvalidRequest) as err:
        hosted.check(environment(**members))
    assert (err.value.message, err.value.param) == (message, param)
    assert err.value.status == 400


def test_a_file_id_entry_is_admitted_with_its_path_and_keeps_the_id_for_core_to_resolve():
    env = environment(files=[inline(), {"type": "file_id", "file_id": "file-1", "path": "/workspace/in/a.csv"}])
    hosted.check(env)
    assert hosted.public(env)["files"][1] == {"id": hosted.file_id("/workspace/in/a.csv"), "file_id": "file-1",
                                             "path": "/workspace/in/a.csv", "size_bytes": 0, "type": "file_id"}
    assert hosted.preparation(env)["files"][1] == {"path": "/workspace/in/a.csv", "file_id": "file-1"}


@pytest.mark.parametrize("entry, param", [
    ({"type": "file_id", "file_id": "file-1"}, "environment.files[0].path"),
    ({"type": "file_id", "path": "/workspace/a"}, "environment.files[0].file_id"),
    ({"type": "file_id", "file_id": "", "path": "/workspace/a"}, "environment.files[0].file_id"),
    ({"type": "file_id", "file_id": "f" * 257, "path": "/workspace/a"}, "environment.files[0].file_id"),
    ({"type": "file_id", "file_id": "file-1", "path": "/etc/passwd"}, "environment.files[0].path"),
    ({"type": "file_id", "file_id": "file-1", "path": "/workspace/../x"}, "environment.files[0].path"),
    ({"type": "file_id", "file_id": "file-1", "path": "/workspace/a", "data": "eA=="}, "environment.files[0].data"),
])
def test_a_malformed_file_id_entry_is_a_400_naming_the_field(entry, param):
    with pytest.raises(InvalidRequest) as err:
        hosted.check(environment(files=[entry]))
    assert err.value.param == param and err.value.status == 400


def test_the_field_prefix_is_the_callers():
    with pytest.raises(InvalidRequest) as err:
        hosted.check(environment(setup_commands=[{"cwd": "/"}]), at="agent.environment")
    assert err.value.param == "agent.environment.setup_commands[0].command"


# ---- the confidential preparation's size -------------------------------------------------------------------

def test_the_whole_preparation_holds_at_most_256_kib_of_json():
    fixed = len('{"files":[],"packages":{"python":[],"npm":[]},"setup_commands":[],"env":{"V":""},'
                '"network":{"access":"disabled"}}')
    room = hosted.MAX_PREPARATION_BYTES - fixed
    accepted = environment(env={"V": "x" * room})
    hosted.check(accepted)
    assert len(hosted.preparation(accepted)["env"]["V"]) == room
    with pytest.raises(InvalidRequest) as err:
        hosted.check(environment(env={"V": "x" * (room + 1)}))
    assert (err.value.message, err.value.param) == (
        "Invalid 'environment': the files, setup commands and env of one Environment hold at most 262144 bytes of "
        "JSON together.", "environment")


def test_files_setup_commands_and_env_count_together():
    commands = [{"command": "x" * hosted.MAX_COMMAND_BYTES}] * hosted.MAX_SETUP_COMMANDS  # 160 KiB
    files = [inline(f"/workspace/{i}", b"\0" * 16_000) for i in range(4)]  # 64000 bytes, 85336 as base64
    env = {"V": "x" * 15_000}
    hosted.check(environment(setup_commands=commands, env=env))
    hosted.check(environment(files=files, env=env))
    hosted.check(environment(setup_commands=commands, files=files))
    with pytest.raises(InvalidRequest) as err:
        hosted.check(environment(setup_commands=commands, files=files, env=env))
    assert err.value.param == "environment"
