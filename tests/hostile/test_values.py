"""The hostile notebook variable: values in the user's kernel that try to get a secret past the kernel
tools, to hold the kernel (cycles, huge fan-out, deep nesting), to run their own code when a reading
tool looks at them, or to break an answer with text no encoder takes.

Each value is placed in a namespace and read through the real tools (``KernelTools.call``, whose work
runs on this test's main thread while it waits in ``_loop.run_sync``, as the kernel thread would);
one test goes end to end through the bridge process and the official MCP client, and the history and
``del`` cases run in a real IPython kernel (marked ``kernel``). Times are never asserted: counts and
caps are (the bench measures time).
"""

from __future__ import annotations

import collections
import contextlib
import dataclasses
import json
import os
import tracemalloc
import types
import uuid
from collections.abc import Callable, Iterator, Mapping
from pathlib import Path
from typing import Any, NamedTuple

import pytest
from hypothesis import HealthCheck, assume, given, settings
from hypothesis import strategies as st

from acp_notebook import _loop
from acp_notebook._visible import has_hidden
from acp_notebook.kernel_tools import KernelTools
from acp_notebook.kernel_tools.answers import TEXT_LIMIT, Answer, Caps, MaskedView, collect_secrets
from acp_notebook.kernel_tools.client import open_kernel_tools
from acp_notebook.kernel_tools.secrets import mask_source, secret_name

pd = pytest.importorskip("pandas")
np = pytest.importorskip("numpy")

pytestmark = pytest.mark.timeout(120)
TIMEOUT = 60.0
ODD_NAME = b"report-\xff.csv".decode("utf-8", "surrogateescape")  # undecodable bytes in a file name
ODD = "\udcff\x00\u202e\u2066\x1b[31m"


def fresh_secret(prefix: str = "sk") -> str:
    return f"{prefix}-{uuid.uuid4().hex}"


def call(namespace: Mapping[str, Any], tool: str, arguments: dict[str, Any] | None = None) -> Answer:
    tools = KernelTools(policy="allow", namespace=namespace, run_timeout=30)
    return _loop.run_sync(tools.call(tool, arguments or {}), TIMEOUT)


def inspect(namespace: Mapping[str, Any], name: str, **arguments: Any) -> str:
    answer = call(namespace, "inspect_variable", {"name": name, **arguments})
    assert not answer.is_error, answer.text_of()
    return answer.text_of()


def assert_hidden(secret: str, text: str) -> None:
    for form in (secret, secret.encode().hex(), secret[:12]):
        assert form not in text, f"{form!r} shows in:\n{text}"


def assert_sendable(answer: Answer) -> None:
    """Every text of the answer encodes as UTF-8 and hides no character; so does its structured content."""
    for block in answer.content:
        if block["type"] == "text":
            block["text"].encode("utf-8")
            assert not has_hidden(block["text"]), block["text"]
    if answer.structured is not None:
        json.dumps(answer.structured, ensure_ascii=False).encode("utf-8")


# -- secrets by name, in every kind of container ------------------------------------------------

@dataclasses.dataclass
class Settings:
    region: str
    api_key: str


@dataclasses.dataclass(slots=True, frozen=True)
class SlotSettings:
    token: str
    retries: int = 3


class Credentials(NamedTuple):
    user: str
    password: str


class Client:
    """A user's object whose own repr shows its token (the one user method a reading tool runs)."""

    def __init__(self, token: str) -> None:
        self.token = token
        self.url = "https://api.example.com"

    def __repr__(self) -> str:
        return f"Client(url={self.url!r}, token={self.token!r})"


class SlotClient:
    __slots__ = ("auth_token", "name")

    def __init__(self, secret: str) -> None:
        self.auth_token, self.name = secret, "slots"

    def __repr__(self) -> str:
        return f"SlotClient({self.name}, {self.auth_token})"


class SettingsMapping(collections.abc.Mapping):  # type: ignore[type-arg]
    """A Mapping that is not a dict: its items live in an attribute."""

    def __init__(self, **items: Any) -> None:
        self._items = dict(items)

    def __getitem__(self, key: str) -> Any:
        return self._items[key]

    def __iter__(self) -> Iterator[str]:
        return iter(self._items)

    def __len__(self) -> int:
        return len(self._items)

    def __repr__(self) -> str:
        return f"SettingsMapping({self._items!r})"


