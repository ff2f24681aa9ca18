"""Run the same battery of ACP calls against each pinned agent and save what comes back.

    .venv/bin/python tests/interop/explore/battery.py [--no-fs] [claude opencode codex gemini]

--no-fs: do not advertise fs/read_text_file and fs/write_text_file (gemini-cli's write_file
of a new file fails when they are advertised; see FINDINGS.md).

For each agent (installed by scripts/install-agents.sh, launched as agent_setups says):
initialize; authenticate where the agent needs it; session/new; every select option set
to another valid value, then to an unknown value, then an unknown option id; session/set_mode
when the agent still sends `modes`; then, against the scripted model server, a plain turn,
a turn whose tool call is allowed, one whose tool call is denied, a cancelled turn and one
after it; session/list and session/close where offered; finally session/load of the turns'
session in a new process. Raw frames and a summary go to $ACP_EXPLORE_OUT/<agent>/
(default /tmp/acp-explore), the model server's request log next to them.
"""

from __future__ import annotations

import asyncio
import json
import sys
import time
from pathlib import Path
from typing import Any

sys.path.insert(0, str(Path(__file__).resolve().parent.parent))

from agent_setups import AGENTS, AgentSetup  # noqa: E402
from harness import OUT_ROOT, Probe, turn_text, update_kinds  # noqa: E402
from model_server import ModelServer  # noqa: E402


def other_choices(option: dict[str, Any]) -> list[str]:
    values: list[str] = []
    for entry in option.get("options") or []:
        if "group" in entry:
            values.extend(choice["value"] for choice in entry.get("options") or [])
        else:
            values.append(entry["value"])
    return [value for value in values if value != option.get("currentValue")]


def turn_summary(result: Any, updates: list[dict[str, Any]], **extra: Any) -> dict[str, Any]:
    return {"result": result, "text": turn_text(updates), "kinds": update_kinds(updates), **extra}


async def cancelled_turn(probe: Probe, session_id: str) -> dict[str, Any]:
    """A slow streamed reply, cancelled once its first text chunk has arrived."""
    first = len(probe.frames)
    turn = asyncio.create_task(probe.prompt(
        session_id, "slow one two three four five six seven eight nine ten", timeout=60))
    deadline = time.monotonic() + 30
    while time.monotonic() < deadline and not turn_text(
            [f.msg["params"] for f in probe.frames[first:] if f.msg.get("method") == "session/update"]):
        await asyncio.sleep(0.05)
    assert probe.conn is not None
    await probe.conn._conn.send_notification("session/cancel", {"sessionId": session_id})
    result, updates = await turn
    return turn_summary(result, updates)


async def start(setup: AgentSetup, server: ModelServer, reuse: Probe | None = None,
                fs_capability: bool = True) -> tuple[Probe, dict[str, Any]]:
    results: dict[str, Any] = {}
    probe = Probe(setup.name, command=setup.command(server), env=setup.env(server), reuse=reuse,
                  fs_capability=fs_capability)
    started = time.monotonic()
    await probe.start()
    results["initialize"] = await probe.initialize()
    results["initialize_s"] = round(time.monotonic() - started, 2)
    if setup.auth_method:
        results["authenticate"] = await probe.call("authenticate", {"methodId": setup.auth_method})
    return probe, results


async def settings_battery(probe: Probe, session: dict[str, Any]) -> list[dict[str, Any]]:
    session_id = session["sessionId"]
    settings: list[dict[str, Any]] = []
    for option in list(session.get("configOptions") or []):
        if option.get("type") != "select":
            continue
        for value in other_choices(option)[:1] + ["no-such-value"]:
            first = len(probe.frames)
            answer = await probe.call("session/set_config_option",
                                      {"sessionId": session_id, "configId": option["id"], "value": value})
            pushed = [f.msg["params"]["update"] for f in probe.frames[first:]
                      if f.msg.get("method") == "session/update"
                      and f.msg["params"]["update"].get("sessionUpdate") == "config_option_update"]
            settings.append({"configId": option["id"], "value": value, "answer": answer,
                             "config_option_updates": pushed})
    answer = await probe.call("session/set_config_option",
                              {"sessionId": session_id, "configId": "no-such-option", "value": "x"})
    settings.append({"configId": "no-such-option", "value": "x", "answer": answer})
    return settings


