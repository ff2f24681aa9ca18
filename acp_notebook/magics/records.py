"""What a notebook remembers of its sessions: a record in the metadata of every output that shows one.

A record says how to get the session back after the kernel is gone: how its agent was started
(a registered name, a command line, or the proxy and its agents), the directories, the
session id, its last title, the option values in force (in the agent's order, so that a
reopened session can get back those its agent lost) and when it was last used. Panels and turn outputs carry it under
``metadata["acp_notebook"]["session"]``, kept current by ``update_display`` like the rest of
the output, so the saved ``.ipynb`` holds the latest record of each session. The same records
go to the local session store at once (store.py). ``%acp resume`` reads both back.

Never saved: environment values (``--env`` may carry keys); only their names, so resume can
say which to pass again. Plain data and file reading; no IPython, no widgets; any thread.
"""

from __future__ import annotations

import json
import os
import shlex
from collections.abc import Iterable, Iterator, Mapping
from dataclasses import asdict, dataclass, field
from pathlib import Path
from typing import Any

__all__ = ["METADATA_KEY", "SessionRecord", "latest_records", "notebook_path", "read_notebook_records"]

METADATA_KEY = "acp_notebook"
RECORD_VERSION = 1
SANDBOXES = (None, "bwrap")  # the values of launch["sandbox"] (%acp start --sandbox)


@dataclass(frozen=True)
class SessionRecord:
    """One session of the notebook. ``launch`` is how its agent starts again: ``{"spec": "demo"}``,
    ``{"argv": [...]}``, ``{"proxy": {"a": "demo", "b": "claude"}}``, or ``{"object": "tutor"}`` for an
    agent object of the notebook (kept so that resume can say it must be started anew). A spec or argv
    launch started with ``--sandbox bwrap`` also has ``"sandbox": "bwrap"``."""

    session_id: str
    alias: str
    launch: Mapping[str, Any]
    cwd: str
    agent_cwd: str
    env_names: tuple[str, ...] = ()
    title: str | None = None
    closed: bool = False
    at: float = 0.0  # when the session was last opened or prompted (time.time())
    options: tuple[tuple[str, str | bool], ...] = ()  # (option id, value) in force, in the agent's order
    # The branch of its conversation this session carries (branching.Branch.record: name, parent, fork_point, how,
    # conversation, ...), if any
    branch: Mapping[str, Any] | None = None
    version: int = field(default=RECORD_VERSION)

    def to_json(self) -> dict[str, Any]:
        data = asdict(self)
        data["launch"] = dict(self.launch)
        data["env_names"] = list(self.env_names)
        data["options"] = [[option_id, value] for option_id, value in self.options]
        data["branch"] = dict(self.branch) if self.branch is not None else None
        return data

    @property
    def model(self) -> str | None:
        """The recorded value of the option with id ``model`` (for listings)."""
        return next((str(value) for option_id, value in self.options if option_id == "model"), None)

    @classmethod
    def from_json(cls, data: Any) -> SessionRecord | None:
        """The record in an output's metadata, or None when it is not one this version understands."""
        if not isinstance(data, Mapping) or data.get("version") != RECORD_VERSION:
            return None
        launch = data.get("launch")
        if not isinstance(data.get("session_id"), str) or not isinstance(launch, Mapping) or not (
                isinstance(launch.get("spec"), str) or isinstance(launch.get("argv"), list)
                or isinstance(launch.get("proxy"), Mapping) or isinstance(launch.get("object"), str)
                or isinstance(launch.get("replay"), str)) or launch.get("sandbox") not in SANDBOXES:
            return None  # a sandbox this version does not know is not dropped: the record is not used
        return cls(session_id=data["session_id"], alias=str(data.get("alias") or "agent"), launch=dict(launch),
                   cwd=str(data.get("cwd") or os.getcwd()), agent_cwd=str(data.get("agent_cwd") or os.getcwd()),
                   env_names=tuple(str(n) for n in data.get("env_names") or ()),
                   title=data.get("title") if isinstance(data.get("title"), str) else None,
                   closed=bool(data.get("closed")), at=float(data.get("at") or 0.0),
                   options=_options(data.get("options")), branch=_branch(data.get("branch")))

    def metadata(self) -> dict[str, Any]:
        """The output metadata that carries this record."""
        return {METADATA_KEY: {"session": self.to_json()}}

    def start_line(self) -> str:
        """The magic that starts this session's agent the same way (for hints)."""
        launch = self.launch
        sandbox = f" --sandbox {launch['sandbox']}" if launch.get("sandbox") else ""
        if "proxy" in launch:
            agents = " ".join(f"{name}={shlex.quote(str(spec))}" for name, spec in dict(launch["proxy"]).items())
            return f"%acp proxy {agents}" + (f" --name {self.alias}" if self.alias != "proxy" else "")
        if "argv" in launch:
            return f"%acp start --name {self.alias}{sandbox} -- {shlex.join(str(a) for a in launch['argv'])}"
        if "object" in launch:
            return f"%acp start --object {launch['object']}"
        if "replay" in launch:
            return f"%acp start --replay {shlex.quote(str(launch['replay']))}"
        spec = str(launch["spec"])
        return f"%acp start {spec}" + (f" --name {self.alias}" if self.alias != spec else "") + sandbox

    def describe(self) -> str:
        """One line for messages: id, title and agent."""
        title = f' "{self.title}"' if self.title else ""
        return f"session {self.session_id}{title} of {self.alias}"


