"""Sweep datasets: samples (id, prompt, target, metadata) from prompts, dicts, DataFrames, CSV, JSON and JSONL files.

Everything here runs on the caller's thread before a sweep starts; samples are frozen afterwards.
"""

from __future__ import annotations

import csv
import dataclasses
import hashlib
import json
import math
import os
import string
from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from .columns import metadata_clash
from .hints import PYTHON, Syntax

__all__ = ["DATASET_SUFFIXES", "Sample", "dataset_fingerprint", "is_dataset_path", "load_dataset"]

ID_FIELDS = ("sample_id", "id")
PROMPT_FIELDS = ("prompt", "input")
TARGET_FIELD = "target"
WORKSPACE_FIELD = "workspace"
DATASET_SUFFIXES = {".csv": "csv", ".jsonl": "jsonl", ".ndjson": "jsonl", ".json": "json"}


@dataclass(frozen=True)
class Sample:
    """One task of a dataset: what is sent (``prompt``), what a right answer is (``target``), and the rest."""

    id: str
    prompt: str
    target: Any = None
    metadata: Mapping[str, Any] = field(default_factory=dict)
    index: int = 0
    # The directory each trial of this sample works in a fresh copy of ("" for an empty one); None: the
    # sweep's workspace= (if any). From the record's ``workspace`` field.
    workspace: str | None = None


def is_dataset_path(source: Any) -> bool:
    """A Path, or a string naming a file by a dataset suffix; any other string is a prompt."""
    if isinstance(source, os.PathLike):
        return True
    if not isinstance(source, str) or "\n" in source or Path(source.strip()).suffix.lower() not in DATASET_SUFFIXES:
        return False
    # "what is in notes.json" is a prompt; "tasks.jsonl" or an existing "my tasks.jsonl" is a file.
    return not any(c.isspace() for c in source.strip()) or Path(source.strip()).is_file()


def load_dataset(source: Any, *, prompt: str | None = None, syntax: Syntax = PYTHON) -> list[Sample]:
    """Samples from a prompt, a list of prompts or dicts, a pandas DataFrame, or a .csv/.json/.jsonl file.

    A record's id is its ``sample_id`` or ``id`` field, else derived from its prompt and target (so
    it is stable across runs); its prompt is ``prompt`` filled from its fields (``{field}``), else
    its ``prompt`` or ``input`` field; ``target`` is optional; every other field is metadata and is
    carried into the rows.
    """
    records = _records(source, syntax)
    if not records:
        raise ValueError(f"the dataset is empty: a sweep needs at least one prompt or sample ({syntax['dataset']})")
    samples = [_sample(record, index, prompt, syntax) for index, record in enumerate(records)]
    return _with_unique_ids(samples)


def _records(source: Any, syntax: Syntax) -> list[dict[str, Any]]:
    if is_dataset_path(source):
        return _read_file(Path(os.fspath(source).strip()) if isinstance(source, str) else Path(source), syntax)
    if isinstance(source, str):
        return [{"prompt": source}]
    if hasattr(source, "to_dict") and hasattr(source, "columns"):  # a pandas DataFrame, without importing pandas
        return [_plain_record(r) for r in source.to_dict("records")]
    if isinstance(source, Sample):
        source = [source]
    if not isinstance(source, Iterable) or isinstance(source, (bytes, Mapping)):
        raise TypeError(f"a dataset is a prompt, a list of prompts or dicts, a DataFrame or a file path, "
                        f"not {type(source).__name__}")
    return _plain_records(source, "dataset", TypeError)


def _plain_records(items: Iterable[Any], where: str, error: type[Exception]) -> list[dict[str, Any]]:
    """Each item (a prompt, a dict or a Sample) as a plain record; ``error`` names the first that is none."""
    records = []
    for number, item in enumerate(items):
        if isinstance(item, Sample):
            record = {"sample_id": item.id, "prompt": item.prompt, "target": item.target, **item.metadata}
            if item.workspace is not None:
                record[WORKSPACE_FIELD] = item.workspace
            records.append(record)
        elif isinstance(item, str):
            records.append({"prompt": item})
        elif isinstance(item, Mapping):
            records.append(_plain_record(item))
        else:
            raise error(f"{where} item {number} is a {type(item).__name__}; items are prompts (str) or dicts")
    return records


def _read_file(path: Path, syntax: Syntax) -> list[dict[str, Any]]:
    kind = DATASET_SUFFIXES.get(path.suffix.lower())
    if kind is None:
        raise ValueError(f"cannot tell the format of {str(path)!r}: datasets are .csv, .json or .jsonl files")
    if not path.is_file():
        raise ValueError(f"dataset file {str(path)!r} does not exist ({syntax['dataset']})")
    text = path.read_text(encoding="utf-8")
    if kind == "csv":
        rows = list(csv.DictReader(text.splitlines()))
        return [{k: (v if v != "" else None) for k, v in row.items() if k is not None} for row in rows]
    if kind == "jsonl":
        records = []
        for number, line in enumerate(text.splitlines(), 1):
            if line.strip():
                try:
                    records.append(json.loads(line))
                except json.JSONDecodeError as exc:
                    raise ValueError(f"{path}:{number}: not JSON ({exc.msg})") from None
    else:
        try:
            records = json.loads(text)
        except json.JSONDecodeError as exc:
            raise ValueError(f"{path}: not JSON ({exc.msg})") from None
        if not isinstance(records, list):
            raise ValueError(f"{path}: a JSON dataset is a list of prompts or objects")
    return _plain_records(records, f"{path}:", ValueError)


