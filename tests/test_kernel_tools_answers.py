"""What the kernel tools answer for awkward values: reprs that raise or hang, big frames (a capped
summary from a sample), long output (cut, and saying so), big images (scaled to the cap), secrets."""

from __future__ import annotations

import base64
import time
from typing import Any

import pytest

from acp_notebook import _loop
from acp_notebook.kernel_tools import KernelTools, namespace, server
from acp_notebook.kernel_tools.answers import IMAGE_LIMIT, TEXT_LIMIT
from acp_notebook.kernel_tools.runner import Capture, run_code_here

pd = pytest.importorskip("pandas")
np = pytest.importorskip("numpy")


class RaisingRepr:
    def __repr__(self) -> str:
        raise ValueError("no repr for you")


class HangingRepr:
    def __repr__(self) -> str:
        time.sleep(3600)  # the user's broken object: the tool must stop it, not wait
        return "never"


def call(tools: KernelTools, tool: str, arguments: dict[str, Any]) -> Any:
    return _loop.run_sync(tools.call(tool, arguments), 60)


def test_a_repr_that_raises_is_reported_in_the_answer() -> None:
    answer = namespace.inspect_variable({"thing": RaisingRepr()}, "thing")
    assert not answer.is_error and "<its repr raised ValueError: no repr for you>" in answer.text_of()


@pytest.mark.slow
def test_a_repr_that_hangs_is_stopped_and_the_kernel_thread_goes_on(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(server, "READ_TIMEOUT_S", 1.0)
    tools = KernelTools(namespace={"stuck": HangingRepr(), "fine": 1})
    answer = call(tools, "inspect_variable", {"name": "stuck"})
    assert answer.is_error and answer.text_of() == ("inspecting 'stuck' took over 1 s and was stopped "
                                                    "(a repr or property that hangs?)")
    assert "fine: int" in call(tools, "list_variables", {}).text_of()


def test_a_big_frame_is_summarised_from_a_sample_and_capped(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(namespace, "SAMPLE_ROWS", 500)
    rng = np.random.default_rng(1)
    frame = pd.DataFrame(rng.random((5_000, 80)), columns=[f"c{i}" for i in range(80)])
    text = namespace.inspect_variable({"big": frame}, "big", rows=100).text_of()
    assert "5,000 rows x 80 columns" in text and "describe() over a sample of 500 rows" in text
    assert "columns (the first 60 of 80)" in text and "- c59: float64, 0" in text and "- c60:" not in text
    assert len(text) <= TEXT_LIMIT and "[cut: the first 7,000 of" in text  # the 100-row head, cut to fit


def test_long_output_is_cut_and_says_so() -> None:
    answer = run_code_here("print('x' * 50_000)", {}, Capture())
    text = answer.text_of()
    assert text.startswith("x" * 1000) and text.endswith(f"[cut: the output went over {TEXT_LIMIT:,} characters]\n")
    assert len(text) < TEXT_LIMIT + 100


def test_a_big_image_is_scaled_under_the_cap() -> None:
    image_module = pytest.importorskip("PIL.Image")
    noise = np.random.default_rng(2).integers(0, 255, (1200, 1200, 3), dtype=np.uint8)
    answer = namespace.inspect_variable({"photo": image_module.fromarray(noise)}, "photo")
    (note, image) = answer.content
    assert "PIL image, 1200 x 1200, mode RGB (scaled down to fit 1,000,000 bytes)" == note["text"]
    assert len(base64.b64decode(image["data"])) <= IMAGE_LIMIT


def test_listings_leave_out_modules_internals_and_never_call_a_users_len() -> None:
    class Sized:
        def __len__(self) -> int:
            raise AssertionError("list_variables called a user's __len__")

    found = {"np": np, "In": [], "Out": {}, "_private": 1, "get_ipython": print, "kept": Sized(),
             "arr": np.zeros((3, 4)), "words": ["a", "b"], "hidden_by_shell": 2}
    answer = namespace.list_variables(found, hidden={"hidden_by_shell"})
    entries = {entry["name"]: entry for entry in answer.structured["variables"]}
    assert list(entries) == ["kept", "arr", "words"]
    assert entries["arr"]["shape"] == [3, 4] and entries["arr"]["size_bytes"] == 96
    assert entries["words"]["length"] == 2 and "length" not in entries["kept"]


def test_secret_values_are_masked_wherever_they_appear() -> None:
    found = {"DB_PASSWORD": "correct-horse-battery", "config": {"url": "db://user:correct-horse-battery@host"}}
    assert "correct-horse" not in namespace.inspect_variable(found, "config").text_of()
    assert "***DB_PASSWORD***" in namespace.inspect_variable(found, "config").text_of()
    assert namespace.inspect_variable(found, "DB_PASSWORD").text_of().startswith("DB_PASSWORD = *** (masked")
    settings = {"settings": {"region": "eu", "api_key": "k-1", "nested": [{"password": "p"}]}}
    assert namespace.inspect_variable(settings, "settings").text_of() == (
        "settings: dict\n{'region': 'eu', 'api_key': '***', 'nested': [{'password': '***'}]}")
    assert settings["settings"]["api_key"] == "k-1"  # the user's own object is left as it was


def test_an_unknown_variable_names_close_ones() -> None:
    answer = namespace.inspect_variable({"sales_2024": 1, "sales_2025": 2, "other": 3}, "sales2024")
    assert answer.is_error and answer.text_of() == ("No variable named 'sales2024' in the kernel. "
                                                    "Close names: sales_2024, sales_2025.")
    assert namespace.inspect_variable({"np": np}, "np").is_error  # modules are not variables
