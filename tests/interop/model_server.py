"""A deterministic, scripted model server on 127.0.0.1 that real agents can be pointed at.

It speaks just enough of four wire formats for the pinned agents to complete turns offline:

- Anthropic Messages (`POST /v1/messages`, streaming SSE or plain JSON, plus
  `/v1/messages/count_tokens`), for claude-agent-acp via `ANTHROPIC_BASE_URL`;
- OpenAI chat completions (`POST /v1/chat/completions`), for opencode's
  `@ai-sdk/openai-compatible` provider;
- OpenAI Responses (`POST /v1/responses`), for codex with `wire_api = "responses"`: its tools
  of type `namespace` too (codex offers an MCP server's tools as one, `mcp__kernel`), whose tools
  a script sees as `<namespace>__<tool>` (`mcp__kernel__run_code`) and whose calls go back with
  the `namespace` field;
- Gemini (`POST /v1beta/models/<model>:streamGenerateContent` / `:generateContent` /
  `:countTokens`), for gemini-cli via `GOOGLE_GEMINI_BASE_URL`.

Every request is parsed into a `ModelRequest` (the API, the conversation flattened to the
parts a script needs, the tools on offer), a script turns it into a `Reply` (text,
thinking, tool calls), and the reply is rendered back in the request's own format.
Everything received is kept in `ModelServer.requests` (and optionally a JSON-lines file).

The default script understands a tiny command language in the last user message:

    write <absolute path> with <content>   -> a call of the agent's file-writing tool (an
                                              agent without one, codex, gets a shell
                                              call running printf instead)
    run <shell command>                    -> a call of the agent's shell tool
    kernel <python code>                   -> the notebook's kernel tools (the MCP server named
                                              `kernel`): list_variables, then after its result
                                              run_code with the code, then "Kernel answered:"
                                              and run_code's output (kernel_output: read
                                              out of each agent's wrapping)
    think <text>                           -> a thinking block, then text
    slow <text>                            -> text streamed word by word, 0.3 s apart
    anything else                          -> "Hello from the interop model. You said: ..."

After a tool result it answers "Tool finished: <first line of the result>". Requests
that demand JSON of a schema (gemini's model router) get the schema's smallest sample;
other requests without tools (titles, summaries) get "Interop test session".
`GET .../models` lists `DEFAULT_MODELS` in a shape Anthropic, OpenAI and Gemini clients read.

Use from a test:

    with ModelServer() as server:          # random free port on 127.0.0.1
        env = {"ANTHROPIC_BASE_URL": server.url, "ANTHROPIC_API_KEY": "dummy"}
        ...
        server.script = lambda request: Reply(text="custom")   # optional override

Run by hand: `python tests/interop/model_server.py [--port N] [--log FILE]`.
"""

from __future__ import annotations

import argparse
import itertools
import json
import re
import shlex
import sys
import threading
import time
from collections.abc import Callable, Iterator
from dataclasses import asdict, dataclass, field
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from pathlib import Path
from typing import Any, Literal
from urllib.parse import urlsplit

Api = Literal["anthropic", "openai-chat", "openai-responses", "gemini"]

DEFAULT_MODELS = ("interop-model", "interop-model-large")


@dataclass
class ToolCall:
    """One call of a tool offered by the agent, as the script decided it."""

    name: str
    arguments: dict[str, Any]


@dataclass
class Reply:
    """What the model answers: thinking first, then text, then tool calls."""

    text: str = ""
    thinking: str = ""
    tool_calls: list[ToolCall] = field(default_factory=list)
    # Pause between streamed chunks, so a test can cancel a turn while it streams.
    chunk_delay_s: float = 0.0


@dataclass
class ModelRequest:
    """A request to the model, reduced to what a script needs to decide the reply."""

    api: Api
    path: str
    model: str
    stream: bool
    body: dict[str, Any]
    # Text of the newest user message that carries text (tool results are not text).
    last_user_text: str
    # Results of tool calls, when the conversation ends with them (the agent ran a tool).
    tool_results: list[str]
    # Tool name -> JSON schema of its arguments, as offered by the agent.
    tools: dict[str, dict[str, Any]]
    system: str
    # Set when the agent demands a JSON answer of this shape (gemini's model router and
    # checks, structured-output side requests); the default script answers with a sample.
    json_schema: dict[str, Any] | None = None
    # Names of the tools the model called so far in the conversation, oldest first.
    called_tools: list[str] = field(default_factory=list)
    # A tool offered inside a namespace (Responses API), by its name in `tools`: (namespace, name).
    namespaced: dict[str, tuple[str, str]] = field(default_factory=dict)


@dataclass
class RequestRecord:
    """One HTTP request as received, for debugging and for assertions in tests."""

    t: float
    method: str
    path: str
    headers: dict[str, str]
    body: Any
    status: int = 0
    reply: dict[str, Any] | None = None


Script = Callable[[ModelRequest], Reply]

_WRITE_TOOL_NAMES = ("write", "write_file", "writefile", "create_file")
_SHELL_TOOL_NAMES = ("bash", "shell", "run_shell_command", "exec_command", "shell_command")


def _find_tool(tools: dict[str, dict[str, Any]], candidates: tuple[str, ...]) -> str | None:
    by_lower = {name.lower(): name for name in tools}
    for candidate in candidates:
        if candidate in by_lower:
            return by_lower[candidate]
    return None


