"""The scripted model server answers each wire format the pinned agents speak, as they parse it."""

from __future__ import annotations

import json
import threading
import urllib.error
import urllib.request
from pathlib import Path
from typing import Any

import pytest
from model_server import ModelRequest, ModelServer, Reply, ToolCall


def post(server: ModelServer, path: str, body: dict[str, Any]) -> tuple[str, bytes]:
    request = urllib.request.Request(f"{server.url}{path}", data=json.dumps(body).encode(),
                                     headers={"Content-Type": "application/json"}, method="POST")
    with urllib.request.urlopen(request, timeout=10) as response:
        return response.headers.get("Content-Type", ""), response.read()


def sse_events(raw: bytes) -> list[tuple[str | None, Any]]:
    """(event name, parsed data) of each SSE frame; data "[DONE]" stays a string."""
    events = []
    for frame in raw.decode().split("\n\n"):
        if not frame.strip():
            continue
        name = None
        data = ""
        for line in frame.splitlines():
            if line.startswith("event: "):
                name = line[len("event: "):]
            elif line.startswith("data: "):
                data += line[len("data: "):]
        events.append((name, data if data == "[DONE]" else json.loads(data)))
    return events


WRITE_TOOL_ANTHROPIC = {"name": "Write", "input_schema": {
    "type": "object", "properties": {"file_path": {"type": "string"}, "content": {"type": "string"}}}}


def test_anthropic_stream_has_text_then_tool_use_with_usage(model_server: ModelServer) -> None:
    content_type, raw = post(model_server, "/v1/messages?beta=true", {
        "model": "claude-sonnet-4-6", "stream": True, "tools": [WRITE_TOOL_ANTHROPIC],
        "messages": [{"role": "user", "content": [
            {"type": "text", "text": "<system-reminder>ignore me</system-reminder>"},
            {"type": "text", "text": "write /tmp/a.txt with hello there"}]}]})
    assert content_type == "text/event-stream"
    events = sse_events(raw)
    names = [name for name, _ in events]
    assert names[0] == "message_start" and names[-2:] == ["message_delta", "message_stop"]
    text = "".join(data["delta"]["text"] for name, data in events
                   if name == "content_block_delta" and data["delta"]["type"] == "text_delta")
    assert text == "I will write the file."
    assert sum(1 for name, data in events if name == "content_block_delta"
               and data["delta"]["type"] == "text_delta") > 1, "text should arrive in several chunks"
    tool_start = next(data for name, data in events if name == "content_block_start"
                      and data["content_block"]["type"] == "tool_use")
    assert tool_start["content_block"]["name"] == "Write"
    arguments = "".join(data["delta"]["partial_json"] for name, data in events
                        if name == "content_block_delta" and data["delta"]["type"] == "input_json_delta")
    assert json.loads(arguments) == {"file_path": "/tmp/a.txt", "content": "hello there"}
    delta = next(data for name, data in events if name == "message_delta")
    assert delta["delta"]["stop_reason"] == "tool_use"
    assert delta["usage"]["output_tokens"] > 0


def test_anthropic_tool_result_gets_final_text_and_count_tokens_answers(model_server: ModelServer) -> None:
    _, raw = post(model_server, "/v1/messages", {
        "model": "m", "stream": False, "tools": [WRITE_TOOL_ANTHROPIC],
        "messages": [
            {"role": "user", "content": "write /tmp/a.txt with x"},
            {"role": "assistant", "content": [{"type": "tool_use", "id": "t1", "name": "Write", "input": {}}]},
            {"role": "user", "content": [{"type": "tool_result", "tool_use_id": "t1",
                                          "content": "File created successfully\nmore"}]}]})
    message = json.loads(raw)
    assert message["stop_reason"] == "end_turn"
    assert message["content"] == [{"type": "text", "text": "Tool finished: File created successfully"}]
    _, raw = post(model_server, "/v1/messages/count_tokens", {"model": "m", "messages": [{"role": "user",
                                                                                          "content": "hi"}]})
    assert json.loads(raw)["input_tokens"] > 0


def test_anthropic_tool_result_before_a_trailing_system_message_still_ends_the_tool_call(
        model_server: ModelServer) -> None:
    # claude-agent-acp 0.101.0 sends a message of role "system" after the tool result; answering the write
    # again made it write the file over and over.
    _, raw = post(model_server, "/v1/messages", {
        "model": "m", "stream": False, "tools": [WRITE_TOOL_ANTHROPIC],
        "messages": [
            {"role": "user", "content": "write /tmp/a.txt with x"},
            {"role": "assistant", "content": [{"type": "tool_use", "id": "t1", "name": "Write", "input": {}}]},
            {"role": "user", "content": [{"type": "tool_result", "tool_use_id": "t1", "content": "File created"}]},
            {"role": "system", "content": [{"type": "text", "text": "<total_tokens>1000 tokens left</total_tokens>"}]}]})
    assert json.loads(raw)["content"] == [{"type": "text", "text": "Tool finished: File created"}]


