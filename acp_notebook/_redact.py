"""Secrets kept out of what the package writes down: recordings, logs, error messages.

Three rules, applied together by ``Redactor``:
- values: the value of every environment variable whose name says it holds a secret (``*_KEY``,
  ``*TOKEN*``, ``*SECRET*``, ``*PASSWORD*``, ...) and that is long enough to be one, wherever it
  appears inside any string, is replaced by ``***NAME***``;
- keys: in any JSON object, the value of a key that names a secret (``apiKey``, ``token``,
  ``authorization``, ``password``...) is replaced by ``***``;
- named values: in a list under ``env`` or ``headers`` (how ACP's ``mcpServers`` entries carry
  environment variables and HTTP headers, as ``{"name", "value"}`` objects), the value of an entry
  whose name says it holds a secret (``ACPNB_KERNEL_TOKEN``, ``Authorization``...) is replaced by
  ``***``, however short: such a value exists nowhere in our own environment to be found by the
  first rule.

``masked(value)`` is the one for hot paths (every frame of a turn goes through it): it first
looks, without copying, for anything to mask, and copies only a frame that has some.

Pure functions over plain data; a Redactor is immutable once made, so any thread may use it.

Process-wide: ``_KEY_VERDICTS``, which JSON keys name a secret, remembered because frames repeat
the same few keys; a plain cache (a verdict never changes), shared by every Redactor, filled from
any thread (one dict operation each), never emptied, and bounded (``_KEY_VERDICTS_KEPT``) so that an
agent inventing keys cannot grow it for ever.
"""

from __future__ import annotations

import json
import re
from collections.abc import Iterable, Mapping
from typing import Any

__all__ = ["MASK", "Redactor", "is_secret_name", "secret_values"]

MASK = "***"
# Environment variable names that hold secrets.
_SECRET_NAME = re.compile(r"KEY|TOKEN|SECRET|PASSW|CREDENTIAL|AUTH|COOKIE|PRIVATE|SESSION_ID", re.IGNORECASE)
# Names a process commonly has that match the pattern above but are not secrets.
_NOT_SECRET = re.compile(r"^(XAUTHORITY|SSH_AUTH_SOCK|GPG_AGENT_INFO|.*_PATH|.*_DIR|.*_FILE|.*_URL)$", re.IGNORECASE)
# JSON keys whose values are secrets wherever they appear.
_SECRET_KEY = re.compile(r"^(api[-_]?key|token|access[-_]?token|refresh[-_]?token|secret|client[-_]?secret|"
                         r"password|passwd|authorization|cookie|credentials?|private[-_]?key)$", re.IGNORECASE)
# Keys of lists of {"name", "value"} entries: an mcpServers entry's environment and HTTP headers.
_NAMED_VALUE_LISTS = frozenset({"env", "headers"})
# Shorter values are left alone: masking "1" or "true" everywhere would destroy the data.
MIN_SECRET_LENGTH = 8


def is_secret_name(name: str) -> bool:
    """Whether a variable (or header) of this name holds a secret: ``OPENAI_API_KEY``, ``db_password``..."""
    return bool(_SECRET_NAME.search(name)) and not _NOT_SECRET.match(name)


def secret_values(env: Mapping[str, str]) -> list[tuple[str, str]]:
    """``(name, value)`` of the variables in ``env`` that hold secrets, longest value first."""
    found = [(name, value) for name, value in env.items()
             if isinstance(value, str) and len(value) >= MIN_SECRET_LENGTH and is_secret_name(name)]
    return sorted(found, key=lambda pair: -len(pair[1]))