HOLDERS: dict[str, Callable[[str], Any]] = {
    "dict of environment names": lambda s: {"OPENAI_API_KEY": s, "HF_TOKEN": s + "-hf", "region": "eu"},
    "OrderedDict": lambda s: collections.OrderedDict(api_key=s),
    "defaultdict": lambda s: collections.defaultdict(list, {"client_secret": s}),
    "UserDict": lambda s: collections.UserDict(password=s),
    "ChainMap": lambda s: collections.ChainMap({"x": 1}, {"apiKey": s}),
    "mappingproxy": lambda s: types.MappingProxyType({"accessToken": s}),
    "a Mapping that is no dict": lambda s: SettingsMapping(db_password=s),
    "dataclass": lambda s: Settings("eu", s),
    "dataclass with slots": lambda s: [SlotSettings(s)],
    "SimpleNamespace": lambda s: types.SimpleNamespace(token=s, name="svc"),
    "namedtuple": lambda s: Credentials("me", s),
    "object attribute, repr shows it": lambda s: Client(s),
    "slot attribute, repr shows it": lambda s: SlotClient(s),
    "bytes inside a list": lambda s: [b"plain", {"token": s.encode()}],
    "bytes under a header": lambda s: {"headers": {"Authorization": b"Bearer " + s.encode()}},
    "nested deep": lambda s: {"a": [{"b": ({"c": types.SimpleNamespace(secret=s)},)}]},
    "DataFrame in a dict": lambda s: {"users": pd.DataFrame({"user": ["a"], "password": [s]})},
    "Series in a list": lambda s: [pd.Series([s, s], name="token")],
}


@pytest.mark.parametrize("holder", list(HOLDERS), ids=list(HOLDERS))
def test_a_secret_under_a_secret_name_never_shows(holder: str) -> None:
    secret = fresh_secret()
    namespace = {"value": HOLDERS[holder](secret)}
    text = inspect(namespace, "value")
    assert_hidden(secret, text)
    assert "***" in text or "inspect it on its own to see it>" in text  # frames in containers: a summary
    assert_hidden(secret, call(namespace, "list_variables").text_of())


def test_a_secret_named_dataframe_column_is_masked_in_head_and_describe() -> None:
    passwords = [fresh_secret("pw") for _ in range(3)]
    frame = pd.DataFrame({"user": ["ann", "bob", "cy"], "password": passwords, "age": [31, 42, 27]})
    text = inspect({"users": frame}, "users")
    for secret in passwords:
        assert_hidden(secret, text)
    assert "- password: str, 0 (its name marks it a secret: values masked)" in text
    head = text.split("head(10):")[1].split("describe()")[0]
    assert "ann" in head and head.count("***") == 3
    strings_only = inspect({"logins": frame[["user", "password"]]}, "logins").split("describe():")[1]
    assert "top       ann" in strings_only.replace(" ann ", " ann ") or "ann" in strings_only
    assert "password" in strings_only and "***" in strings_only and "pw-" not in strings_only
    series = inspect({"column": frame["password"]}, "column")
    assert "***" in series and all(secret not in series for secret in passwords)


def test_secret_named_rows_levels_and_fields_are_masked() -> None:
    secret = fresh_secret()
    by_row = pd.DataFrame({"value": [secret, "eu"]}, index=["api_key", "region"])
    assert_hidden(secret, inspect({"config": by_row}, "config"))
    levels = pd.DataFrame([[secret, 1]], columns=pd.MultiIndex.from_tuples([("svc", "token"), ("svc", "n")]))
    text = inspect({"wide": levels}, "wide")
    assert_hidden(secret, text)
    assert "svc / token" in text
    records = np.array([("ann", secret)], dtype=[("user", "U10"), ("password", "U64")])
    text = inspect({"records": records}, "records")
    assert_hidden(secret, text)
    assert "fields password: *** (their names mark them secrets)" in text and "ann" in text


def test_secret_named_variables_of_any_type_are_masked() -> None:
    secret = fresh_secret()
    namespace = {"OPENAI_API_KEY": secret, "API_KEY_BYTES": secret.encode(), "db_password": [secret]}
    for name in namespace:
        text = inspect(namespace, name)
        assert text.startswith(f"{name} = *** (masked") and secret not in text


def test_names_that_only_look_like_secrets_are_shown() -> None:
    shown = {"tokenizer": "bert-base-uncased", "max_tokens": 512, "author": "Ada Lovelace",
             "monkey": "banana-12345", "token_count": 12, "api_key_path": "/home/me/.key", "keys": ["a", "b"]}
    for name, value in shown.items():
        assert not secret_name(name), name
        assert str(value).split("/")[-1] in inspect(shown, name)
    for name in ("OPENAI_API_KEY", "apiKey", "hf_token", "HFTOKEN", "db_password", "client_secret", "id_token",
                 "Authorization", "session_id", "PRIVATE_KEY", "sort_key", "x-api-key", "accessToken"):
        assert secret_name(name), name


# -- secrets by value: what a secret-named variable or the environment held, wherever it went ----

def test_a_value_stays_masked_after_its_variable_is_deleted() -> None:
    secret = fresh_secret()
    namespace: dict[str, Any] = {"OPENAI_API_KEY": secret}
    call(namespace, "list_variables")  # the tools have seen it once
    namespace["copy"] = {"k": namespace.pop("OPENAI_API_KEY"), "note": f"key={secret};"}
    text = inspect(namespace, "copy")
    assert_hidden(secret, text)
    assert "***OPENAI_API_KEY***" in text
    ran = call(namespace, "run_code", {"code": "print(copy['k'][::-1][::-1])\ncopy"})
    assert_hidden(secret, ran.text_of())