def test_openai_chat_stream_carries_tool_call_arguments_and_usage(model_server: ModelServer) -> None:
    _, raw = post(model_server, "/v1/chat/completions", {
        "model": "interop-model", "stream": True,
        "tools": [{"type": "function", "function": {"name": "bash", "parameters": {
            "type": "object", "properties": {"command": {"type": "string"}, "description": {"type": "string"}}}}}],
        "messages": [{"role": "system", "content": "be brief"}, {"role": "user", "content": "run echo hi"}]})
    events = [data for _, data in sse_events(raw)]
    assert events[-1] == "[DONE]"
    chunks = events[:-1]
    text = "".join(c["choices"][0]["delta"].get("content") or "" for c in chunks)
    assert text == "I will run the command."
    calls = [call for c in chunks for call in c["choices"][0]["delta"].get("tool_calls") or []]
    assert calls[0]["function"]["name"] == "bash" and calls[0]["id"]
    arguments = json.loads("".join(call["function"]["arguments"] for call in calls))
    assert arguments == {"command": "echo hi", "description": "Run echo hi"}
    assert chunks[-1]["choices"][0]["finish_reason"] == "tool_calls"
    assert chunks[-1]["usage"]["total_tokens"] > 0


def test_openai_chat_after_tool_message_finishes_with_stop(model_server: ModelServer) -> None:
    _, raw = post(model_server, "/v1/chat/completions", {
        "model": "interop-model", "stream": False,
        "tools": [{"type": "function", "function": {"name": "bash", "parameters": {}}}],
        "messages": [{"role": "user", "content": "run echo hi"},
                     {"role": "assistant", "content": None, "tool_calls": [
                         {"id": "c1", "type": "function", "function": {"name": "bash", "arguments": "{}"}}]},
                     {"role": "tool", "tool_call_id": "c1", "content": "hi"}]})
    completion = json.loads(raw)
    assert completion["choices"][0]["finish_reason"] == "stop"
    assert completion["choices"][0]["message"]["content"] == "Tool finished: hi"


def test_openai_responses_stream_ends_with_completed_and_escalated_shell_call(model_server: ModelServer) -> None:
    exec_command = {"type": "function", "name": "exec_command", "parameters": {"type": "object", "properties": {
        "cmd": {"type": "string"}, "sandbox_permissions": {"type": "string"}, "justification": {"type": "string"}}}}
    _, raw = post(model_server, "/v1/responses", {
        "model": "gpt-5.4", "stream": True, "tools": [exec_command],
        "input": [{"type": "message", "role": "user",
                   "content": [{"type": "input_text", "text": "<environment_context>cwd</environment_context>"}]},
                  {"type": "message", "role": "user",
                   "content": [{"type": "input_text", "text": "write /tmp/b.txt with it's here"}]}]})
    events = sse_events(raw)
    assert events[0][0] == "response.created" and events[-1][0] == "response.completed"
    done_items = [data["item"] for name, data in events if name == "response.output_item.done"]
    assert [item["type"] for item in done_items] == ["message", "function_call"]
    call = done_items[1]
    arguments = json.loads(call["arguments"])
    assert call["name"] == "exec_command" and call["call_id"]
    assert arguments["cmd"] == "printf %s 'it'\"'\"'s here' > /tmp/b.txt"
    assert arguments["sandbox_permissions"] == "require_escalated"
    assert events[-1][1]["response"]["usage"]["total_tokens"] > 0


def test_gemini_stream_skips_session_context_and_json_requests_get_schema_shaped_answers(
        model_server: ModelServer) -> None:
    _, raw = post(model_server, "/v1beta/models/gemini-2.5-flash:streamGenerateContent?alt=sse", {
        "contents": [{"role": "user", "parts": [{"text": "<session_context>\nstuff\n</session_context>"},
                                                {"text": "say hi"}]}],
        "tools": [{"functionDeclarations": [{"name": "write_file"}]}]})
    chunks = [data for _, data in sse_events(raw)]
    text = "".join(part.get("text", "") for c in chunks for part in c["candidates"][0]["content"]["parts"])
    assert text == "Hello from the interop model. You said: say hi"
    assert chunks[-1]["candidates"][0]["finishReason"] == "STOP"
    _, raw = post(model_server, "/v1beta/models/gemini-2.5-flash-lite:generateContent", {
        "contents": [{"role": "user", "parts": [{"text": "classify"}]}],
        "generationConfig": {"responseMimeType": "application/json", "responseJsonSchema": {
            "type": "OBJECT", "required": ["complexity_reasoning", "complexity_score"], "properties": {
                "complexity_reasoning": {"type": "STRING"}, "complexity_score": {"type": "INTEGER"}}}}})
    answer = json.loads(json.loads(raw)["candidates"][0]["content"]["parts"][0]["text"])
    assert answer == {"complexity_reasoning": "interop", "complexity_score": 1}


