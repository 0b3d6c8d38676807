"""The Runtime's workspace binding and tool variables (runtime/workspace.py): a Session names
/workspace or exactly the bound directory; stdio env_vars come from the Environment, by name."""

import pytest

from runtime.environments.workspace import Workspace, WorkspaceError, read_env_file


def start(workspace, tools=(), kind="self_hosted"):
    return {"type": "turn.start", "environment": {"type": kind, "workspace_directory": workspace},
            "agent": {"tools": list(tools)}}


def stdio(cwd, env_vars=()):
    return {"type": "mcp", "server_label": "probe",
            "transport": {"type": "stdio", "command": "probe", "args": [], "cwd": cwd, "env_vars": list(env_vars)}}


def test_the_alias_and_the_bound_directory_map_to_the_bound_directory(tmp_path):
    ws = Workspace(str(tmp_path))
    for declared in ("/workspace", str(tmp_path)):
        bound = ws.bind(start(declared, [stdio("/workspace/tools")]))
        assert bound["environment"]["workspace_directory"] == str(tmp_path)
        assert bound["agent"]["tools"][0]["transport"]["cwd"] == f"{tmp_path}/tools"
    original = start("/workspace")
    ws.bind(original)
    assert original["environment"]["workspace_directory"] == "/workspace"  # the message is not changed


@pytest.mark.parametrize("declared", ["/etc", "/workspace2", "/", "{}/../other"])
def test_any_other_workspace_fails_saying_which_directory_is_bound(tmp_path, declared):
    with pytest.raises(WorkspaceError) as err:
        Workspace(str(tmp_path)).bind(start(declared.format(tmp_path)))
    assert str(tmp_path) in str(err.value) and "/workspace" in str(err.value)


def test_an_environments_runtime_runs_workspace_sessions_only(tmp_path):
    with pytest.raises(WorkspaceError):
        Workspace(str(tmp_path)).bind({"type": "turn.start", "environment": {"type": "none"}, "agent": {"tools": []}})


def test_a_missing_stdio_variable_fails_the_start_naming_it_and_never_a_value(tmp_path, monkeypatch):
    monkeypatch.setenv("FROM_PROCESS", "process-secret")
    ws = Workspace(str(tmp_path), {"PRESENT": "file-secret"})
    ws.bind(start("/workspace", [stdio("/workspace", ["PRESENT"])]))
    for missing in ("ABSENT", "FROM_PROCESS"):  # the Runtime's own environment only when the operator says so
        with pytest.raises(WorkspaceError) as err:
            ws.bind(start("/workspace", [stdio("/workspace", ["PRESENT", missing])]))
        assert missing in str(err.value) and "probe" in str(err.value) and "secret" not in str(err.value)
    Workspace(str(tmp_path), {}, inherit=True).bind(start("/workspace", [stdio("/workspace", ["FROM_PROCESS"])]))


def test_the_tool_env_file_reads_names_and_values(tmp_path):
    path = tmp_path / "tools.env"
    path.write_text("# comment\n\nexport A=1\nB='two words'\nC=\"x=y\"\nD=\n")
    assert read_env_file(str(path)) == {"A": "1", "B": "two words", "C": "x=y", "D": ""}
    path.write_text("not a pair\n")
    with pytest.raises(ValueError, match="tools.env:1"):
        read_env_file(str(path))