async def turns_battery(probe: Probe, session_id: str) -> dict[str, Any]:
    turns: dict[str, Any] = {}
    result, updates = await probe.prompt(session_id, "say hi", timeout=120)
    turns["plain"] = turn_summary(result, updates)
    target = probe.cwd / "allowed.txt"
    result, updates = await probe.prompt(session_id, f"write {target} with hello world", timeout=120)
    turns["write_allowed"] = turn_summary(result, updates, file=target.read_text() if target.exists() else None)
    probe.client.permission = "deny"
    target = probe.cwd / "denied.txt"
    result, updates = await probe.prompt(session_id, f"write {target} with should not exist", timeout=120)
    turns["write_denied"] = turn_summary(result, updates, file=target.read_text() if target.exists() else None)
    probe.client.permission = "allow"
    turns["cancelled"] = await cancelled_turn(probe, session_id)
    result, updates = await probe.prompt(session_id, "after cancel", timeout=120)
    turns["after_cancel"] = turn_summary(result, updates)
    return turns


async def run(name: str, fs_capability: bool = True) -> dict[str, Any]:
    setup = AGENTS[name]
    log_path = OUT_ROOT / f"{name}-model-requests.jsonl"
    log_path.parent.mkdir(parents=True, exist_ok=True)
    log_path.unlink(missing_ok=True)
    with ModelServer(log_path=log_path) as server:
        probe, results = await start(setup, server, fs_capability=fs_capability)
        new = await probe.new_session()
        results["session_new"] = new
        if not new.ok:
            await probe.close()
            probe.save(results)
            return results
        results["set_config_option"] = await settings_battery(probe, new.result)
        if new.result.get("modes"):
            modes = new.result["modes"]
            results["set_mode"] = await probe.call("session/set_mode", {
                "sessionId": new.result["sessionId"], "modeId": modes["availableModes"][-1]["id"]})
        # A fresh session for the turns, so the settings above do not change them.
        session_id = (await probe.new_session()).result["sessionId"]
        results["turns"] = await turns_battery(probe, session_id)
        capabilities = (results["initialize"].result or {}).get("agentCapabilities", {})
        session_capabilities = capabilities.get("sessionCapabilities") or {}
        if "list" in session_capabilities:
            results["session_list"] = await probe.call("session/list", {"cwd": str(probe.cwd)})
        await probe.close()
        probe.save(results, keep_dirs=True)

        # The same session, loaded by a new process with the same HOME.
        loader, _ = await start(setup, server, reuse=probe, fs_capability=fs_capability)
        first = len(loader.frames)
        loaded = await loader.call("session/load", {"sessionId": session_id, "cwd": str(loader.cwd),
                                                    "mcpServers": []})
        updates = [f.msg["params"] for f in loader.frames[first:] if f.msg.get("method") == "session/update"]
        results["session_load"] = {"answer": loaded, "replayed_kinds": update_kinds(updates)}
        if "close" in session_capabilities:
            results["session_close"] = await loader.call("session/close", {"sessionId": session_id})
        await loader.close()
        results["loader_notes"] = loader.notes
        results["model_requests"] = [
            {"method": r.method, "path": r.path, "status": r.status,
             "model": r.body.get("model") if isinstance(r.body, dict) else None,
             "reply_text": (r.reply or {}).get("text")} for r in server.requests]
        probe.save(results)
        return results


def main() -> None:
    arguments = sys.argv[1:]
    fs_capability = "--no-fs" not in arguments
    names = [argument for argument in arguments if argument != "--no-fs"] or list(AGENTS)
    for name in names:
        started = time.monotonic()
        results = asyncio.run(run(name, fs_capability))
        print(f"===== {name} ({time.monotonic() - started:.1f} s)")
        print(json.dumps(results, indent=1, default=lambda o: o.__dict__)[:20000])


if __name__ == "__main__":
    main()