def test_model_list_serves_the_configured_models(model_server: ModelServer) -> None:
    with urllib.request.urlopen(f"{model_server.url}/v1/models", timeout=10) as response:
        listing = json.loads(response.read())
    assert [entry["id"] for entry in listing["data"]] == ["interop-model", "interop-model-large"]


def test_a_websocket_upgrade_is_told_to_use_http_and_other_unknown_paths_are_not_found(
        model_server: ModelServer) -> None:
    upgrade = urllib.request.Request(f"{model_server.url}/v1/responses",
                                     headers={"Connection": "Upgrade", "Upgrade": "websocket"})
    with pytest.raises(urllib.error.HTTPError) as refused:
        urllib.request.urlopen(upgrade, timeout=10)
    assert refused.value.code == 426
    with pytest.raises(urllib.error.HTTPError) as missing:
        urllib.request.urlopen(f"{model_server.url}/v1/responses", timeout=10)
    assert missing.value.code == 404
    assert [r.status for r in model_server.requests] == [426, 404]


def test_custom_script_sees_the_parsed_request_and_its_reply_is_logged(tmp_path: Path) -> None:
    seen: list[ModelRequest] = []

    def script(request: ModelRequest) -> Reply:
        seen.append(request)
        return Reply(thinking="hmm", text="custom", tool_calls=[ToolCall("Write", {"file_path": "/x"})])

    log_path = tmp_path / "requests.jsonl"
    with ModelServer(script, log_path=log_path) as server:
        _, raw = post(server, "/v1/messages", {"model": "m", "stream": True, "tools": [WRITE_TOOL_ANTHROPIC],
                                               "messages": [{"role": "user", "content": "anything"}]})
        record = server.wait_for(lambda r: r.path == "/v1/messages", timeout=5)
    assert seen[0].api == "anthropic" and seen[0].last_user_text == "anything"
    assert set(seen[0].tools) == {"Write"}
    block_types = [data["content_block"]["type"] for name, data in sse_events(raw) if name == "content_block_start"]
    assert block_types == ["thinking", "text", "tool_use"]
    assert record.reply is not None and record.reply["text"] == "custom"
    logged = [json.loads(line) for line in log_path.read_text().splitlines()]
    assert logged[0]["path"] == "/v1/messages" and logged[0]["reply"]["text"] == "custom"


def test_wait_for_times_out_when_nothing_matches(model_server: ModelServer) -> None:
    with pytest.raises(TimeoutError):
        model_server.wait_for(lambda record: record.path == "/never", timeout=0.2)


def test_wait_for_wakes_on_a_request_from_another_thread(model_server: ModelServer) -> None:
    sender = threading.Thread(target=post, args=(model_server, "/v1/messages/count_tokens",
                                                 {"messages": []}))
    sender.start()
    record = model_server.wait_for(lambda r: r.path.endswith("count_tokens"), timeout=10)
    sender.join()
    assert record.status == 200


KERNEL_SCHEMA = {"type": "object", "properties": {}}