def test_a_value_copied_out_of_a_secret_place_is_masked_where_it_went() -> None:
    secret = fresh_secret()
    namespace = {"cfg": {"api_key": secret}, "k": secret, "line": f"curl -H 'Bearer {secret}'"}
    for name in ("k", "line"):
        assert_hidden(secret, inspect(namespace, name))


def test_an_environment_secret_stays_masked_after_it_is_unset(monkeypatch: pytest.MonkeyPatch) -> None:
    secret = fresh_secret()
    monkeypatch.setenv("ACPNB_TEST_SERVICE_TOKEN", secret)
    namespace = {"d": {"v": secret}}
    assert_hidden(secret, inspect(namespace, "d"))
    monkeypatch.delenv("ACPNB_TEST_SERVICE_TOKEN")
    assert_hidden(secret, inspect(namespace, "d"))


def test_run_code_masks_a_secret_the_code_itself_defines() -> None:
    secret = fresh_secret()
    answer = call({}, "run_code", {"code": f"SERVICE_TOKEN = {secret!r}\nprint('got', SERVICE_TOKEN)"})
    assert not answer.is_error and answer.text_of() == "got ***SERVICE_TOKEN***\n"


def test_a_secret_with_quotes_and_escapes_is_masked_in_a_repr_too() -> None:
    secret = f"it's\\a\tsecret-{uuid.uuid4().hex}"
    namespace = {"client": Client(secret), "API_TOKEN": secret}
    text = inspect(namespace, "client")
    assert_hidden(secret, text)
    assert_hidden(repr(secret)[1:-1], text)
    assert "***API_TOKEN***" in text


def test_a_secret_longer_than_a_cell_is_not_shown_in_part() -> None:
    secret = "sk-" + uuid.uuid4().hex * 3  # 99 characters: pandas cuts cells at 40 (50 in a repr)
    frame = pd.DataFrame({"note": [secret, "x" * 100]})
    namespace = {"API_KEY": secret, "frame": frame, "in_a_dict": {"frames": [frame, frame["note"]]}}
    assert_hidden(secret, inspect(namespace, "frame"))
    text = inspect(namespace, "in_a_dict")
    assert_hidden(secret, text)
    assert "<pandas.DataFrame, 2 rows x 1 columns; inspect it on its own to see it>" in text
    assert_hidden(secret, inspect({"API_KEY": secret, "s": "y" * 1990 + secret}, "s"))


# -- notebook_history in an IPython shell (the kernel case is below) ---------------------------

SOURCES = [
    ('cfg = dict(api_key="{s}")', "cfg = dict(api_key='***')"),
    ('OPENAI_API_KEY = "{s}"', "OPENAI_API_KEY = '***'"),
    ('os.environ["HF_TOKEN"] = "{s}"', "os.environ[\"HF_TOKEN\"] = '***'"),
    ('settings = {{"password": "{s}", "user": "me"}}', "settings = {\"password\": '***', \"user\": \"me\"}"),
    ('client = connect(token=f"Bearer {{x}}{s}")', "client = connect(token='***')"),
    ('setattr(obj, "api_key", "{s}")', "setattr(obj, \"api_key\", '***')"),
    ('a, API_KEY = 1, "{s}"', "a, API_KEY = 1, '***'"),
    ('def connect(password="{s}"):\n    pass', "def connect(password='***'):\n    pass"),
    ('if password == "{s}":\n    pass', "if password == '***':\n    pass"),
    ('ß = "ü"; api_key = "{s}"', "ß = \"ü\"; api_key = '***'"),
    ('%env OPENAI_API_KEY={s}', "%env OPENAI_API_KEY=***"),
    ('%env HF_TOKEN {s}\nfor x in y:\n  api_key = "{s}"\n bad', "%env HF_TOKEN ***\nfor x in y:\n  api_key = '***'\n bad"),
]


@pytest.mark.parametrize(("source", "masked"), SOURCES, ids=[masked.split("=")[0] for _, masked in SOURCES])
def test_literals_in_secret_places_are_masked_in_sources(source: str, masked: str) -> None:
    assert mask_source(source.format(s=fresh_secret("short")))[0] == masked


def test_a_source_keeps_what_holds_no_literal_secret() -> None:
    for source in ('TOKEN = os.environ["HF_TOKEN"]', "max_tokens = 512", "tokenizer = load('bert')"):
        assert mask_source(source) == (source, False)
    assert mask_source("OPENAI_API_KEY") == ("OPENAI_API_KEY", True)  # its output is the secret


@pytest.fixture
def shell() -> Iterator[Any]:
    """An IPython shell in this process: the one there is (another module's, started by IPython's
    globalipapp, must outlive this test), else one made for this test and gone after it."""
    from IPython.core.interactiveshell import InteractiveShell

    made = not InteractiveShell.initialized()
    yield InteractiveShell.instance()
    if made:
        InteractiveShell.clear_instance()