class Redactor:
    """Masks the given secret values (and secret-named keys) in text and JSON-like data."""

    def __init__(self, secrets: Iterable[tuple[str, str]] = ()) -> None:
        self.secrets = tuple((name, value) for name, value in secrets if len(value) >= MIN_SECRET_LENGTH)
        self._values = tuple(value for _, value in self.secrets)

    def add(self, secrets: Iterable[tuple[str, str]]) -> None:
        """Mask these too, from now on (a session's kernel-tools token, known only once the session opens). The
        sets are replaced, never changed in place: a reader on another thread sees the old ones or the new."""
        added = tuple((name, value) for name, value in secrets if len(value) >= MIN_SECRET_LENGTH
                      and value not in self._values)
        if added:
            self.secrets = self.secrets + added
            self._values = self._values + tuple(value for _, value in added)

    @classmethod
    def from_env(cls, env: Mapping[str, str]) -> Redactor:
        return cls(secret_values(env))

    def masked(self, value: Any) -> Any:
        """``value`` itself when it holds nothing to mask, else a masked copy (see ``data``)."""
        if not self.finds(value):
            return value
        try:
            return self.data(value)
        except RecursionError:  # a hostile frame nested deeper than a copy can go: keep none of it
            return {"masked": "nested too deeply to mask, left out"}

    def finds(self, value: Any) -> bool:
        """Whether ``value`` holds a secret value or a secret-named key with a value; copies nothing.

        Iterative (a frame may be nested as deep as the JSON decoder allows) and cheap: it runs on
        every frame of a turn. So the JSON types are recognised by exact type first (``isinstance``
        against the ``Mapping`` ABC costs several times more), key verdicts come from a dict, and
        strings are searched only when there are secret values to look for.
        """
        values = self._values
        pending = [value]
        pop, push = pending.pop, pending.append
        while pending:
            item = pop()
            kind = type(item)
            if kind is dict or (kind is not str and kind is not list and isinstance(item, Mapping)):
                for key, sub in item.items():
                    secret_key = _KEY_VERDICTS.get(key) if type(key) is str else None
                    if secret_key is None:
                        secret_key = isinstance(key, str) and _is_secret_key(key)
                    if secret_key and sub is not None and sub != "":
                        return True
                    sub_kind = type(sub)
                    if key in _NAMED_VALUE_LISTS and sub_kind is list and _names_a_secret(sub):
                        return True
                    if sub_kind is str:
                        if values and _holds_any(sub, values):
                            return True
                    elif sub_kind is dict or sub_kind is list:
                        push(sub)
                    elif sub_kind not in _SCALARS and isinstance(sub, (str, Mapping, list, tuple)):
                        push(sub)
            elif kind is str or isinstance(item, str):
                if values and _holds_any(item, values):
                    return True
            elif kind is list or isinstance(item, (list, tuple)):
                pending.extend(item)
        return False

    def text(self, text: str) -> str:
        for name, value in self.secrets:
            if value in text:
                text = text.replace(value, f"{MASK}{name}{MASK}")
        return text

    def data(self, value: Any) -> Any:
        """A copy of ``value`` (dicts, lists, strings...) with every secret masked."""
        if isinstance(value, str):
            return self.text(value)
        if isinstance(value, Mapping):
            return {key: MASK if isinstance(key, str) and _is_secret_key(key) and item not in (None, "")
                    else self._named_values(item) if key in _NAMED_VALUE_LISTS and isinstance(item, list)
                    else self.data(item) for key, item in value.items()}
        if isinstance(value, (list, tuple)):
            return [self.data(item) for item in value]
        return value

    def _named_values(self, entries: list[Any]) -> list[Any]:
        """An ``env`` / ``headers`` list: secret-named entries' values masked, the rest masked as any data."""
        return [{**self.data(entry), "value": MASK} if _secret_entry(entry) else self.data(entry) for entry in entries]

    def json_line(self, value: Any) -> str:
        """``value`` as one line of JSON, masked."""
        return json.dumps(self.data(value), ensure_ascii=False, separators=(",", ":"))


_SCALARS = frozenset({int, float, bool, type(None)})


def _secret_entry(entry: Any) -> bool:
    """A ``{"name": SECRET_NAME, "value": ...}`` entry with a value to hide."""
    if not isinstance(entry, Mapping):
        return False
    name, value = entry.get("name"), entry.get("value")
    return isinstance(name, str) and value not in (None, "") and is_secret_name(name)


def _names_a_secret(entries: list[Any]) -> bool:
    return any(_secret_entry(entry) for entry in entries)


def _holds_any(text: str, values: tuple[str, ...]) -> bool:
    for secret in values:
        if secret in text:
            return True
    return False


# Read directly by Redactor.finds (a dict lookup costs less than a call) as well as through _is_secret_key.
_KEY_VERDICTS: dict[str, bool] = {}
_KEY_VERDICTS_KEPT = 4096


def _is_secret_key(key: str) -> bool:
    """Whether a JSON key names a secret (remembered: frames repeat the same few keys)."""
    verdict = _KEY_VERDICTS.get(key)
    if verdict is None:
        verdict = _SECRET_KEY.match(key) is not None
        if len(_KEY_VERDICTS) < _KEY_VERDICTS_KEPT:  # an agent inventing keys cannot grow it for ever
            _KEY_VERDICTS[key] = verdict
    return verdict