def _branch(data: Any) -> Mapping[str, Any] | None:
    """The recorded branch, when it names one (records written before branches have none)."""
    if not isinstance(data, Mapping) or not isinstance(data.get("name"), str):
        return None
    return {key: data[key] for key in ("name", "parent", "fork_point", "how", "conversation", "parent_session", "turns",
                                       "cell", "prompt", "at") if key in data}


def _options(data: Any) -> tuple[tuple[str, str | bool], ...]:
    """The recorded option values; pairs of another shape are left out (older or foreign records)."""
    if not isinstance(data, list):
        return ()
    return tuple((pair[0], pair[1]) for pair in data if isinstance(pair, list) and len(pair) == 2
                 and isinstance(pair[0], str) and isinstance(pair[1], (str, bool)))


def notebook_path(user_ns: Mapping[str, Any] | None = None) -> Path | None:
    """The notebook this kernel runs for, when the frontend said so.

    Jupyter Server starts kernels with ``JPY_SESSION_NAME`` set to the notebook's path, and
    ipykernel copies it to ``__session__`` (which follows a rename while the kernel runs)."""
    name = (user_ns or {}).get("__session__") or os.environ.get("JPY_SESSION_NAME")
    if not isinstance(name, str) or not name:
        return None
    path = Path(name).expanduser()
    return path if path.suffix == ".ipynb" else None


def _outputs(notebook: Mapping[str, Any]) -> Iterator[Mapping[str, Any]]:
    for cell in notebook.get("cells") or ():
        if isinstance(cell, Mapping):
            for output in cell.get("outputs") or ():
                if isinstance(output, Mapping):
                    yield output


def read_notebook_records(path: Path) -> list[SessionRecord]:
    """Every session record in a saved notebook's outputs, in document order."""
    notebook = json.loads(Path(path).read_text(encoding="utf-8"))
    records = []
    for output in _outputs(notebook):
        ours = (output.get("metadata") or {}).get(METADATA_KEY)
        record = SessionRecord.from_json(ours.get("session")) if isinstance(ours, Mapping) else None
        if record is not None:
            records.append(record)
    return records


def latest_records(records: Iterable[SessionRecord]) -> dict[str, SessionRecord]:
    """One record per session: the most recently used one (a later output wins a tie)."""
    chosen: dict[str, SessionRecord] = {}
    for record in records:
        known = chosen.get(record.session_id)
        if known is None or record.at >= known.at:
            chosen[record.session_id] = record
    return chosen