def _schema_properties(schema: dict[str, Any]) -> dict[str, Any]:
    properties = schema.get("properties")
    return properties if isinstance(properties, dict) else {}


def _pick_key(properties: dict[str, Any], pattern: str, default: str) -> str:
    for key in properties:
        if re.search(pattern, key, re.IGNORECASE):
            return key
    return default


def write_call(tools: dict[str, dict[str, Any]], path: str, content: str) -> ToolCall | None:
    """A call of whichever file-writing tool the agent offers, arguments named as its schema says."""
    name = _find_tool(tools, _WRITE_TOOL_NAMES)
    if name is None:
        return None
    properties = _schema_properties(tools[name])
    path_key = _pick_key(properties, r"path", "file_path")
    content_key = _pick_key(properties, r"content", "content")
    return ToolCall(name, {path_key: path, content_key: content})


def shell_call(tools: dict[str, dict[str, Any]], command: str) -> ToolCall | None:
    """A call of whichever shell tool the agent offers."""
    name = _find_tool(tools, _SHELL_TOOL_NAMES)
    if name is None:
        return None
    properties = _schema_properties(tools[name])
    key = _pick_key(properties, r"^(command|cmd)$", "command")
    arguments: dict[str, Any] = {key: command}
    # codex's shell tool takes argv as a list; the others take one string.
    if properties.get(key, {}).get("type") == "array":
        arguments[key] = ["bash", "-lc", command]
    if "description" in properties:
        arguments["description"] = f"Run {command}"
    if "sandbox_permissions" in properties:
        # codex runs sandboxed commands without asking; an escalated one needs the user's approval.
        arguments["sandbox_permissions"] = "require_escalated"
        arguments["justification"] = f"Allow running {command}?"
    return ToolCall(name, arguments)


def sample_for_schema(schema: dict[str, Any]) -> Any:
    """The smallest plain value of a JSON schema's shape (OpenAPI-style upper-case types too)."""
    if schema.get("enum"):
        return schema["enum"][0]
    kind = str(schema.get("type", "object")).lower()
    if kind == "object":
        properties = _schema_properties(schema)
        return {key: sample_for_schema(value) for key, value in properties.items()}
    if kind == "array":
        return []
    if kind in ("integer", "number"):
        return schema.get("minimum", 1)
    if kind == "boolean":
        return False
    return "interop"


def kernel_tool(tools: dict[str, dict[str, Any]], tool: str) -> str | None:
    """The name an agent gives one of the notebook's kernel tools: claude-agent-acp calls an MCP tool
    `mcp__<server>__<tool>`, opencode `<server>_<tool>`, gemini-cli `mcp_<server>_<tool>`; codex offers
    the tools in a namespace `mcp__<server>`, seen here as `mcp__<server>__<tool>`. The server is `kernel`."""
    for name in tools:
        if name.endswith(tool) and "kernel" in name[: -len(tool)]:
            return name
    return None


def kernel_reply(request: ModelRequest, code: str) -> Reply:
    """One step of `kernel <code>`: list the variables, then run the code, then say what came back."""
    list_tool, run_tool = kernel_tool(request.tools, "list_variables"), kernel_tool(request.tools, "run_code")
    if list_tool is None or run_tool is None:
        return Reply(text="No kernel tools were offered.")
    last = request.called_tools[-1] if request.called_tools and request.tool_results else None
    if last is None:
        return Reply(text="I will look at the kernel's variables.", tool_calls=[ToolCall(list_tool, {})])
    if last == list_tool:
        return Reply(text="I will run the code.", tool_calls=[ToolCall(run_tool, {"code": code})])
    return Reply(text=f"Kernel answered: {kernel_output(request.tool_results[-1])}")


_UNTRUSTED = re.compile(r"</?untrusted_context>")


def kernel_output(result: str) -> str:
    """run_code's output as a model reads it from what its agent hands over: the text (claude-agent-acp
    before structured content, opencode), `{"output", "error"}` (claude-agent-acp, codex after its
    "Wall time ... Output:" header), gemini-cli's `{"output": "<untrusted_context>...</untrusted_context>"}`."""
    text = result.split("Output:\n", 1)[1] if result.startswith("Wall time:") and "Output:\n" in result else result
    try:
        answer = json.loads(text)
    except ValueError:
        answer = None
    if isinstance(answer, dict) and isinstance(answer.get("output"), str):
        text = answer["output"] + (answer.get("error") or "")
    return _UNTRUSTED.sub("", text).strip()


_KERNEL_RE = re.compile(r"^kernel\s+(.+)", re.IGNORECASE | re.DOTALL)
_WRITE_RE = re.compile(r"\bwrite\s+(\S+)\s+with\s+(.+)", re.IGNORECASE | re.DOTALL)
_RUN_RE = re.compile(r"\brun\s+(.+)", re.IGNORECASE | re.DOTALL)