def test_notebook_history_masks_as_inspect_variable_does(shell: Any) -> None:
    secret, short = fresh_secret(), "abc123"
    for cell in (f"cfg = dict(api_key={short!r}, region='eu')", f"HIDDEN_TOKEN = {secret!r}",
                 "d = {'k': HIDDEN_TOKEN}", "del HIDDEN_TOKEN", "d['k']", "HIDDEN = 1\ncfg"):
        assert shell.run_cell(cell, store_history=True).success
    tools = KernelTools(policy="allow")
    history = _loop.run_sync(tools.call("notebook_history", {"n": 6}), TIMEOUT).text_of()
    assert_hidden(secret, history)
    assert short not in history
    assert "cfg = dict(api_key='***', region='eu')" in history and "HIDDEN_TOKEN = '***'" in history
    assert "{'api_key': '***', 'region': 'eu'}" in history  # the last cell's output, masked by name
    assert_hidden(secret, _loop.run_sync(tools.call("inspect_variable", {"name": "d"}), TIMEOUT).text_of())


# -- bounded time and memory -------------------------------------------------------------------

def cyclic_values() -> dict[str, Any]:
    rec: list[Any] = []
    rec.append(rec)
    loop: dict[str, Any] = {"name": "loop"}
    loop["self"] = loop
    node = types.SimpleNamespace(token=fresh_secret())
    node.me = node
    pair_a, pair_b = [1], [2]
    pair_a.append(pair_b)
    pair_b.append(pair_a)
    return {"rec": rec, "loop": loop, "node": node, "pair": pair_a}


def test_self_referencing_values_come_back_at_once() -> None:
    namespace = cyclic_values()
    texts = {name: inspect(namespace, name) for name in namespace}
    assert texts["rec"] == "rec: list\n[[...]]"
    assert texts["loop"] == "loop: dict\n{'name': 'loop', 'self': {...}}"
    assert texts["pair"] == "pair: list\n[1, [2, [...]]]"
    assert "namespace(token='***', me=<...>)" in texts["node"]


def test_huge_fan_out_is_cut_and_says_so_within_its_caps() -> None:
    grid = [[index] * 1_500 for index in range(1_500)]
    view = MaskedView()
    tracemalloc.start()
    try:
        text = view.render(grid)
        peak = tracemalloc.get_traced_memory()[1]
    finally:
        tracemalloc.stop()
    assert peak < 5_000_000 and len(text) < TEXT_LIMIT
    assert view.nodes <= Caps().nodes + 1 and "[cut: 1,450 more]" in text
    assert text.endswith("]") and "\n[cut: " in text and "items past the first 50 of a container" in text
    answer = inspect({"grid": grid}, "grid")
    assert "[cut:" in answer and len(answer) <= TEXT_LIMIT


def test_every_call_on_huge_values_stays_under_100_mb() -> None:
    deep: list[Any] = []
    for _ in range(100_000):
        deep = [deep]
    namespace = {"grid": [[0] * 2_000 for _ in range(2_000)], "deep": deep, "wide": {str(i): i for i in range(200_000)},
                 "long": "x" * 20_000_000, "blob": b"\x00" * 20_000_000, "big_int": 7 ** 200_000,
                 "frame": pd.DataFrame({"o": [[i] * 1_000 for i in range(2_000)]})}
    for tool, arguments in [("list_variables", {}), *[("inspect_variable", {"name": n}) for n in namespace]]:
        tracemalloc.start()
        try:
            answer = call(namespace, tool, arguments)
            peak = tracemalloc.get_traced_memory()[1]
        finally:
            tracemalloc.stop()
        assert not answer.is_error and peak < 100_000_000, (tool, arguments, peak)
        assert len(answer.text_of()) <= TEXT_LIMIT + 200
    assert "<list>" in inspect(namespace, "deep") and "values nested deeper than 6 levels" in inspect(namespace, "deep")
    assert "[cut: 20,000,000 characters]" in inspect(namespace, "long")
    assert "[cut: 20,000,000 bytes]" in inspect(namespace, "blob")
    assert inspect(namespace, "big_int").startswith("big_int: int\n<int of 561,471 bits>")


def test_the_secret_search_visits_each_object_once_and_stops_at_its_cap() -> None:
    shared: list[Any] = [1]
    for _ in range(60):  # 2**60 paths through 60 objects
        shared = [shared, shared]
    assert collect_secrets([shared], nodes=10_000, depth=100) <= 200
    fan = [[[0] * 300 for _ in range(300)] for _ in range(300)]
    assert collect_secrets([fan], nodes=2_000) <= 2_000


def test_a_namespace_of_many_variables_is_listed_in_part() -> None:
    namespace = {f"v{i}": i for i in range(5_000)}
    answer = call(namespace, "list_variables")
    assert len(answer.structured["variables"]) == 2_000  # type: ignore[index]
    assert "[cut: the first 2,000 of 5,000 variables are listed]" in answer.text_of()


# -- reading tools run no user code but a documented repr ---------------------------------------

CALLED: list[str] = []
ARMED = [False]  # the traps fire only while a tool call runs: pandas itself calls some while building frames


