"""Where a sweep's results live: a run directory (rows, manifest, trajectories) or a single results file.

A run directory ``out="runs/name"`` holds ``rows.jsonl`` (one row per finished trial, appended as
trials finish; a later row for the same trial id replaces an earlier one, which is how retries
and re-scoring are recorded), ``manifest.json`` (the sweep's parameters, versions and agents,
rewritten atomically), ``trajectories/<trial id>.acp.jsonl`` (the trial's session as a recording) and,
for trials with a workspace, ``trajectories/<trial id>.diff`` (what the agent changed) and
``workspaces/`` (the trials' copies, while they run or when kept). A path ending
in .jsonl, .csv or .json is a single results file instead (rows only; metadata beside it or, for
JSON, inside it). Writes happen in worker threads started by the sweep's loop, one at a time.
"""

from __future__ import annotations

import csv
import io
import json
import os
from collections.abc import Iterable, Mapping, Sequence
from pathlib import Path
from typing import Any

from .._protocol import parse_bool_word
from ..record import write_recording
from .columns import (
    BOOL_COLUMNS,
    FLOAT_COLUMNS,
    INT_COLUMNS,
    JSON_COLUMNS,
    SCORE_PREFIX,
    TEXT_COLUMNS,
)
from .hints import PYTHON, Syntax

__all__ = ["MANIFEST_FILE", "ROWS_FILE", "RunStore", "out_kind", "read_results", "rows_to_csv", "write_trajectory"]

RUN_FORMAT = "acp-notebook-sweep-run"
ROWS_FILE = "rows.jsonl"
MANIFEST_FILE = "manifest.json"
TRAJECTORIES_DIR = "trajectories"
FILE_KINDS = {".csv": "csv", ".json": "json", ".jsonl": "jsonl", ".ndjson": "jsonl"}


def out_kind(path: str | os.PathLike[str], syntax: Syntax = PYTHON) -> str:
    """"dir" for a run directory, else the results file's format from its suffix."""
    path = Path(path)
    kind = FILE_KINDS.get(path.suffix.lower())
    if kind is not None:
        return kind
    if path.exists() and not path.is_dir():
        raise ValueError(f"{str(path)!r} is a file but not a results file: {syntax['out']} takes a directory for "
                         "a run, or a .jsonl, .csv or .json file name")
    return "dir"


def _json_default(value: Any) -> Any:
    return str(value)


def _atomic_write(path: Path, text: str) -> None:
    """Write to a temporary file and rename it, so a reader (or a killed run) never leaves half a file."""
    tmp = path.with_name(f".{path.name}.tmp")
    tmp.write_text(text, encoding="utf-8")
    os.replace(tmp, path)


def write_trajectory(run_dir: Path, trial_id: str, trajectory: Mapping[str, Any]) -> str:
    """The trial's session as a recording (``acp_notebook.record``'s format, so ``acpnb.replay`` plays it
    back and the inspector opens it); returns the path relative to ``run_dir``.

    ``trajectory`` is what ``record.session_recording`` gathered. Kept to this one function so the
    trajectory format can change in one place.
    """
    relative = f"{TRAJECTORIES_DIR}/{trial_id}.acp.jsonl"
    target = run_dir / relative
    target.parent.mkdir(parents=True, exist_ok=True)
    tmp = target.with_name(f".{target.name}.tmp")
    write_recording(tmp, dict(trajectory))
    os.replace(tmp, target)
    return relative


def _cut_partial_line(path: Path) -> None:
    """Drop a last line that a killed run left half-written, so the next append starts on a line of its own."""
    if not path.is_file() or path.stat().st_size == 0:
        return
    with path.open("rb+") as handle:
        data = handle.read()
        if data.endswith(b"\n"):
            return
        handle.truncate(data.rfind(b"\n") + 1)


