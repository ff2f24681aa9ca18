"""How the proxy's agents travel to its process: ``--agent NAME=SPEC`` texts (``encode_spec`` /
``decode_spec``) and their environments in one variable of the proxy's own environment
(``encode_agent_env`` / ``take_agent_env``, never on its command line).

Plain functions, no state. The launcher (in the user's process) and the proxy's command line (cli.py)
both use them; this module imports neither, nor the SDK.
"""

from __future__ import annotations

import json
from collections.abc import Mapping, MutableMapping, Sequence
from dataclasses import fields
from typing import Any

from ..launch import AgentSpec

__all__ = ["AGENT_ENV_VARIABLE", "decode_spec", "encode_agent_env", "encode_spec", "take_agent_env"]

# The proxy's environment variable that carries its agents' environments: {"agent name": {"VAR": "value"}}.
AGENT_ENV_VARIABLE = "ACPNB_PROXY_AGENT_ENV"


def encode_agent_env(envs: Mapping[str, Mapping[str, str]]) -> dict[str, str]:
    """The proxy's environment entry for its agents' environments (``take_agent_env`` reads it back)."""
    return {AGENT_ENV_VARIABLE: json.dumps({name: dict(env) for name, env in envs.items()})}


def take_agent_env(environ: MutableMapping[str, str]) -> dict[str, dict[str, str]]:
    """The agents' environments from ``environ``, removed from it (so the agents, which inherit it, never
    see each other's keys); ValueError when it is malformed (naming no value: they are keys)."""
    text = environ.pop(AGENT_ENV_VARIABLE, None)
    if text is None:
        return {}
    try:
        data = json.loads(text)
    except json.JSONDecodeError:
        raise ValueError(f"${AGENT_ENV_VARIABLE} is not valid JSON") from None
    valid = isinstance(data, dict) and all(
        isinstance(env, dict) and all(isinstance(k, str) and isinstance(v, str) for k, v in env.items())
        for env in data.values())
    if not valid:
        raise ValueError(f"${AGENT_ENV_VARIABLE} must map agent names to objects of string values")
    return data


def encode_spec(spec: str | Sequence[str] | AgentSpec | Mapping[str, Any]) -> str:
    """A SPEC for `--agent NAME=SPEC`: strings stay as they are (a registry name or a command
    line); argv lists and AgentSpecs become JSON, so no quoting can change them."""
    if isinstance(spec, str):
        if spec.lstrip().startswith(("[", "{")):
            return json.dumps({"command": spec})  # a command line that looks like JSON stays a command line
        return spec
    if isinstance(spec, AgentSpec):
        data = {f.name: getattr(spec, f.name) for f in fields(AgentSpec)}
        data["env"] = dict(spec.env)
        return json.dumps({"agentSpec": data})
    if isinstance(spec, Mapping):
        return json.dumps(dict(spec))
    return json.dumps([str(part) for part in spec])


def decode_spec(text: str) -> tuple[str | list[str] | AgentSpec, dict[str, str]]:
    """The inverse of `encode_spec`: (spec for resolve_spec, extra environment)."""
    stripped = text.strip()
    if not stripped:
        raise ValueError("the agent's SPEC is empty")
    if stripped[0] not in "[{":
        return stripped, {}
    try:
        data = json.loads(stripped)
    except json.JSONDecodeError as exc:
        raise ValueError(f"SPEC {text!r} starts like JSON but is not valid JSON: {exc}") from None
    if isinstance(data, list):
        if not data or not all(isinstance(part, str) for part in data):
            raise ValueError(f"a JSON SPEC list must be a non-empty argv of strings, got {text!r}")
        return data, {}
    if not isinstance(data, dict):
        raise ValueError(f"a JSON SPEC must be a list (argv) or an object, got {text!r}")
    env = {str(k): str(v) for k, v in (data.get("env") or {}).items()}
    if "agentSpec" in data:
        raw = dict(data["agentSpec"])
        known = {f.name for f in fields(AgentSpec)}
        kwargs = {k: (tuple(v) if isinstance(v, list) else v) for k, v in raw.items() if k in known}
        return AgentSpec(**kwargs), env
    command = data.get("command")
    if isinstance(command, str) and command.strip():
        return command, env
    if isinstance(command, list) and command and all(isinstance(p, str) for p in command):
        return command, env
    raise ValueError(f"a JSON SPEC object needs \"command\" (a string or an argv list), got {text!r}")