def default_script(request: ModelRequest) -> Reply:
    """The command language described in the module docstring."""
    if request.json_schema is not None:
        return Reply(text=json.dumps(sample_for_schema(request.json_schema)))
    text = request.last_user_text.strip()
    if (match := _KERNEL_RE.match(text)) and request.tools:
        return kernel_reply(request, match.group(1).strip())
    if request.tool_results:
        first_line = request.tool_results[-1].strip().splitlines()[:1]
        return Reply(text=f"Tool finished: {first_line[0] if first_line else '(no output)'}")
    if not request.tools:
        return Reply(text="Interop test session")
    if match := _WRITE_RE.search(text):
        path, content = match.group(1), match.group(2).strip()
        call = write_call(request.tools, path, content)
        if call is None:
            # Agents without a file-writing tool (codex) write through their shell tool.
            call = shell_call(request.tools, f"printf %s {shlex.quote(content)} > {shlex.quote(path)}")
        if call is not None:
            return Reply(text="I will write the file.", tool_calls=[call])
        return Reply(text="No file-writing or shell tool was offered.")
    if match := _RUN_RE.search(text):
        call = shell_call(request.tools, match.group(1).strip())
        if call is not None:
            return Reply(text="I will run the command.", tool_calls=[call])
        return Reply(text="No shell tool was offered.")
    if text.lower().startswith("think "):
        return Reply(thinking=f"Thinking about: {text[6:]}", text=f"Thought about {text[6:]}.")
    if text.lower().startswith("slow "):
        return Reply(text=text[5:], chunk_delay_s=0.3)
    return Reply(text=f"Hello from the interop model. You said: {text}")


# ---------------------------------------------------------------- request parsing


def _text_of(content: Any) -> str:
    """Concatenated text of a content field in any of the formats (string or block list)."""
    if isinstance(content, str):
        return content
    if isinstance(content, list):
        parts = []
        for block in content:
            if isinstance(block, str):
                parts.append(block)
            elif isinstance(block, dict) and block.get("type") in ("text", "input_text", "output_text"):
                parts.append(str(block.get("text", "")))
        return "".join(parts)
    return ""


def _parse_anthropic(body: dict[str, Any]) -> tuple[str, list[str], dict[str, dict[str, Any]], str]:
    messages = body.get("messages") or []
    last_user_text = ""
    for message in messages:
        if message.get("role") != "user":
            continue
        content = message.get("content")
        if isinstance(content, list):
            texts = [b for b in content if isinstance(b, dict) and b.get("type") == "text"]
            # Claude Code prepends <system-reminder> blocks to the user's text; skip them.
            real = [b["text"] for b in texts if not str(b.get("text", "")).lstrip().startswith("<system-reminder>")]
            if real:
                last_user_text = real[-1]
        elif isinstance(content, str):
            last_user_text = content
    tool_results: list[str] = []
    # Claude Code (in claude-agent-acp 0.101.0) may end the list with a message of role "system"
    # (`<total_tokens>...`); the conversation's end is the last user or assistant message.
    spoken = [m for m in messages if m.get("role") != "system"]
    if spoken and spoken[-1].get("role") == "user" and isinstance(spoken[-1].get("content"), list):
        for block in spoken[-1]["content"]:
            if isinstance(block, dict) and block.get("type") == "tool_result":
                tool_results.append(_text_of(block.get("content")))
    tools = {t["name"]: t.get("input_schema") or {} for t in body.get("tools") or [] if "name" in t}
    system = _text_of(body.get("system"))
    return last_user_text, tool_results, tools, system


def _parse_openai_chat(body: dict[str, Any]) -> tuple[str, list[str], dict[str, dict[str, Any]], str]:
    messages = body.get("messages") or []
    last_user_text = ""
    system = ""
    for message in messages:
        if message.get("role") == "user":
            text = _text_of(message.get("content"))
            if text:
                last_user_text = text
        elif message.get("role") == "system":
            system += _text_of(message.get("content"))
    tool_results: list[str] = []
    for message in reversed(messages):
        if message.get("role") != "tool":
            break
        tool_results.insert(0, _text_of(message.get("content")))
    tools = {}
    for tool in body.get("tools") or []:
        function = tool.get("function") or {}
        if "name" in function:
            tools[function["name"]] = function.get("parameters") or {}
    return last_user_text, tool_results, tools, system


def _parse_openai_responses(body: dict[str, Any]) -> tuple[str, list[str], dict[str, dict[str, Any]], str]:
    items = body.get("input") or []
    if isinstance(items, str):
        items = [{"type": "message", "role": "user", "content": items}]
    last_user_text = ""
    for item in items:
        if item.get("role") == "user" and item.get("type", "message") == "message":
            text = _text_of(item.get("content"))
            # codex sends its environment context and instructions as user messages too.
            if text and not text.lstrip().startswith(("<environment_context>", "<user_instructions>", "# AGENTS.md")):
                last_user_text = text
    tool_results: list[str] = []
    for item in reversed(items):
        if item.get("type") not in ("function_call_output", "custom_tool_call_output"):
            break
        output = item.get("output")
        tool_results.insert(0, output if isinstance(output, str) else json.dumps(output))
    tools = {}
    for tool in body.get("tools") or []:
        if tool.get("type") == "function" and "name" in tool:
            tools[tool["name"]] = tool.get("parameters") or {}
        elif tool.get("type") != "namespace" and "name" in tool:
            tools[tool["name"]] = {}
    for qualified, (namespace, name) in _namespaced_tools("openai-responses", body).items():
        tool = next(t for t in body["tools"] if t.get("name") == namespace)
        inner = next(t for t in tool["tools"] if t.get("name") == name)
        tools[qualified] = inner.get("parameters") or {}
    return last_user_text, tool_results, tools, str(body.get("instructions") or "")