# --- reading ---------------------------------------------------------------------------------
def _cell_value(column: str, cell: str | None) -> Any:
    if cell is None or (cell == "" and column not in TEXT_COLUMNS):
        return None
    if column in INT_COLUMNS:
        return int(float(cell))
    if column in FLOAT_COLUMNS or column.startswith(SCORE_PREFIX):
        return float(cell)
    if column in BOOL_COLUMNS:
        return parse_bool_word(cell) is True
    if column in JSON_COLUMNS:
        return json.loads(cell)
    return cell


def _read_jsonl(path: Path) -> list[dict[str, Any]]:
    rows = []
    lines = path.read_text(encoding="utf-8").splitlines(keepends=True)
    for number, line in enumerate(lines, 1):
        if not line.strip():
            continue
        try:
            rows.append(json.loads(line))
        except json.JSONDecodeError as exc:
            if number == len(lines) and not line.endswith("\n"):
                break  # half a row from a run that was killed while writing it: that trial runs again
            raise ValueError(f"{path}:{number}: not JSON ({exc.msg})") from None
    return rows


def _latest_per_trial(rows: Iterable[Mapping[str, Any]], path: Path) -> list[dict[str, Any]]:
    latest: dict[str, dict[str, Any]] = {}
    for row in rows:
        if not row.get("trial_id"):
            raise ValueError(f"{path} has rows without a trial_id: it was written by an older acp-notebook; "
                             "start a new run (another out path)")
        latest.pop(row["trial_id"], None)  # re-inserted: the dict keeps the order the latest rows were written
        latest[row["trial_id"]] = dict(row)
    return list(latest.values())


def _read_metadata_file(path: Path) -> dict[str, Any]:
    if not path.is_file():
        return {}
    try:
        data = json.loads(path.read_text(encoding="utf-8"))
    except json.JSONDecodeError:
        return {}
    return data if isinstance(data, dict) else {}


def sidecar_path(path: Path) -> Path:
    """Where a .csv or .jsonl results file keeps its metadata (a .json one embeds it)."""
    return path.with_name(path.name + ".meta.json")


def read_results(path: str | os.PathLike[str]) -> tuple[list[dict[str, Any]], dict[str, Any]]:
    """Rows (the latest per trial) and metadata from a run directory or a results file."""
    path = Path(path)
    kind = out_kind(path)
    if kind == "dir":
        if not (path / MANIFEST_FILE).is_file() and not (path / ROWS_FILE).is_file():
            raise ValueError(f"{str(path)!r} is not a sweep run directory (no {MANIFEST_FILE} or {ROWS_FILE} in it)")
        rows = _read_jsonl(path / ROWS_FILE) if (path / ROWS_FILE).is_file() else []
        return _latest_per_trial(rows, path), _read_metadata_file(path / MANIFEST_FILE)
    if not path.is_file():
        raise ValueError(f"{str(path)!r} does not exist")
    if kind == "jsonl":
        return _latest_per_trial(_read_jsonl(path), path), _read_metadata_file(sidecar_path(path))
    if kind == "csv":
        with path.open(newline="", encoding="utf-8") as handle:
            reader = csv.DictReader(handle)
            rows = [{c: _cell_value(c, v) for c, v in r.items() if c is not None} for r in reader]
        return _latest_per_trial(rows, path), _read_metadata_file(sidecar_path(path))
    text = path.read_text(encoding="utf-8")
    data = json.loads(text) if text.strip() else {"rows": []}
    if not isinstance(data, dict) or not isinstance(data.get("rows"), list):
        raise ValueError(f"{path} is not a sweep results file (expected {{'metadata': ..., 'rows': [...]}})")
    return _latest_per_trial(data["rows"], path), dict(data.get("metadata") or {})


def _csv_cell(column: str, value: Any) -> str:
    if value is None:
        return ""
    if column in JSON_COLUMNS or isinstance(value, (dict, list)):
        return json.dumps(value)
    if column in BOOL_COLUMNS:
        return "true" if value else "false"
    return str(value)


def rows_to_csv(rows: Iterable[Mapping[str, Any]], columns: Sequence[str], *, header: bool = True) -> str:
    buffer = io.StringIO()
    writer = csv.writer(buffer, lineterminator="\n")
    if header:
        writer.writerow(columns)
    for row in rows:
        writer.writerow([_csv_cell(c, row.get(c)) for c in columns])
    return buffer.getvalue()