@contextlib.contextmanager
def armed() -> Iterator[list[str]]:
    CALLED.clear()
    ARMED[0] = True
    try:
        yield CALLED
    finally:
        ARMED[0] = False


def tripwire(name: str, default: Callable[..., Any]) -> Callable[..., Any]:
    """A method that records its call and fails while armed, and otherwise does what ``default`` does."""
    def record(self: Any, *args: Any, **kwargs: Any) -> Any:
        if ARMED[0]:
            CALLED.append(name)
            raise AssertionError(f"a reading tool called {name}")
        return default(self, *args, **kwargs)
    return record


def _no_attribute(_self: Any, name: str = "") -> Any:
    raise AttributeError(name)


class Meta(type):
    __getattribute__ = tripwire("Meta.__getattribute__", type.__getattribute__)  # type: ignore[assignment]
    __eq__ = tripwire("Meta.__eq__", lambda cls, other: cls is other)  # type: ignore[assignment]
    __hash__ = tripwire("Meta.__hash__", lambda cls: id(cls) >> 4)  # type: ignore[assignment]
    __instancecheck__ = tripwire("Meta.__instancecheck__", type.__instancecheck__)
    __subclasscheck__ = tripwire("Meta.__subclasscheck__", type.__subclasscheck__)


class Trap(metaclass=Meta):
    """Every method a reading tool might be tempted to call, each a tripwire; its repr is allowed."""

    __len__ = tripwire("__len__", lambda self: 1)
    __sizeof__ = tripwire("__sizeof__", lambda self: 16)  # type: ignore[assignment]
    __getattr__ = tripwire("__getattr__", _no_attribute)
    __iter__ = tripwire("__iter__", lambda self: iter(()))
    __eq__ = tripwire("__eq__", lambda self, other: self is other)  # type: ignore[assignment]
    __hash__ = tripwire("__hash__", lambda self: id(self) >> 4)  # type: ignore[assignment]
    __str__ = tripwire("__str__", lambda self: "Trap")  # type: ignore[assignment]
    __format__ = tripwire("__format__", lambda self, spec: "Trap")  # type: ignore[assignment]
    shape = property(tripwire("shape", _no_attribute))
    nbytes = property(tripwire("nbytes", _no_attribute))
    __class__ = property(tripwire("__class__", type))  # type: ignore[assignment]

    def __init__(self) -> None:
        vars(self)["api_key"] = fresh_secret()

    def __repr__(self) -> str:
        CALLED.append("__repr__")
        return "Trap()"


class TrapList(list):  # type: ignore[type-arg]
    __len__ = tripwire("__len__", list.__len__)
    __iter__ = tripwire("__iter__", list.__iter__)
    __getitem__ = tripwire("__getitem__", list.__getitem__)
    __sizeof__ = tripwire("__sizeof__", list.__sizeof__)  # type: ignore[assignment]
    __repr__ = tripwire("__repr__", list.__repr__)  # type: ignore[assignment]


class TrapDict(dict):  # type: ignore[type-arg]
    items = tripwire("items", dict.items)  # type: ignore[assignment]
    keys = tripwire("keys", dict.keys)  # type: ignore[assignment]
    __iter__ = tripwire("__iter__", dict.__iter__)
    __getitem__ = tripwire("__getitem__", dict.__getitem__)
    __len__ = tripwire("__len__", dict.__len__)
    __sizeof__ = tripwire("__sizeof__", dict.__sizeof__)  # type: ignore[assignment]


class TrapFrame(pd.DataFrame):
    __sizeof__ = tripwire("__sizeof__", pd.DataFrame.__sizeof__)  # type: ignore[assignment]
    __len__ = tripwire("__len__", pd.DataFrame.__len__)
    memory_usage = tripwire("memory_usage", pd.DataFrame.memory_usage)  # type: ignore[assignment]
    head = tripwire("head", pd.DataFrame.head)  # type: ignore[assignment]
    describe = tripwire("describe", pd.DataFrame.describe)  # type: ignore[assignment]

    def __repr__(self) -> str:
        CALLED.append("__repr__")
        return "TrapFrame(...)"


class TrapArray(np.ndarray):  # type: ignore[type-arg]
    nbytes = property(tripwire("nbytes", np.ndarray.nbytes.__get__))  # type: ignore[assignment]
    __len__ = tripwire("__len__", np.ndarray.__len__)
    __sizeof__ = tripwire("__sizeof__", np.ndarray.__sizeof__)  # type: ignore[assignment]


def traps() -> dict[str, Any]:
    found = {"trap": Trap(), "traps": TrapList([1, 2, 3]), "trap_dict": TrapDict(api_key=fresh_secret(), n=1),
             "frame": TrapFrame({"a": [1, 2]}), "array": np.zeros(4).view(TrapArray),
             "in_a_list": [Trap(), TrapList([Trap()])]}
    try:
        import matplotlib

        matplotlib.use("agg")
        from matplotlib.figure import Figure

        class TrapFigure(Figure):
            savefig = tripwire("savefig", Figure.savefig)  # type: ignore[assignment]
            get_size_inches = tripwire("get_size_inches", Figure.get_size_inches)  # type: ignore[assignment]

            def __repr__(self) -> str:
                CALLED.append("__repr__")
                return "TrapFigure()"

        found["figure"] = TrapFigure()
    except ImportError:
        pass
    return found


