"""Screenshots of the operator console from a real run: starts the local stack (as `make dev` does,
with its reference Runtime, on free ports), drives a few Sessions with the official SDK, opens the
dashboard in headless Chromium at 1280x800 and writes docs/images/dashboard-*.png.

    .venv/bin/python bench/dashboard_screenshots.py          # needs Debian's chromium (make browser)
"""

from __future__ import annotations

import json
import os
import pathlib
import re
import shutil
import signal
import subprocess
import sys
import tempfile
import time

from openai import OpenAI

ROOT = pathlib.Path(__file__).resolve().parents[1]
OUT = ROOT / "docs" / "images"
WEATHER = {"type": "function", "name": "get_weather", "description": "Current weather for a city",
           "parameters": {"type": "object", "properties": {"city": {"type": "string"}, "unit": {
               "type": "string", "enum": ["celsius", "fahrenheit"]}}, "required": ["city"]}}
FORECAST = {"type": "function", "name": "get_forecast", "description": "Three-day forecast for a city",
            "parameters": {"type": "object", "properties": {"city": {"type": "string"}, "days": {"type": "integer"}}}}


def wait_for(predicate, timeout=20.0):
    end = time.time() + timeout
    while time.time() < end:
        value = predicate()
        if value:
            return value
        time.sleep(0.1)
    raise TimeoutError("condition not reached")