# --- writing ---------------------------------------------------------------------------------
class RunStore:
    """The sweep's output: rows appended as trials finish, trajectories, and the manifest."""

    def __init__(self, path: str | os.PathLike[str], columns: Sequence[str], *, syntax: Syntax = PYTHON) -> None:
        self.path = Path(path)
        self.kind = out_kind(self.path, syntax)
        self.columns = list(columns)
        self.rows_path = self.path / ROWS_FILE if self.kind == "dir" else self.path
        self._json_rows: list[dict[str, Any]] = []
        self.rows: list[dict[str, Any]] = []
        self.manifest: dict[str, Any] = {}
        if self.kind == "dir":
            self.path.mkdir(parents=True, exist_ok=True)
            self.manifest = _read_metadata_file(self.path / MANIFEST_FILE)
            if self.manifest and self.manifest.get("format") != RUN_FORMAT:
                raise ValueError(f"{self.path / MANIFEST_FILE} is not a sweep manifest; {syntax['out']} takes a new "
                                 "or an earlier sweep's run directory")
        if self.rows_path.is_file() and self.rows_path.stat().st_size > 0:
            if self.kind in ("dir", "jsonl", "csv"):
                _cut_partial_line(self.rows_path)
            if self.kind == "csv":
                self._check_csv_header(syntax)
            self.rows, metadata = read_results(self.path)
            self.manifest = self.manifest or metadata
            if self.kind == "json":
                self._json_rows = list(self.rows)

    def _check_csv_header(self, syntax: Syntax) -> None:
        with self.rows_path.open(encoding="utf-8") as handle:
            header = next(csv.reader([handle.readline()]), [])
        if header != self.columns:
            raise ValueError(f"{self.path} has other columns than this sweep writes (another dataset or other "
                             f"scorers); resume into a run directory or a .jsonl file, or choose another "
                             f"{syntax['out']}")

    def append(self, row: Mapping[str, Any], manifest: Mapping[str, Any]) -> None:
        """Record a finished trial (the manifest matters only to a .json file, which embeds it)."""
        if self.kind == "json":
            self._json_rows.append(dict(row))
            _atomic_write(self.path, json.dumps({"metadata": manifest, "rows": self._json_rows}, indent=1,
                                                default=_json_default))
            return
        if self.kind == "csv":
            fresh = not self.path.exists() or self.path.stat().st_size == 0
            text = rows_to_csv([row], self.columns, header=fresh)
        else:
            text = json.dumps(row, default=_json_default) + "\n"
        with self.rows_path.open("a", encoding="utf-8", newline="") as handle:
            handle.write(text)

    def trajectory(self, trial_id: str, trajectory: Mapping[str, Any] | None) -> str | None:
        """Save the trial's session as a recording (run directories only); the path for the row's trajectory column."""
        if self.kind != "dir" or trajectory is None:
            return None
        return write_trajectory(self.path, trial_id, trajectory)

    def diff(self, trial_id: str, text: str) -> str | None:
        """Keep the trial's workspace diff beside its recording (run directories only); its relative path."""
        if self.kind != "dir":
            return None
        relative = f"{TRAJECTORIES_DIR}/{trial_id}.diff"
        target = self.path / relative
        target.parent.mkdir(parents=True, exist_ok=True)
        _atomic_write(target, text)
        return relative

    def write_manifest(self, manifest: Mapping[str, Any]) -> None:
        text = json.dumps({"format": RUN_FORMAT, **manifest}, indent=1, default=_json_default)
        if self.kind == "dir":
            _atomic_write(self.path / MANIFEST_FILE, text)
        elif self.kind == "json":
            _atomic_write(self.path, json.dumps({"metadata": manifest, "rows": self._json_rows}, indent=1,
                                                default=_json_default))
        else:
            _atomic_write(sidecar_path(self.path), text)