def test_list_variables_runs_no_method_of_the_users_objects() -> None:
    namespace = traps()
    with armed() as called:
        answer = call(namespace, "list_variables")
    assert called == [] and not answer.is_error
    entries = {entry["name"]: entry for entry in answer.structured["variables"]}  # type: ignore[index]
    assert entries["traps"]["type"] == "hostile.test_values.TrapList" or entries["traps"]["type"].endswith("TrapList")
    assert "length" not in entries["traps"] and "shape" not in entries["frame"] and "shape" not in entries["array"]
    assert all(isinstance(entry["size_bytes"], int) for entry in entries.values())


@pytest.mark.parametrize("name", ["trap", "traps", "trap_dict", "frame", "array", "in_a_list", "figure"])
def test_inspect_variable_runs_no_method_of_the_users_objects_but_repr(name: str) -> None:
    namespace = traps()
    if name not in namespace:
        pytest.skip("matplotlib is not installed")
    with armed() as called:
        text = inspect(namespace, name)
    assert set(called) <= {"__repr__"}, called
    assert "api_key" not in text or "'api_key': '***'" in text
    assert "image" not in text.lower() or name != "figure"


ODD_FRAMES: dict[str, Callable[[], Any]] = {
    "duplicate columns": lambda: pd.DataFrame([[1, 2, "x"]], columns=["a", "a", "b"]),
    "MultiIndex columns": lambda: pd.DataFrame([[1, 2.5]], columns=pd.MultiIndex.from_tuples([("x", 1), ("x", 2)])),
    "labels that are no strings": lambda: pd.DataFrame({0: [1.0], (1, 2): ["x"], None: [None], 2.5: [True]}),
    "a label that is a user object": lambda: pd.DataFrame({Trap(): [1]}),
    "empty": lambda: pd.DataFrame(),
    "rows but no columns": lambda: pd.DataFrame(index=range(3)),
    "columns but no rows": lambda: pd.DataFrame(columns=["a", "b"]),
    "all NaN": lambda: pd.DataFrame({"a": [np.nan, np.nan], "b": [None, None]}),
    "odd objects": lambda: pd.DataFrame({"o": [Trap(), [1, 2], {"k": 1}, None, object(), Trap]}),
    "odd categories": lambda: pd.DataFrame({"c": pd.Categorical([(1, 2), (3, 4), (1, 2)])}),
    "odd index": lambda: pd.DataFrame({"v": [1, 2]}, index=[Trap(), (1, "a")]),
    "odd text": lambda: pd.DataFrame({ODD: [ODD_NAME, ODD]}, index=[ODD, ODD_NAME]),
    "a series of odd objects": lambda: pd.Series([Trap(), None], name=ODD),
    "a series of nothing": lambda: pd.Series([], dtype=object),
    "a series named by a user object": lambda: pd.Series([1.5, None, 2.5], name=Trap()),
    "columns named by user objects in levels": lambda: pd.DataFrame(
        [[1, "a"]], columns=pd.MultiIndex.from_tuples([(Trap(), "x"), ("token", Trap())])),
}


@pytest.mark.parametrize("kind", list(ODD_FRAMES), ids=list(ODD_FRAMES))
def test_odd_frames_inspect_fine(kind: str) -> None:
    namespace = {"frame": ODD_FRAMES[kind]()}
    with armed() as called:
        answer = call(namespace, "inspect_variable", {"name": "frame"})
        listing = call(namespace, "list_variables")
    assert not answer.is_error and "failed" not in answer.text_of(), answer.text_of()
    assert set(called) <= {"__repr__"}, called
    assert_sendable(answer)
    assert_sendable(listing)


# -- any text in any answer is escaped ---------------------------------------------------------

def test_odd_text_everywhere_is_escaped_in_every_answer() -> None:
    odd_type = type("Odd\u202e", (), {"__repr__": lambda self: f"<{ODD}>"})
    odd_type.__qualname__ = f"Odd{ODD}"  # a class's name may hold what its definition could not
    namespace = {"files": pd.DataFrame({"name": [ODD_NAME, "plain.csv"]}), f"var{ODD}": 1, "odd": odd_type(),
                 "keys": {ODD: ODD.encode("utf-8", "surrogateescape")}, "text": ODD}
    answers = [call(namespace, "list_variables"), call(namespace, "inspect_variable", {"name": f"nope{ODD}"}),
               call(namespace, "run_code", {"code": f"print({ODD!r})\nraise ValueError({ODD!r})"}),
               call(namespace, "run_code", {"code": "print('a\\udcffb'); text"}),
               *[call(namespace, "inspect_variable", {"name": name}) for name in ("files", "odd", "keys", "text")]]
    for answer in answers:
        assert_sendable(answer)
    assert "report-\\udcff.csv" in answers[-4].text_of()
    assert "\\u202e" in answers[0].text_of() and "\\x00" in answers[2].text_of()
    assert answers[1].is_error and answers[2].is_error


