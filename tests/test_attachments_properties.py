"""Property tests: whatever frame or data is attached, what is sent stays within the caps and says
what it left out."""

from __future__ import annotations

import csv
import io
import re

import pandas as pd
import pytest
from hypothesis import HealthCheck, example, given, settings
from hypothesis import strategies as st

from acp_notebook import attachments

CELLS = st.one_of(st.integers(), st.floats(allow_nan=True), st.text(max_size=300), st.none(), st.booleans())


@st.composite
def frames(draw):
    rows = draw(st.integers(0, 80))
    width = draw(st.integers(1, 50))
    column = st.lists(CELLS, min_size=rows, max_size=rows)
    names = draw(st.lists(st.text(min_size=1, max_size=40), min_size=width, max_size=width))
    return pd.DataFrame({f"{i}:{name}": draw(column) for i, name in enumerate(names)})


@pytest.mark.slow  # 40 frames up to every cap, each rendered: over 20 s on a loaded machine
@settings(max_examples=40, deadline=None, suppress_health_check=[HealthCheck.too_slow, HealthCheck.data_too_large])
@given(frames(), st.booleans())
# Every cap at once (rows, columns, bytes, long cells), and a header longer than the byte cap on its own.
@example(pd.DataFrame({f"c{i}": ["\u00e9\r" * 150] * 80 for i in range(50)}), True)
@example(pd.DataFrame({"h" * (attachments.MAX_TEXT_BYTES + 10): [1, 2]}), False)
def test_a_frame_stays_within_the_caps_and_says_what_was_cut(df, embedded):
    item = attachments.attachment(df, "df", embedded=embedded)
    head = item.blocks[0]["text"]
    assert f"{len(df):,} row" in head and f"x {df.shape[1]:,} column" in head
    body = item.blocks[1]["resource"]["text"] if embedded else head.split("```csv\n", 1)[1].rsplit("\n```", 1)[0]
    assert len(body.encode()) <= attachments.MAX_TEXT_BYTES
    assert item.size <= attachments.MAX_TEXT_BYTES
    if "header cut" in item.note:
        return  # not even the column names fit: nothing to parse
    records = list(csv.reader(io.StringIO(body, newline="")))
    header, rows = records[0], records[1:]
    assert len(header) == min(df.shape[1], attachments.MAX_COLUMNS)
    assert len(rows) <= attachments.MAX_ROWS
    assert all(len(cell) <= attachments.MAX_CELL_CHARS + 1 for row in rows for cell in row)
    cut = re.search(r"the first ([\d,]+) of ([\d,]+) rows", item.note)
    if len(rows) < len(df):
        assert cut and int(cut.group(1).replace(",", "")) == len(rows)
    else:
        assert cut is None
    assert ("columns" in item.note) == (df.shape[1] > attachments.MAX_COLUMNS)


JSON_LIKE = st.recursive(
    st.one_of(st.none(), st.booleans(), st.integers(), st.floats(), st.text(max_size=3000)),
    lambda inner: st.one_of(st.lists(inner, max_size=150), st.dictionaries(st.text(max_size=20), inner, max_size=150),
                            st.tuples(inner, inner), st.frozensets(st.integers(), max_size=150)),
    max_leaves=400)


@pytest.mark.slow  # 80 nested values up to the caps: about 11 s on a loaded machine
@settings(max_examples=80, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(JSON_LIKE)
def test_any_data_stays_within_the_caps(value):
    item = attachments.attachment(value, "value", embedded=True)
    body = item.blocks[-1]["resource"]["text"] if item.blocks[-1]["type"] == "resource" else item.blocks[0]["text"]
    assert len(body.encode()) <= attachments.MAX_TEXT_BYTES
    assert len(attachments.inline_text(value, "value").encode()) <= attachments.MAX_INLINE_BYTES


@settings(max_examples=40, deadline=None)
@given(st.text(min_size=0, max_size=30_000))
def test_strings_are_cut_whole_characters_within_the_caps(text):
    item = attachments.attachment(text, "note", embedded=True)
    body = item.blocks[1]["resource"]["text"]
    assert len(body.encode()) <= attachments.MAX_TEXT_BYTES and text.startswith(body)
    assert ("cut" in item.note) == (body != text)