def start_stack(state: pathlib.Path) -> tuple[subprocess.Popen, dict]:
    env = {**os.environ, "AGENTS_CORE_HTTP_PORT": "0", "AGENTS_CORE_WS_PORT": "0", "AGENTS_CORE_MOTO_PORT": "0",
           "AGENTS_CORE_STACK_FILE": str(state), "PYTHONPATH": f"{ROOT / 'layers' / 'contract'}:{ROOT}"}
    process = subprocess.Popen([sys.executable, "-m", "local"], cwd=ROOT, env=env,
                               stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
    info = wait_for(lambda: state.exists() and json.loads(state.read_text() or "null"), timeout=60)
    return process, info


def message(client, session_id, text):
    client.beta.agents.sessions.events.create(session_id, events=[{
        "type": "agent.session.input.message", "input": [{"role": "user", "content": [{"type": "input_text", "text": text}]}]}])


def pending(client, session_id):
    return wait_for(lambda: client.beta.agents.sessions.retrieve(session_id).required_actions)


def answer(client, session_id, action, output, success=True):
    result = {"output": output} if success else {"error": output}
    client.beta.agents.sessions.events.create(session_id, events=[{
        "type": "agent.session.input.tool_result", "turn_id": action.turn_id, "call_id": action.call_id,
        "success": success, **result}])


def populate(client) -> dict[str, str]:
    """Sessions in the states an operator meets: done, failed, structured, and one waiting for a result."""
    agent = client.beta.agents.create(
        name="weather-desk", model="gpt-5", instructions="Answer weather questions; call the tools for facts.",
        tools=[WEATHER, FORECAST], extra_body={"x_agents_core": {"harness": "scripted"}})
    done = client.beta.agents.sessions.create(
        agent_id=agent.id, environment={"type": "none"}, metadata={"customer": "acme"},
        input='say Checking the weather in Oslo.\ncall get_weather {"city": "Oslo", "unit": "celsius"}\n'
              'say It is 4 °C and cloudy in Oslo.')
    answer(client, done.id, pending(client, done.id)[0], "4 C, overcast, wind 12 km/h")
    failed = client.beta.agents.sessions.create(
        agent_id=agent.id, environment={"type": "none"}, input="say Starting the lookup.\nfail")
    structured = client.beta.agents.sessions.create(
        environment={"type": "none"}, input='answer {"city": "Rome", "temperature_c": 19, "sky": "clear"}',
        agent={"model": "gpt-5", "text": {"format": {"type": "json_schema", "schema": {
            "type": "object", "properties": {"city": {"type": "string"}, "temperature_c": {"type": "number"},
                                             "sky": {"type": "string"}}}}}},
        extra_body={"x_agents_core": {"harness": "codex"}})
    main = client.beta.agents.sessions.create(
        agent_id=agent.id, environment={"type": "none"}, metadata={"customer": "acme", "ticket": "T-1042"},
        input='say Let me look up Paris first.\ncall get_weather {"city": "Paris", "unit": "celsius"}\n'
              'call get_forecast {"city": "Paris", "days": 3}\nsay Paris: 18 °C with light rain, clearing by Friday.')
    for sid in (done.id, failed.id, structured.id):
        wait_for(lambda sid=sid: client.beta.agents.sessions.retrieve(sid).status in ("idle", "failed"))
    return {"main": main.id, "done": done.id}


def main() -> int:
    chromium = shutil.which("chromium") or shutil.which("chromium-browser")
    if chromium is None:
        print("no chromium: `make browser` installs Debian's", file=sys.stderr)
        return 1
    from playwright.sync_api import expect, sync_playwright

    OUT.mkdir(parents=True, exist_ok=True)
    with tempfile.TemporaryDirectory() as tmp:
        process, info = start_stack(pathlib.Path(tmp) / "stack.json")
        try:
            client = OpenAI(base_url=info["base_url"], api_key=info["api_key"], max_retries=0)
            time.sleep(1.0)  # the stack's reference Runtime says hello
            ids = populate(client)
            action = pending(client, ids["main"])[0]
            expect.set_options(timeout=15_000)
            with sync_playwright() as p:
                browser = p.chromium.launch(executable_path=chromium, headless=True, args=["--no-sandbox", "--disable-gpu"])
                page = browser.new_page(viewport={"width": 1280, "height": 800})
                sockets, down = [], {"on": False}

                def route(ws):
                    if down["on"]:
                        ws.close(code=1011, reason="unreachable")
                        return
                    sockets.append(ws)
                    ws.connect_to_server()

                page.route_web_socket(re.compile(r"^wss?://"), route)
                page.goto(info["dashboard_url"] + f"#session={ids['main']}&turn={action.turn_id}")
                form = page.locator(f".action-form[data-call-id='{action.call_id}']")
                expect(page.locator("#conn")).to_have_attribute("data-state", "live")
                form.locator("textarea").fill("18 C, light rain")
                page.screenshot(path=str(OUT / "dashboard-pending-call.png"))

                form.locator("button[type=submit]").click()
                second = wait_for(lambda: [a for a in client.beta.agents.sessions.retrieve(ids["main"]).required_actions
                                           if a.call_id != action.call_id])[0]
                page.locator(f".action-form[data-call-id='{second.call_id}'] textarea").fill(
                    '[{"day": "Wed", "sky": "rain"}, {"day": "Thu", "sky": "showers"}, {"day": "Fri", "sky": "sun"}]')
                page.click(f".action-form[data-call-id='{second.call_id}'] button[type=submit]")
                expect(page.locator("#sstatus")).to_have_text("idle")
                expect(page.locator(".item[data-phase=final_answer]")).to_have_count(1)
                page.locator("#transcript").evaluate("t => t.scrollTop = t.scrollHeight")
                page.screenshot(path=str(OUT / "dashboard-transcript.png"))

                page.click("#tab-config")
                page.screenshot(path=str(OUT / "dashboard-configuration.png"))
                page.click("#tab-events")
                page.screenshot(path=str(OUT / "dashboard-live-events.png"))

                page.click("#tab-transcript")
                down["on"] = True
                for ws in sockets:
                    ws.close(code=1001, reason="going away")
                message(client, ids["main"], "say Meanwhile, elsewhere: Friday looks sunny.")
                expect(page.locator("#conn")).to_have_attribute("data-state", "reconnecting")
                page.screenshot(path=str(OUT / "dashboard-reconnecting.png"))
                down["on"] = False
                expect(page.locator("#conn")).to_have_attribute("data-state", "live", timeout=20_000)
                expect(page.locator(".item[data-role=assistant]", has_text="Friday looks sunny")).to_have_count(1)
                page.locator("#transcript").evaluate("t => t.scrollTop = t.scrollHeight")
                page.screenshot(path=str(OUT / "dashboard-recovered.png"))
                browser.close()
        finally:
            process.send_signal(signal.SIGTERM)  # as Ctrl-C; SIGINT may be ignored (bench/common.py)
            try:
                process.wait(timeout=20)
            except subprocess.TimeoutExpired:
                process.kill()
    for path in sorted(OUT.glob("dashboard-*.png")):
        print(path.relative_to(ROOT))
    return 0


if __name__ == "__main__":
    sys.exit(main())