def test_an_answer_escapes_text_whichever_way_it_was_made() -> None:
    for answer in (Answer.text(ODD), Answer.error(ODD), Answer([{"type": "text", "text": ODD}]),
                   Answer([], structured={ODD: [ODD, {"k": ODD}]})):
        assert_sendable(answer)
    assert Answer([{"type": "text", "text": "a\x00b\u202ec"}]).text_of() == "a\\x00b\\u202ec"
    flood = Answer([{"type": "text", "text": "\x00" * 30_000}]).text_of()
    assert len(flood) < TEXT_LIMIT + 200 and "[cut:" in flood


@settings(max_examples=60, suppress_health_check=[HealthCheck.too_slow])
@given(st.text(st.characters(exclude_categories=()), max_size=30))
def test_any_text_in_comes_out_encodable_and_visible(text: str) -> None:
    namespace = {"v": text, "d": {text: [text, text.encode("utf-8", "surrogatepass")]}, text or "empty": 1,
                 "frame": pd.DataFrame({text: [text]})}
    for answer in (call(namespace, "list_variables"), call(namespace, "inspect_variable", {"name": "v"}),
                   call(namespace, "inspect_variable", {"name": "d"}), call(namespace, "inspect_variable",
                                                                             {"name": "frame"}),
                   call(namespace, "inspect_variable", {"name": text + "?"}),
                   call(namespace, "run_code", {"code": "print(v, d)"})):
        assert_sendable(answer)


HYPOTHESIS_SECRET = fresh_secret("hyp")


@dataclasses.dataclass
class Box:
    item: Any
    label: str = "box"


_HIDING = [lambda s: {"api_key": s}, lambda s: {"HF_TOKEN": s.encode()}, lambda s: Settings("eu", s),
           lambda s: types.SimpleNamespace(token=s), lambda s: collections.OrderedDict(client_secret=s),
           lambda s: [("x", 1), {"Authorization": b"Bearer " + s.encode()}], lambda s: Credentials("me", s),
           lambda s: (SlotSettings(s),)]
_PLAIN = st.one_of(st.integers(), st.text(max_size=8), st.binary(max_size=8), st.none(), st.floats())
_HIDDEN = st.sampled_from(_HIDING).map(lambda hide: hide(HYPOTHESIS_SECRET))
_KEYS = st.text("abcdefg", max_size=4)
# Every leaf of the tree holds the secret; plain values sit beside it at every level.
_NESTED = st.recursive(_HIDDEN, lambda inner: st.one_of(
    st.lists(st.one_of(inner, _PLAIN), min_size=1, max_size=4).map(lambda items: [*items, items[0]]),
    st.tuples(_PLAIN, inner), st.dictionaries(_KEYS, _PLAIN, max_size=3).flatmap(
        lambda plain: inner.map(lambda item: {**plain, "zz": item})),
    inner.map(Box), inner.map(lambda item: types.SimpleNamespace(data=item, n=1)),
    inner.map(lambda item: collections.deque([1, item])), inner.map(lambda item: {("t", 1): item})),
    max_leaves=12)


@pytest.mark.slow  # 100 nestings, each shown every way: about 20 s on a loaded machine
@settings(max_examples=100, suppress_health_check=[HealthCheck.too_slow, HealthCheck.filter_too_much])
@given(_NESTED)
def test_a_secret_anywhere_in_any_nesting_never_shows(value: Any) -> None:
    assume(HYPOTHESIS_SECRET in repr(value))
    namespace = {"value": value}
    for answer in (call(namespace, "inspect_variable", {"name": "value"}),
                   call(namespace, "inspect_variable", {"name": "value", "rows": 0})):
        assert_hidden(HYPOTHESIS_SECRET, answer.text_of())
        assert_sendable(answer)


# -- end to end: the bridge and the official MCP client ----------------------------------------

@pytest.mark.slow
def test_hostile_values_through_the_bridge_and_the_mcp_client() -> None:
    secret = fresh_secret()
    namespace = {"files": pd.DataFrame({"name": [ODD_NAME], "password": [secret]}),
                 "env": {"OPENAI_API_KEY": secret}, **cyclic_values(), "traps": traps()["traps"]}
    tools = KernelTools(policy="allow", namespace=namespace, run_timeout=30)
    entry = _loop.run_sync(tools.start(), TIMEOUT)

    async def agent() -> list[Any]:
        async with open_kernel_tools(entry) as session:
            return [await session.call_tool(tool, arguments) for tool, arguments in [
                ("list_variables", {}), ("inspect_variable", {"name": "files"}),
                ("inspect_variable", {"name": "env"}), ("inspect_variable", {"name": "rec"}),
                ("run_code", {"code": "print('\\udcff', env)"}), ("inspect_variable", {"name": "traps"})]]

    try:
        results = _loop.run_sync(agent(), TIMEOUT)
    finally:
        _loop.run_sync(tools.close(), TIMEOUT)
    texts = ["\n".join(block.text for block in result.content if block.type == "text") for result in results]
    assert len(results) == 6 and not any(result.is_error for result in results)
    for text in texts:
        assert_hidden(secret, text)
    assert "report-\\udcff.csv" in texts[1] and "{'OPENAI_API_KEY': '***'}" in texts[2]
    assert texts[3] == "rec: list\n[[...]]" and texts[4].startswith("\\udcff {'OPENAI_API_KEY': '***OPENAI_API_KEY***'}")