def _plain_record(record: Mapping[Any, Any]) -> dict[str, Any]:
    """Field names as strings; numpy scalars as Python numbers; NaN (pandas' missing value) as None."""
    out = {}
    for key, value in record.items():
        if hasattr(value, "item") and callable(value.item) and not isinstance(value, (str, bytes)):
            try:
                value = value.item()
            except (TypeError, ValueError):
                pass
        if isinstance(value, float) and math.isnan(value):
            value = None
        out[str(key)] = value
    return out


def _sample(record: dict[str, Any], index: int, template: str | None, syntax: Syntax) -> Sample:
    fields = dict(record)
    given_id = next((fields.pop(k) for k in ID_FIELDS if k in fields), None)
    target = fields.pop(TARGET_FIELD, None)
    workspace = _workspace_field(fields.pop(WORKSPACE_FIELD)) if WORKSPACE_FIELD in fields else None
    if template is not None:
        text = _fill(template, {**record, TARGET_FIELD: target}, index, syntax)
    else:
        key = next((k for k in PROMPT_FIELDS if fields.get(k) is not None), None)
        if key is None:
            raise ValueError(f"sample {index} has no prompt: its fields are {', '.join(record) or 'none'}; give each "
                             f"a 'prompt' field, or build prompts from the fields with {syntax['template']}")
        text = str(fields.pop(key))
    clashes = [name for name in fields if metadata_clash(name)]
    if clashes:
        raise ValueError(f"dataset field{'s' if len(clashes) > 1 else ''} {', '.join(map(repr, clashes))} would "
                         "overwrite result columns of the same name; rename them in the dataset")
    sample_id = str(given_id).strip() if given_id is not None else ""
    if given_id is not None and not sample_id:
        raise ValueError(f"sample {index} has an empty id; give it one, or drop the id field to derive ids")
    return Sample(id=sample_id, prompt=text, target=target, metadata=fields, index=index, workspace=workspace)


def _workspace_field(value: Any) -> str:
    """A record's workspace: a directory (absolute once read), or "" (None, empty) for an empty directory."""
    if value is None or (isinstance(value, str) and not value.strip()):
        return ""
    if not isinstance(value, (str, os.PathLike)):
        raise ValueError(f"a sample's workspace field names a directory, not {value!r}")
    path = Path(os.fspath(value)).expanduser().resolve()
    if not path.is_dir():
        raise ValueError(f"a sample's workspace {str(value)!r} is not a directory")
    return str(path)


def _fill(template: str, values: Mapping[str, Any], index: int, syntax: Syntax) -> str:
    try:
        return string.Formatter().vformat(template, (), values)
    except KeyError as exc:
        raise ValueError(f"the prompt template names {{{exc.args[0]}}} but sample {index} has no such field "
                         f"(its fields: {', '.join(values)}); fix {syntax['template']}") from None
    except (IndexError, ValueError) as exc:
        raise ValueError(f"the prompt template {template!r} is not valid: {exc} ({syntax['template']}; "
                         "write {{ and }} for literal braces)") from None


def derived_id(prompt: str, target: Any) -> str:
    digest = hashlib.sha256(json.dumps([prompt, target], default=str, ensure_ascii=False).encode()).hexdigest()
    return "s" + digest[:10]


def _with_unique_ids(samples: Sequence[Sample]) -> list[Sample]:
    """Given ids must be unique; derived ids of identical samples get -2, -3 ... in dataset order."""
    given = [s.id for s in samples if s.id]
    repeated = sorted({i for i in given if given.count(i) > 1})
    if repeated:
        raise ValueError(f"sample id{'s' if len(repeated) > 1 else ''} {', '.join(map(repr, repeated[:5]))} "
                         "appear more than once in the dataset; ids must be unique")
    taken = set(given)
    out = []
    for sample in samples:
        if sample.id:
            out.append(sample)
            continue
        base = derived_id(sample.prompt, sample.target)
        candidate, number = base, 1
        while candidate in taken:
            number += 1
            candidate = f"{base}-{number}"
        taken.add(candidate)
        out.append(dataclasses.replace(sample, id=candidate))
    return out


def dataset_fingerprint(samples: Sequence[Sample]) -> str:
    """A hash of every sample's id, prompt and target: the manifest says which dataset a run used."""
    digest = hashlib.sha256()
    for sample in samples:
        digest.update(json.dumps([sample.id, sample.prompt, sample.target], default=str).encode())
    return digest.hexdigest()[:16]