@pytest.mark.parametrize("api, list_tool, run_tool", [
    ("anthropic", "mcp__kernel__list_variables", "mcp__kernel__run_code"),  # claude-agent-acp's names
    ("openai-chat", "kernel_list_variables", "kernel_run_code"),  # opencode's
])
def test_kernel_command_lists_variables_then_runs_code_then_answers(model_server, api, list_tool, run_tool):
    """`kernel CODE`: one step per model request, decided by the tool the model called last."""
    prompt = "kernel total = 6 * 7; total"
    if api == "anthropic":
        tools = [{"name": n, "input_schema": KERNEL_SCHEMA} for n in ("Write", list_tool, run_tool)]

        def body(*steps):
            messages = [{"role": "user", "content": [{"type": "text", "text": prompt}]}]
            for number, (name, result) in enumerate(steps):
                messages.append({"role": "assistant", "content": [
                    {"type": "tool_use", "id": f"t{number}", "name": name, "input": {}}]})
                messages.append({"role": "user", "content": [
                    {"type": "tool_result", "tool_use_id": f"t{number}", "content": result}]})
            return {"model": "m", "tools": tools, "messages": messages}
    else:
        tools = [{"type": "function", "function": {"name": n, "parameters": KERNEL_SCHEMA}}
                 for n in ("bash", list_tool, run_tool)]

        def body(*steps):
            messages = [{"role": "system", "content": "be brief"}, {"role": "user", "content": prompt}]
            for number, (name, result) in enumerate(steps):
                messages.append({"role": "assistant", "content": "", "tool_calls": [
                    {"id": f"c{number}", "type": "function", "function": {"name": name, "arguments": "{}"}}]})
                messages.append({"role": "tool", "tool_call_id": f"c{number}", "content": result})
            return {"model": "m", "tools": tools, "messages": messages}

    def reply(*steps):
        return model_server.script(model_server.parse(api, "/v1/x", body(*steps)))

    first = reply()
    assert [(c.name, c.arguments) for c in first.tool_calls] == [(list_tool, {})]
    second = reply((list_tool, "df: DataFrame 3 x 2"))
    assert [(c.name, c.arguments) for c in second.tool_calls] == [(run_tool, {"code": "total = 6 * 7; total"})]
    third = reply((list_tool, "df: DataFrame 3 x 2"), (run_tool, "42\n"))
    assert (third.text, third.tool_calls) == ("Kernel answered: 42", [])
    # Without the kernel's tools on offer the model says so instead of calling something else.
    assert model_server.script(model_server.parse(api, "/v1/x", {**body(), "tools": tools[:1]})).text == \
        "No kernel tools were offered."


def test_responses_namespaced_tools_are_offered_by_qualified_name_and_called_in_their_namespace(model_server):
    """codex-acp offers an MCP server's tools as one tool of type `namespace` and expects calls back in it."""
    kernel = {"type": "namespace", "name": "mcp__kernel", "description": "the kernel tools", "tools": [
        {"type": "function", "name": name, "strict": False, "parameters": KERNEL_SCHEMA}
        for name in ("list_variables", "run_code")]}
    exec_command = {"type": "function", "name": "exec_command", "parameters": KERNEL_SCHEMA}

    def body(*steps):
        items = [{"type": "message", "role": "user", "content": [{"type": "input_text", "text": "kernel 6 * 7"}]}]
        for number, (name, output) in enumerate(steps):
            items.append({"type": "function_call", "name": name, "namespace": "mcp__kernel", "arguments": "{}",
                          "call_id": f"c{number}"})
            items.append({"type": "function_call_output", "call_id": f"c{number}", "output": output})
        return {"model": "gpt-5.4", "stream": True, "tools": [exec_command, kernel, {"type": "web_search"}],
                "input": items}

    request = model_server.parse("openai-responses", "/v1/responses", body())
    assert set(request.tools) == {"exec_command", "mcp__kernel__list_variables", "mcp__kernel__run_code"}
    assert request.namespaced["mcp__kernel__run_code"] == ("mcp__kernel", "run_code")
    assert request.tools["mcp__kernel__run_code"] == KERNEL_SCHEMA

    def called(*steps):
        _, raw = post(model_server, "/v1/responses", body(*steps))
        events = sse_events(raw)
        return [data["item"] for name, data in events if name == "response.output_item.done"], events

    items, _ = called()
    (call,) = [item for item in items if item["type"] == "function_call"]
    assert (call["namespace"], call["name"], json.loads(call["arguments"])) == ("mcp__kernel", "list_variables", {})
    items, _ = called(("list_variables", '{"variables": []}'))
    (call,) = [item for item in items if item["type"] == "function_call"]
    assert (call["namespace"], call["name"], json.loads(call["arguments"])) == ("mcp__kernel", "run_code",
                                                                                {"code": "6 * 7"})
    # The output, read out of what codex hands its model, comes back in the answer.
    items, events = called(("list_variables", "[]"),
                           ("run_code", 'Wall time: 0.1 seconds\nOutput:\n{"output":"42\\n","error":null}'))
    assert [item["type"] for item in items] == ["message"]
    assert events[-1][1]["response"]["output"][0]["content"][0]["text"] == "Kernel answered: 42"


@pytest.mark.parametrize("result, output", [
    ("1491\n", "1491"),  # opencode: the text
    ('{"output":"1491\\n","error":null}', "1491"),  # claude-agent-acp: the structured content
    ('Wall time: 0.0241 seconds\nOutput:\n{"output":"1491\\n","error":null}', "1491"),  # codex
    ('{"output": "<untrusted_context>\\n1491\\n\\n</untrusted_context>"}', "1491"),  # gemini-cli
    ('{"output":"","error":"refused: no"}', "refused: no"),
    ("[1, 2]", "[1, 2]"),
])
def test_the_kernel_output_is_read_out_of_each_agent_s_wrapping(result, output):
    from model_server import kernel_output

    assert kernel_output(result) == output
