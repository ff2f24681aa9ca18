"""visible(): any text becomes text that encodes as UTF-8 and hides nothing."""

from __future__ import annotations

from hypothesis import given
from hypothesis import strategies as st

from acp_notebook._visible import has_hidden, visible


@given(st.text(alphabet=st.characters(codec=None, exclude_categories=())))
def test_any_text_becomes_encodable_and_shows_every_hidden_character(text: str) -> None:
    shown = visible(text)
    shown.encode("utf-8")  # lone surrogates included: never raises
    assert not has_hidden(shown)
    assert visible(shown) == shown
    assert shown.count("\n") == text.count("\n")


def test_reordering_and_control_characters_are_spelled_out() -> None:
    assert visible("print('ok')\u202e#)'lieve'(tnirp") == "print('ok')\\u202e#)'lieve'(tnirp"
    assert visible("a\u2066b\u2069") == "a\\u2066b\\u2069"
    assert visible("nul\x00 esc\x1b[2J") == "nul\\x00 esc\\x1b[2J"
    assert visible("report-\udcff.csv") == "report-\\udcff.csv"
    assert visible("zero\u200bwidth\ufeff") == "zero\\u200bwidth\\ufeff"


def test_tabs_newlines_and_ordinary_text_are_kept() -> None:
    text = "col\tvalue\nnaïve 東京 🙂 ±"
    assert visible(text) == text
    assert not has_hidden(text)


def test_carriage_returns_are_escaped_unless_kept() -> None:
    assert visible("50%\r100%") == "50%\\x0d100%"
    assert visible("50%\r100%\x00", keep_cr=True) == "50%\r100%\\x00"
