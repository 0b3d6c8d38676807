"""The scripted model provider's `write PATH TEXT` and `read PATH` (issue 38, item 7): a call of the Harness's own shell
tool (Codex exec_command, Claude Code Bash), and for `read` an answer holding the file's content as the tool returned
it (Codex's exec_command output after its `Output:` header)."""

from __future__ import annotations

import json
import subprocess

from runtime.providers import anthropic, responses, script


def test_write_is_one_shell_call_that_writes_exactly_the_text(tmp_path):
    text = "it's $HOME `x` %s 42, no newline"
    [step] = script.parse(f"write {tmp_path}/out/r.txt {text}")
    assert step.verb == "call" and step.command_line
    subprocess.run(["/bin/sh", "-c", step.command_line], check=True)  # noqa: S603 - the scripted command itself
    assert (tmp_path / "out" / "r.txt").read_text() == text


def test_read_calls_the_shell_then_answers_the_newest_output():
    steps = script.parse("read /workspace/in/orders.csv")
    assert [s.verb for s in steps] == ["call", "echo"] and steps[0].command_line == "cat /workspace/in/orders.csv"
    assert script.next_response(steps, 0).calls == [steps[0]]
    assert script.next_response(steps, 1, "id,total\n").texts == ["id,total\n"]


def test_each_dialect_names_its_own_shell_tool_and_reads_its_output_back():
    [step] = script.parse("write /workspace/outputs/r.txt x")
    item = responses._call_item(step, {"input": []})
    assert item["name"] == "exec_command" and json.loads(item["arguments"]) == {"cmd": step.command_line}
    codex_output = "Chunk ID: 1\nWall time: 0.0 seconds\nProcess exited with code 0\nOriginal token count: 3\nOutput:\nid,total\n"
    assert responses.last_output({"input": [{"type": "function_call_output", "call_id": "c", "output": codex_output}]}) \
        == "id,total\n"
    body = {"messages": [{"role": "user", "content": "write /workspace/outputs/r.txt x"}], "tools": [
        {"name": "Bash", "input_schema": {"type": "object"}}]}
    _, blocks, stop = anthropic.plan_blocks(body)
    assert stop == "tool_use" and blocks[-1]["name"] == "Bash" and blocks[-1]["input"] == {"command": step.command_line}
