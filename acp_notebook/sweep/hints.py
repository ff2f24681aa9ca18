"""How sweep error messages name an option: in Python (``repeats=``) or on the command line (``--repeats``).

Usage errors are raised by code shared between ``acpnb.sweep`` and ``acp-notebook sweep``; each
message looks the option up here, so a command-line user is never told to call a Python function.
Constant mappings, read from any thread.
"""

from __future__ import annotations

from collections.abc import Mapping

__all__ = ["CLI", "PYTHON", "Syntax"]

Syntax = Mapping[str, str]

PYTHON: Syntax = {
    "dataset": "the first argument: a prompt, a list, a DataFrame or a .csv/.json/.jsonl path",
    "models": "models=['demo:fast', ...]",
    "register": "Register it with acpnb.register(name, command)",
    "agent": "or pass agent=... to sweep one agent's own model values",
    "template": "prompt='... {field} ...'",
    "config": "config=",
    "config_model": "config= sets the other options; the model comes from models=",
    "repeats": "repeats=",
    "concurrency": "concurrency=",
    "agent_concurrency": "agent_concurrency=",
    "timeout": "timeout=",
    "retries": "retries=",
    "backoff": "backoff=",
    "budget": "budget=",
    "out": "out=",
    "scorers": "scorers=",
    "scorer_names": "give them different names with name=...",
    "executor": "executor=",
    "ray_with_agent": "with executor='ray' each worker starts its own agents: pass agent= a registry name or "
                      "a command line, not a started Agent",
    "workspace": "workspace=",
    "setup": "setup=",
    "workspace_limit": "workspace_limit_mb=",
    "sandbox": "sandbox=",
    "task_env": "task_env=",
    "oracle": "agent='oracle'",
    "tasks": "acp_notebook.sweep.tasks(DIR)",
    "sandbox_with_agent": "sandbox= starts each agent in the sandbox itself: pass agent= a registry name or a "
                          "command line, not a started Agent",
}

CLI: Syntax = {
    "dataset": "--prompt TEXT, --prompts FILE or --dataset FILE",
    "models": "--model AGENT:MODEL",
    "register": "Register it with --register NAME=COMMAND",
    "agent": "or pass --agent SPEC to sweep one agent's own model values",
    "template": "--template '... {field} ...'",
    "config": "--config ID=VALUE",
    "config_model": "--config sets the other options; the model comes from --model",
    "repeats": "--repeats",
    "concurrency": "--concurrency",
    "agent_concurrency": "--agent-concurrency NAME=N",
    "timeout": "--timeout",
    "retries": "--retries",
    "backoff": "--backoff",
    "budget": "--budget",
    "out": "--out",
    "scorers": "--scorer",
    "scorer_names": "give each --scorer once",
    "executor": "--executor",
    "ray_with_agent": "with --executor ray each worker starts its own agents: --agent must be a registry name "
                      "or a command line",
    "workspace": "--workspace ",
    "setup": "--setup",
    "workspace_limit": "--workspace-limit-mb",
    "sandbox": "--sandbox ",
    "task_env": "--task-env",
    "oracle": "--agent oracle",
    "tasks": "--tasks DIR",
    "sandbox_with_agent": "--sandbox starts each agent in the sandbox itself",
}