NAMESPACE_JOIN = "__"  # mcp__kernel + run_code -> mcp__kernel__run_code: codex's own flat spelling


def _namespaced_tools(api: Api, body: dict[str, Any]) -> dict[str, tuple[str, str]]:
    """The tools offered inside namespaces (Responses API): qualified name -> (namespace, name)."""
    if api != "openai-responses":
        return {}
    found = {}
    for tool in body.get("tools") or []:
        if tool.get("type") == "namespace" and isinstance(tool.get("tools"), list):
            for inner in tool["tools"]:
                if isinstance(inner, dict) and "name" in inner:
                    found[f"{tool['name']}{NAMESPACE_JOIN}{inner['name']}"] = (str(tool["name"]), str(inner["name"]))
    return found


def _parse_gemini(body: dict[str, Any]) -> tuple[str, list[str], dict[str, dict[str, Any]], str]:
    contents = body.get("contents") or []
    last_user_text = ""
    for content in contents:
        if content.get("role", "user") == "user":
            # gemini-cli sends its <session_context> block as a text part before the prompt.
            texts = [p["text"] for p in content.get("parts") or []
                     if isinstance(p, dict) and "text" in p and not str(p["text"]).lstrip().startswith("<session_context>")]
            if texts:
                last_user_text = texts[-1]
    tool_results: list[str] = []
    if contents:
        for part in contents[-1].get("parts") or []:
            if isinstance(part, dict) and "functionResponse" in part:
                tool_results.append(json.dumps(part["functionResponse"].get("response")))
    tools = {}
    for tool in body.get("tools") or []:
        for declaration in tool.get("functionDeclarations") or []:
            schema = declaration.get("parametersJsonSchema") or declaration.get("parameters") or {}
            tools[declaration["name"]] = schema
    system_instruction = body.get("systemInstruction") or {}
    system = "".join(p.get("text", "") for p in system_instruction.get("parts") or [] if isinstance(p, dict))
    return last_user_text, tool_results, tools, system


def _json_schema_of(api: Api, body: dict[str, Any]) -> dict[str, Any] | None:
    """The schema of a structured-output request, or None for a free-form one."""
    if api == "gemini":
        config = body.get("generationConfig") or {}
        if config.get("responseMimeType") == "application/json":
            return config.get("responseJsonSchema") or config.get("responseSchema") or {}
    elif api == "openai-chat":
        response_format = body.get("response_format") or {}
        if response_format.get("type") == "json_schema":
            return (response_format.get("json_schema") or {}).get("schema") or {}
        if response_format.get("type") == "json_object":
            return {}
    elif api == "openai-responses":
        text_format = ((body.get("text") or {}).get("format")) or {}
        if text_format.get("type") == "json_schema":
            return text_format.get("schema") or {}
    elif api == "anthropic":
        output_format = body.get("output_format") or {}
        if output_format.get("type") == "json_schema":
            return output_format.get("schema") or {}
    return None


def _called_tools(api: Api, body: dict[str, Any]) -> list[str]:
    """The names of the tools the model called in the conversation so far, in each API's shape."""
    names: list[str] = []
    if api == "anthropic":
        for message in body.get("messages") or []:
            if message.get("role") == "assistant" and isinstance(message.get("content"), list):
                names += [b["name"] for b in message["content"] if isinstance(b, dict) and b.get("type") == "tool_use"]
    elif api == "openai-chat":
        for message in body.get("messages") or []:
            if message.get("role") == "assistant":
                names += [(c.get("function") or {}).get("name", "") for c in message.get("tool_calls") or []]
    elif api == "openai-responses":
        items = body.get("input") if isinstance(body.get("input"), list) else []
        names += [f"{i['namespace']}{NAMESPACE_JOIN}{i.get('name', '')}" if i.get("namespace") else i.get("name", "")
                  for i in items if i.get("type") in ("function_call", "custom_tool_call")]
    else:
        for content in body.get("contents") or []:
            if content.get("role") == "model":
                names += [p["functionCall"].get("name", "") for p in content.get("parts") or []
                          if isinstance(p, dict) and "functionCall" in p]
    return names


# ---------------------------------------------------------------- reply rendering


def _chunks(text: str) -> list[str]:
    """Text split after each space, so a reply arrives in several streamed pieces."""
    return re.findall(r"\S+\s*|\s+", text) if text else []


