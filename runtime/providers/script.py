"""The script language the scripted model provider plays, shared by every dialect.

The newest input the caller sent is the script, one step per line; the conversation so far (how many
function outputs came back after it) says which line is next. What a Harness writes into the conversation
itself (reminders, notifications, its environment, its own notes) is never the script: `caller_text`.

    say TEXT              assistant text
    answer TEXT           the final answer (under a json_schema text.format, TEXT is the JSON document)
    call NAME {json}      a call of the declared function NAME; the script continues after its output
    mcp LABEL TOOL {json} a call of the tool TOOL of the declared MCP server LABEL, under its native name
    parallel N NAME {json}  N calls at once in one response; continues after all N outputs
    sleep S               the provider waits S seconds before answering
    fail                  the provider answers with an error, so the Turn fails
    spawn NAME            a child agent named NAME; the indented lines after it are the child's own script
                          (Codex: multi_agent_v1 spawn_agent with fork_context; Claude Code: the Agent tool)
    wait NAME             wait for that child (Codex: wait_agent on it; Claude Code: nothing, its Agent call
                          already waited)
    write PATH TEXT       write TEXT (UTF-8, the rest of the line, no newline) to PATH in the workspace, through
                          the Harness's own shell tool (Codex: exec_command; Claude Code: Bash)
    read PATH             read PATH through that shell tool, then answer its content as the assistant's text

One model response runs from the current line through the next call (inclusive) or to the end.
"""

from __future__ import annotations

import json
import posixpath
import shlex
from dataclasses import dataclass, field
from typing import Any, Optional


@dataclass
class Step:
    verb: str  # say | answer | call | sleep | fail
    text: str = ""
    name: str = ""
    arguments: str = "{}"  # the JSON text exactly as scripted
    seconds: float = 0.0
    script: str = ""  # a `spawn` step's child script
    server: str = ""  # an `mcp` step's server label (`name` is then the server's tool)
    command_line: str = ""  # a `write`/`read` step's command for the Harness's own shell tool


@dataclass
class Response:
    """What the model answers to one request: texts then calls, or a failure."""

    texts: list[str] = field(default_factory=list)
    calls: list[Step] = field(default_factory=list)
    sleep: float = 0.0
    fail: Optional[str] = None
    answered: bool = False  # an `answer` step was played


# Texts a Harness puts in user messages of its own accord, by how they start. Claude Code: system reminders
# (the environment, the date, a background task's <task-notification>), slash-command echoes, and the meta
# notes it appends beside tool results or after a bad reply. Codex: contextual fragments (environment,
# instructions, permissions, an aborted turn, a finished subagent's <subagent_notification>).
HARNESS_NOTES = (
    "<system-reminder>", "<task-notification>", "<command-", "<local-command", "Caveat:", "Tool loaded.",
    "[structured-output-enforce]", "[projects-reply-gate]", "The previous response failed to produce a valid tool",
    "<environment_context", "<user_instructions", "<permissions", "# AGENTS.md", "<user_shell_command",
    "<turn_aborted", "<skill", "<subagent_notification>",
)


def caller_text(text: str) -> Optional[str]:
    """`text` stripped when the caller sent it; None when it is empty or a Harness wrote it itself."""
    stripped = text.strip()
    if not stripped or stripped.startswith(HARNESS_NOTES):
        return None
    return stripped


def _arguments(raw: str) -> str:
    raw = raw.strip() or "{}"
    json.loads(raw)  # a malformed script is the script author's error: fail loudly
    return raw


def parse(script: str) -> list[Step]:
    steps: list[Step] = []
    lines = script.splitlines()
    index = 0
    while index < len(lines):
        line = lines[index].strip()
        index += 1
        if not line:
            continue
        verb, _, rest = line.partition(" ")
        if verb == "spawn":  # the indented lines that follow are the child's script
            child: list[str] = []
            while index < len(lines) and (not lines[index].strip() or lines[index][:1].isspace()):
                child.append(lines[index].strip())
                index += 1
            steps.append(Step("spawn", name=rest.strip(), script="\n".join(c for c in child if c)))
            continue
        if verb == "wait":
            steps.append(Step("wait", name=rest.strip()))
            continue
        if verb in ("say", "answer"):
            steps.append(Step(verb, text=rest))
        elif verb == "call":
            name, _, raw = rest.strip().partition(" ")
            steps.append(Step("call", name=name, arguments=_arguments(raw)))
        elif verb == "mcp":
            label, _, rest = rest.strip().partition(" ")
            name, _, raw = rest.strip().partition(" ")
            steps.append(Step("call", name=name, arguments=_arguments(raw), server=label))
        elif verb == "parallel":
            count, _, call = rest.strip().partition(" ")
            name, _, raw = call.strip().partition(" ")
            steps += [Step("call", name=name, arguments=_arguments(raw))] * max(1, int(count))
        elif verb in ("write", "read"):
            path, _, text = rest.strip().partition(" ")
            if verb == "write":
                command = f"mkdir -p {shlex.quote(posixpath.dirname(path) or '.')} && printf %s {shlex.quote(text)} > " \
                          f"{shlex.quote(path)}"
                steps.append(Step("call", name="shell", command_line=command))
            else:
                steps += [Step("call", name="shell", command_line=f"cat {shlex.quote(path)}"), Step("echo")]
        elif verb == "sleep":
            steps.append(Step("sleep", seconds=float(rest or 1)))
        elif verb == "fail":
            steps.append(Step("fail", text=rest or "The scripted model was asked to fail."))
        else:
            steps.append(Step("say", text=f"scripted model: unknown step {line!r}"))
    return steps


def next_response(steps: list[Step], outputs_back: int, last_output: str = "") -> Response:
    """The response after `outputs_back` function outputs came back for this script (`last_output`: the text of the
    newest, which a `read` step answers)."""
    response = Response()
    index = 0
    skip = outputs_back
    while index < len(steps):
        step = steps[index]
        if step.verb in ("call", "spawn", "wait"):  # each waits for its output to come back
            group = [step]
            while index + len(group) < len(steps) and steps[index + len(group)] is step:
                group.append(step)  # a `parallel` group: the same step repeated
            if skip >= len(group):
                skip -= len(group)
                response = Response()  # what came before was answered in an earlier response
                index += len(group)
                continue
            response.calls = group
            return response
        if step.verb == "echo":
            response.texts.append(last_output)
        if step.verb in ("say", "answer"):
            response.texts.append(step.text)
            response.answered = response.answered or step.verb == "answer"
        elif step.verb == "sleep":
            response.sleep += step.seconds
        elif step.verb == "fail":
            response.fail = step.text
            return response
        index += 1
    return response


def describe(request_tools: list[dict[str, Any]]) -> list[str]:
    """The tool names a request offered (for logs and tests)."""
    return [str(t.get("name") or t.get("type")) for t in request_tools]