# -- in a real kernel: the history, and what was deleted ---------------------------------------

@pytest.fixture
def kernel(tmp_path: Path) -> Iterator[Any]:
    pytest.importorskip("jupyter_client")
    pytest.importorskip("ipykernel")
    from test_magics_kernel import Frontend

    from tests.kernels import start_kernel

    manager, client = start_kernel(tmp_path)
    frontend = Frontend(client, manager)
    try:
        yield frontend
    finally:
        client.stop_channels()
        manager.shutdown_kernel(now=True)


def run_cell(frontend: Any, code: str) -> str:
    cell = frontend.execute(code, timeout=TIMEOUT)
    assert cell.reply["status"] == "ok", cell.errors
    return str(cell.stdout)


KERNEL_SETUP = """
import json as _json
from acp_notebook import _loop as _acp_loop
from acp_notebook.kernel_tools import KernelTools as _KernelTools
_kt = _KernelTools(policy="allow", run_timeout=30)
print(_json.dumps(_acp_loop.run_sync(_kt.start(), 30)))
"""


def agent_calls(entry: dict[str, Any], *calls: tuple[str, dict[str, Any]]) -> list[str]:
    async def go() -> list[Any]:
        async with open_kernel_tools(entry) as session:
            return [await session.call_tool(tool, arguments) for tool, arguments in calls]

    return ["\n".join(block.text for block in result.content if block.type == "text")
            for result in _loop.run_sync(go(), TIMEOUT)]


@pytest.mark.kernel
def test_in_a_kernel_history_and_deleted_secrets_stay_masked(kernel: Any) -> None:
    literal, computed, env_token, short = fresh_secret(), fresh_secret(), fresh_secret("hf"), "ab12"
    entry = json.loads(run_cell(kernel, KERNEL_SETUP).strip().splitlines()[-1])
    agent_calls(entry, ("list_variables", {}))  # the agent looked once, before the secrets came
    for cell in (f"OPENAI_API_KEY = {literal!r}",
                 f"API_TOKEN = ''.join(reversed({computed[::-1]!r}))",  # computed: no literal to find
                 f"cfg = dict(api_key={short!r}, region='eu')",
                 f"%env HF_TOKEN={env_token}",
                 "d = {'k': OPENAI_API_KEY, 't': API_TOKEN}\nkept = [OPENAI_API_KEY.encode()]",
                 "del OPENAI_API_KEY, API_TOKEN",
                 "d['k']",
                 f"import os\n_ = os.environ.pop('HF_TOKEN')\nh = {{'v': {env_token!r}}}"):
        run_cell(kernel, cell)
    texts = agent_calls(entry, ("notebook_history", {"n": 20}), ("inspect_variable", {"name": "d"}),
                        ("inspect_variable", {"name": "kept"}), ("inspect_variable", {"name": "h"}),
                        ("inspect_variable", {"name": "cfg"}),
                        ("run_code", {"code": "print(d, kept, h, os.environ.get('HF_TOKEN'))"}))
    for text in texts:
        for secret in (literal, computed, env_token):
            assert_hidden(secret, text)
    history = texts[0]
    assert short not in history and "cfg = dict(api_key='***', region='eu')" in history
    assert "OPENAI_API_KEY = '***'" in history and "%env HF_TOKEN=***" in history
    assert "***OPENAI_API_KEY***" in texts[1] and "***API_TOKEN***" in texts[1]
    assert "{'api_key': '***', 'region': 'eu'}" in texts[4]
    assert os.environ.get("HF_TOKEN") != env_token  # the kernel's environment is its own


@pytest.mark.kernel
def test_a_secret_computed_and_deleted_before_the_agent_first_looks_stays_masked(kernel: Any) -> None:
    """The kernel learns secret-named values after every cell from the moment the tools start, not from
    the agent's first call: nothing in the history or the environment holds this one any more."""
    computed = fresh_secret()
    entry = json.loads(run_cell(kernel, KERNEL_SETUP).strip().splitlines()[-1])
    for cell in (f"SERVICE_TOKEN = ''.join(reversed({computed[::-1]!r}))",
                 "copy = {'note': SERVICE_TOKEN}",
                 "del SERVICE_TOKEN"):
        run_cell(kernel, cell)
    texts = agent_calls(entry, ("inspect_variable", {"name": "copy"}), ("notebook_history", {"n": 20}),
                        ("run_code", {"code": "print(copy['note'])"}))
    for text in texts:
        assert_hidden(computed, text)
    assert "***SERVICE_TOKEN***" in texts[0]