def _token_estimate(value: Any) -> int:
    return max(1, len(json.dumps(value)) // 4)


_ids = itertools.count(1)


def _new_id(prefix: str) -> str:
    return f"{prefix}_{next(_ids):06d}"


def _sse(event: str | None, data: dict[str, Any] | str) -> bytes:
    payload = data if isinstance(data, str) else json.dumps(data)
    head = f"event: {event}\n" if event else ""
    return f"{head}data: {payload}\n\n".encode()


def _anthropic_stream(request: ModelRequest, reply: Reply) -> Iterator[tuple[bytes, float]]:
    """(SSE frame, pause before it) pairs of one streamed Messages API reply."""
    delay = reply.chunk_delay_s
    input_tokens = _token_estimate(request.body.get("messages"))
    output_tokens = _token_estimate(asdict(reply))
    message = {
        "id": _new_id("msg"), "type": "message", "role": "assistant", "model": request.model,
        "content": [], "stop_reason": None, "stop_sequence": None,
        "usage": {"input_tokens": input_tokens, "output_tokens": 1,
                  "cache_creation_input_tokens": 0, "cache_read_input_tokens": 0},
    }
    yield _sse("message_start", {"type": "message_start", "message": message}), 0.0
    index = 0
    if reply.thinking:
        yield _sse("content_block_start", {"type": "content_block_start", "index": index,
                                           "content_block": {"type": "thinking", "thinking": ""}}), 0.0
        for piece in _chunks(reply.thinking):
            yield _sse("content_block_delta", {"type": "content_block_delta", "index": index,
                                               "delta": {"type": "thinking_delta", "thinking": piece}}), delay
        yield _sse("content_block_delta", {"type": "content_block_delta", "index": index,
                                           "delta": {"type": "signature_delta", "signature": "interop"}}), 0.0
        yield _sse("content_block_stop", {"type": "content_block_stop", "index": index}), 0.0
        index += 1
    if reply.text:
        yield _sse("content_block_start", {"type": "content_block_start", "index": index,
                                           "content_block": {"type": "text", "text": ""}}), 0.0
        for piece in _chunks(reply.text):
            yield _sse("content_block_delta", {"type": "content_block_delta", "index": index,
                                               "delta": {"type": "text_delta", "text": piece}}), delay
        yield _sse("content_block_stop", {"type": "content_block_stop", "index": index}), 0.0
        index += 1
    for call in reply.tool_calls:
        block = {"type": "tool_use", "id": _new_id("toolu"), "name": call.name, "input": {}}
        yield _sse("content_block_start", {"type": "content_block_start", "index": index,
                                           "content_block": block}), 0.0
        arguments = json.dumps(call.arguments)
        half = len(arguments) // 2
        for piece in (arguments[:half], arguments[half:]):
            yield _sse("content_block_delta", {"type": "content_block_delta", "index": index,
                                               "delta": {"type": "input_json_delta", "partial_json": piece}}), delay
        yield _sse("content_block_stop", {"type": "content_block_stop", "index": index}), 0.0
        index += 1
    stop_reason = "tool_use" if reply.tool_calls else "end_turn"
    yield _sse("message_delta", {"type": "message_delta",
                                 "delta": {"stop_reason": stop_reason, "stop_sequence": None},
                                 "usage": {"input_tokens": input_tokens, "output_tokens": output_tokens,
                                           "cache_creation_input_tokens": 0, "cache_read_input_tokens": 0}}), 0.0
    yield _sse("message_stop", {"type": "message_stop"}), 0.0


def _anthropic_message(request: ModelRequest, reply: Reply) -> dict[str, Any]:
    content: list[dict[str, Any]] = []
    if reply.thinking:
        content.append({"type": "thinking", "thinking": reply.thinking, "signature": "interop"})
    if reply.text:
        content.append({"type": "text", "text": reply.text})
    for call in reply.tool_calls:
        content.append({"type": "tool_use", "id": _new_id("toolu"), "name": call.name, "input": call.arguments})
    return {
        "id": _new_id("msg"), "type": "message", "role": "assistant", "model": request.model,
        "content": content, "stop_reason": "tool_use" if reply.tool_calls else "end_turn",
        "stop_sequence": None,
        "usage": {"input_tokens": _token_estimate(request.body.get("messages")),
                  "output_tokens": _token_estimate(asdict(reply)),
                  "cache_creation_input_tokens": 0, "cache_read_input_tokens": 0},
    }


def _openai_usage(request: ModelRequest, reply: Reply) -> dict[str, int]:
    prompt = _token_estimate(request.body.get("messages"))
    completion = _token_estimate(asdict(reply))
    return {"prompt_tokens": prompt, "completion_tokens": completion, "total_tokens": prompt + completion}


def _openai_chat_stream(request: ModelRequest, reply: Reply) -> Iterator[tuple[bytes, float]]:
    delay = reply.chunk_delay_s
    base = {"id": _new_id("chatcmpl"), "object": "chat.completion.chunk",
            "created": int(time.time()), "model": request.model}

    def chunk(delta: dict[str, Any], finish_reason: str | None = None, **extra: Any) -> bytes:
        choice = {"index": 0, "delta": delta, "finish_reason": finish_reason}
        return _sse(None, {**base, "choices": [choice], **extra})

    yield chunk({"role": "assistant", "content": ""}), 0.0
    for piece in _chunks(reply.thinking):
        yield chunk({"reasoning_content": piece}), delay
    for piece in _chunks(reply.text):
        yield chunk({"content": piece}), delay
    for position, call in enumerate(reply.tool_calls):
        head = {"index": position, "id": _new_id("call"), "type": "function",
                "function": {"name": call.name, "arguments": ""}}
        yield chunk({"tool_calls": [head]}), 0.0
        arguments = json.dumps(call.arguments)
        half = len(arguments) // 2
        for piece in (arguments[:half], arguments[half:]):
            yield chunk({"tool_calls": [{"index": position, "function": {"arguments": piece}}]}), delay
    finish_reason = "tool_calls" if reply.tool_calls else "stop"
    # Usage rides on the last chunk: clients that asked for stream_options.include_usage and
    # clients that did not both read it from there.
    yield chunk({}, finish_reason, usage=_openai_usage(request, reply)), 0.0
    yield b"data: [DONE]\n\n", 0.0


def _openai_chat_message(request: ModelRequest, reply: Reply) -> dict[str, Any]:
    message: dict[str, Any] = {"role": "assistant", "content": reply.text or None}
    if reply.tool_calls:
        message["tool_calls"] = [
            {"id": _new_id("call"), "type": "function",
             "function": {"name": call.name, "arguments": json.dumps(call.arguments)}}
            for call in reply.tool_calls
        ]
    return {
        "id": _new_id("chatcmpl"), "object": "chat.completion", "created": int(time.time()),
        "model": request.model,
        "choices": [{"index": 0, "message": message,
                     "finish_reason": "tool_calls" if reply.tool_calls else "stop"}],
        "usage": _openai_usage(request, reply),
    }


def _responses_output(request: ModelRequest, reply: Reply) -> list[dict[str, Any]]:
    items: list[dict[str, Any]] = []
    if reply.thinking:
        items.append({"type": "reasoning", "id": _new_id("rs"),
                      "summary": [{"type": "summary_text", "text": reply.thinking}]})
    if reply.text:
        items.append({"type": "message", "id": _new_id("msg"), "status": "completed", "role": "assistant",
                      "content": [{"type": "output_text", "text": reply.text, "annotations": []}]})
    for call in reply.tool_calls:
        item = {"type": "function_call", "id": _new_id("fc"), "call_id": _new_id("call"), "name": call.name,
                "arguments": json.dumps(call.arguments), "status": "completed"}
        if call.name in request.namespaced:  # a namespace's tool is called by its own name, in its namespace
            item["namespace"], item["name"] = request.namespaced[call.name]
        items.append(item)
    return items


def _responses_object(request: ModelRequest, reply: Reply, output: list[dict[str, Any]], status: str,
                      response_id: str) -> dict[str, Any]:
    input_tokens = _token_estimate(request.body.get("input"))
    output_tokens = _token_estimate(asdict(reply))
    return {
        "id": response_id, "object": "response", "created_at": int(time.time()), "status": status,
        "model": request.model, "output": output,
        "usage": {"input_tokens": input_tokens, "input_tokens_details": {"cached_tokens": 0},
                  "output_tokens": output_tokens, "output_tokens_details": {"reasoning_tokens": 0},
                  "total_tokens": input_tokens + output_tokens},
    }


def _openai_responses_stream(request: ModelRequest, reply: Reply) -> Iterator[tuple[bytes, float]]:
    delay = reply.chunk_delay_s
    response_id = _new_id("resp")
    sequence = itertools.count()

    def event(kind: str, **data: Any) -> bytes:
        return _sse(kind, {"type": kind, "sequence_number": next(sequence), **data})

    yield event("response.created", response=_responses_object(request, reply, [], "in_progress", response_id)), 0.0
    output = _responses_output(request, reply)
    for index, item in enumerate(output):
        if item["type"] == "message":
            opened = {**item, "status": "in_progress", "content": []}
            yield event("response.output_item.added", output_index=index, item=opened), 0.0
            yield event("response.content_part.added", item_id=item["id"], output_index=index, content_index=0,
                        part={"type": "output_text", "text": "", "annotations": []}), 0.0
            for piece in _chunks(reply.text):
                yield event("response.output_text.delta", item_id=item["id"], output_index=index,
                            content_index=0, delta=piece), delay
            yield event("response.output_text.done", item_id=item["id"], output_index=index,
                        content_index=0, text=reply.text), 0.0
            yield event("response.content_part.done", item_id=item["id"], output_index=index, content_index=0,
                        part=item["content"][0]), 0.0
        else:
            yield event("response.output_item.added", output_index=index, item=item), 0.0
        yield event("response.output_item.done", output_index=index, item=item), 0.0
    yield event("response.completed",
                response=_responses_object(request, reply, output, "completed", response_id)), 0.0


def _gemini_response(request: ModelRequest, reply: Reply, parts: list[dict[str, Any]],
                     finish: bool) -> dict[str, Any]:
    candidate: dict[str, Any] = {"content": {"role": "model", "parts": parts}, "index": 0}
    if finish:
        candidate["finishReason"] = "STOP"
    prompt = _token_estimate(request.body.get("contents"))
    completion = _token_estimate(asdict(reply))
    return {"candidates": [candidate], "modelVersion": request.model,
            "usageMetadata": {"promptTokenCount": prompt, "candidatesTokenCount": completion,
                              "totalTokenCount": prompt + completion}}


def _gemini_parts(reply: Reply) -> list[dict[str, Any]]:
    parts: list[dict[str, Any]] = []
    if reply.thinking:
        parts.append({"text": reply.thinking, "thought": True})
    if reply.text:
        parts.append({"text": reply.text})
    parts.extend({"functionCall": {"name": c.name, "args": c.arguments}} for c in reply.tool_calls)
    return parts


def _gemini_stream(request: ModelRequest, reply: Reply) -> Iterator[tuple[bytes, float]]:
    pieces: list[dict[str, Any]] = []
    if reply.thinking:
        pieces.append({"text": reply.thinking, "thought": True})
    pieces.extend({"text": piece} for piece in _chunks(reply.text))
    pieces.extend({"functionCall": {"name": c.name, "args": c.arguments}} for c in reply.tool_calls)
    if not pieces:
        pieces.append({"text": ""})
    for position, part in enumerate(pieces):
        last = position == len(pieces) - 1
        yield _sse(None, _gemini_response(request, reply, [part], finish=last)), reply.chunk_delay_s


# ---------------------------------------------------------------- the server


class _Handler(BaseHTTPRequestHandler):
    server: _HttpServer
    protocol_version = "HTTP/1.1"

    def log_message(self, format: str, *args: Any) -> None:  # noqa: A002 - the base class's name
        """Requests are recorded in ModelServer.requests instead of printed."""

    def _read_body(self) -> Any:
        length = int(self.headers.get("Content-Length") or 0)
        raw = self.rfile.read(length) if length else b""
        if not raw:
            return None
        try:
            return json.loads(raw)
        except ValueError:
            return raw.decode(errors="replace")

    def _record(self, body: Any) -> RequestRecord:
        record = RequestRecord(t=time.time(), method=self.command, path=self.path,
                               headers={k.lower(): v for k, v in self.headers.items()}, body=body)
        self.server.owner._remember(record)
        return record

    def _send_json(self, record: RequestRecord, status: int, payload: Any) -> None:
        data = json.dumps(payload).encode()
        record.status = status
        record.reply = payload if isinstance(payload, dict) else {"value": payload}
        self.send_response(status)
        self.send_header("Content-Type", "application/json")
        self.send_header("Content-Length", str(len(data)))
        self.end_headers()
        self.wfile.write(data)

    def _answer(self, record: RequestRecord, api: str, path: str, body: dict[str, Any],
                stream_events: Callable[[ModelRequest, Reply], Iterator[tuple[bytes, float]]],
                whole: Callable[[ModelRequest, Reply], Any], *, stream: bool | None = None) -> None:
        """Parse one model request, let the script decide the reply, send it streamed or whole."""
        owner = self.server.owner
        request = owner.parse(api, path, body)
        reply = owner.decide(request, record)
        if request.stream if stream is None else stream:
            self._send_stream(record, stream_events(request, reply))
        else:
            self._send_json(record, 200, whole(request, reply))

    def _send_stream(self, record: RequestRecord, frames: Iterator[tuple[bytes, float]]) -> None:
        record.status = 200
        self.send_response(200)
        self.send_header("Content-Type", "text/event-stream")
        self.send_header("Cache-Control", "no-cache")
        # No Content-Length: the stream ends when the connection closes.
        self.send_header("Connection", "close")
        self.end_headers()
        self.close_connection = True
        try:
            for frame, pause in frames:
                if pause:
                    time.sleep(pause)
                self.wfile.write(frame)
                self.wfile.flush()
        except (BrokenPipeError, ConnectionResetError):
            # The agent cancelled the turn and hung up; nothing left to do.
            pass

    def do_GET(self) -> None:  # noqa: N802 - http.server's naming
        record = self._record(None)
        try:
            self._route_get(record)
        finally:
            self.server.owner._write_log(record)

    def _route_get(self, record: RequestRecord) -> None:
        path = urlsplit(self.path).path
        if path.rstrip("/").endswith("/models"):
            self._send_json(record, 200, self.server.owner.model_list())
        elif re.search(r"/models/[^/:]+$", path):
            model_id = path.rsplit("/", 1)[-1]
            self._send_json(record, 200, self.server.owner.model_entry(model_id))
        elif self.headers.get("Upgrade", "").lower() == "websocket":
            # No WebSocket here: 426 tells a client that tries one first (codex's built-in provider) to use
            # plain HTTP now; to a 404 codex answers with six more tries over about 6 s.
            self._send_json(record, 426, {"error": {"type": "upgrade_required", "message": "no WebSocket here"}})
        else:
            self._send_json(record, 404, {"error": {"type": "not_found", "message": f"no route {path}"}})

    def do_HEAD(self) -> None:  # noqa: N802
        record = self._record(None)
        record.status = 200
        self.send_response(200)
        self.send_header("Content-Length", "0")
        self.end_headers()

    def do_POST(self) -> None:  # noqa: N802
        body = self._read_body()
        record = self._record(body)
        try:
            self._route_post(record, body)
        finally:
            self.server.owner._write_log(record)

    def _route_post(self, record: RequestRecord, body: Any) -> None:
        path = urlsplit(self.path).path
        if not isinstance(body, dict):
            self._send_json(record, 400, {"error": {"type": "invalid_request", "message": "expected a JSON object"}})
            return
        if path.endswith("/messages/count_tokens"):
            self._send_json(record, 200, {"input_tokens": _token_estimate(body.get("messages"))})
        elif path.endswith("/messages"):
            self._answer(record, "anthropic", path, body, _anthropic_stream, _anthropic_message)
        elif path.endswith("/chat/completions"):
            self._answer(record, "openai-chat", path, body, _openai_chat_stream, _openai_chat_message)
        elif path.endswith("/responses"):
            self._answer(record, "openai-responses", path, body, _openai_responses_stream,
                         lambda request, reply: _responses_object(request, reply, _responses_output(request, reply),
                                                                  "completed", _new_id("resp")))
        elif ":countTokens" in path:
            self._send_json(record, 200, {"totalTokens": _token_estimate(body.get("contents"))})
        elif ":streamGenerateContent" in path or ":generateContent" in path:
            self._answer(record, "gemini", path, body, _gemini_stream,
                         lambda request, reply: _gemini_response(request, reply, _gemini_parts(reply), finish=True),
                         stream=":streamGenerateContent" in path)
        else:
            self._send_json(record, 404, {"error": {"type": "not_found", "message": f"no route {path}"}})


class _HttpServer(ThreadingHTTPServer):
    daemon_threads = True
    owner: ModelServer

    def handle_error(self, request: Any, client_address: Any) -> None:
        # An agent that cancels a turn hangs up mid-reply; that is normal, not an error.
        error = sys.exc_info()[1]
        if not isinstance(error, (BrokenPipeError, ConnectionResetError)):
            super().handle_error(request, client_address)


class ModelServer:
    """The scripted model server; a context manager that serves on a background thread."""

    def __init__(self, script: Script = default_script, *, host: str = "127.0.0.1", port: int = 0,
                 models: tuple[str, ...] = DEFAULT_MODELS, log_path: str | Path | None = None) -> None:
        self.script: Script = script
        self.models = models
        self.requests: list[RequestRecord] = []
        self._log_path = Path(log_path) if log_path else None
        self._lock = threading.Lock()
        self._arrived = threading.Condition(self._lock)
        self._httpd = _HttpServer((host, port), _Handler)
        self._httpd.owner = self
        self._thread: threading.Thread | None = None

    @property
    def port(self) -> int:
        return int(self._httpd.server_address[1])

    @property
    def url(self) -> str:
        """Base URL without a path, e.g. http://127.0.0.1:41234 (append /v1 for OpenAI clients)."""
        return f"http://127.0.0.1:{self.port}"

    def start(self) -> ModelServer:
        # A short poll interval makes stop() (and so each test's teardown) quick.
        self._thread = threading.Thread(target=self._httpd.serve_forever, kwargs={"poll_interval": 0.05},
                                        name="interop-model-server", daemon=True)
        self._thread.start()
        return self

    def stop(self) -> None:
        self._httpd.shutdown()
        self._httpd.server_close()
        if self._thread is not None:
            self._thread.join(timeout=5)

    def __enter__(self) -> ModelServer:
        return self.start()

    def __exit__(self, *exc_info: object) -> None:
        self.stop()

    # -- used by the handler

    def parse(self, api: Api, path: str, body: dict[str, Any]) -> ModelRequest:
        parser = {"anthropic": _parse_anthropic, "openai-chat": _parse_openai_chat,
                  "openai-responses": _parse_openai_responses, "gemini": _parse_gemini}[api]
        last_user_text, tool_results, tools, system = parser(body)
        if api == "gemini":
            model = path.rsplit("/models/", 1)[-1].split(":", 1)[0]
            stream = ":streamGenerateContent" in path
        else:
            model = str(body.get("model") or "")
            stream = bool(body.get("stream"))
        return ModelRequest(api=api, path=path, model=model, stream=stream, body=body,
                            last_user_text=last_user_text, tool_results=tool_results, tools=tools, system=system,
                            json_schema=_json_schema_of(api, body), called_tools=_called_tools(api, body),
                            namespaced=_namespaced_tools(api, body))

    def decide(self, request: ModelRequest, record: RequestRecord) -> Reply:
        reply = self.script(request)
        record.reply = {"api": request.api, "stream": request.stream, **asdict(reply)}
        return reply

    def _remember(self, record: RequestRecord) -> None:
        with self._arrived:
            self.requests.append(record)
            self._arrived.notify_all()

    def _write_log(self, record: RequestRecord) -> None:
        if self._log_path is None:
            return
        with self._lock, self._log_path.open("a") as log:
            log.write(json.dumps(asdict(record), default=str) + "\n")

    # -- for tests

    def wait_for(self, predicate: Callable[[RequestRecord], bool], timeout: float = 30.0, *,
                 since: int = 0) -> RequestRecord:
        """Block until a request matching `predicate` has arrived (the first one from request `since` on:
        a test sharing the server with others passes how many there were when it began); TimeoutError
        otherwise."""
        deadline = time.monotonic() + timeout
        with self._arrived:
            while True:
                for record in self.requests[since:]:
                    if predicate(record):
                        return record
                remaining = deadline - time.monotonic()
                if remaining <= 0:
                    raise TimeoutError(f"no matching request within {timeout} s; got {len(self.requests)} requests")
                self._arrived.wait(remaining)

    def model_entry(self, model_id: str) -> dict[str, Any]:
        # One shape that Anthropic, OpenAI and Gemini model-list readers all accept.
        return {"id": model_id, "object": "model", "type": "model", "display_name": model_id,
                "name": f"models/{model_id}", "created": 0, "created_at": "2025-01-01T00:00:00Z",
                "owned_by": "interop"}

    def model_list(self) -> dict[str, Any]:
        entries = [self.model_entry(model) for model in self.models]
        return {"object": "list", "data": entries, "models": entries, "has_more": False,
                "first_id": self.models[0], "last_id": self.models[-1]}


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--port", type=int, default=0)
    parser.add_argument("--log", help="append every request as a JSON line to this file")
    arguments = parser.parse_args()
    with ModelServer(port=arguments.port, log_path=arguments.log) as server:
        print(server.url, flush=True)
        try:
            threading.Event().wait()
        except KeyboardInterrupt:
            pass


if __name__ == "__main__":
    main()
