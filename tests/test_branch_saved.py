"""The branch tree as session records keep it (branching.saved_tree): what %acp resume rebuilds a conversation
from after a restart. Records come from a saved notebook, which anyone may have edited: odd values are read as
nothing, never trusted as types, and what is shown of them is spelt out (widgets/branches.py)."""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

from acp_notebook.branching import SavedBranch, saved_tree
from acp_notebook.widgets.branches import branches_forms


@dataclass(frozen=True)
class Record:
    session_id: str
    branch: Any = None
    title: str | None = None
    at: float = 0.0


def mark(name, **fields):
    return {"name": name, "conversation": "c1", **fields}


def test_the_tree_of_one_conversation_with_a_parent_recorded_before_it_branched():
    records = [
        Record("s-main", None, "Apples", at=1.0),  # recorded while the conversation had one branch
        Record("s-b2", mark("b2", parent="main", parent_session="s-main", fork_point=1, how="forked", turns=2,
                            cell="In [5]", prompt="plums"), "Plums", at=3.0),
        Record("s-b3", mark("b3", parent="b2", parent_session="s-b2", fork_point=2, turns=3), at=4.0),
        Record("s-other", {"name": "b2", "conversation": "c2"}, at=5.0),  # another conversation's b2
        Record("s-b2", mark("b2", parent="main", parent_session="s-main", turns=1), at=2.0),  # an older record
    ]
    current, others = saved_tree(records, "s-b3")
    assert current == SavedBranch("b3", "s-b3", parent="b2", fork_point=2, turns=3, parent_session="s-b2")
    assert {b.name: (b.session_id, b.turns, b.title) for b in others} == {
        "b2": ("s-b2", 2, "Plums"), "main": ("s-main", 0, "Apples")}
    assert saved_tree(records, "s-main") == (None, [])  # its own record names no conversation
    assert saved_tree(records, "nowhere") == (None, [])


def test_odd_values_in_an_edited_notebook_are_read_as_nothing_and_shown_spelt_out():
    records = [
        Record("s-1", {"name": "main", "conversation": "c1", "turns": "many", "fork_point": True, "at": [1],
                       "prompt": 7, "parent": ["x"]}),
        Record("s-2", {"name": "b2", "conversation": "c1", "parent": "main", "prompt": "evil\u202eeliv",
                       "cell": "In [\u200b3]", "turns": 2.0, "at": 2.0}, "t\u202eitle"),
    ]
    current, others = saved_tree(records, "s-1")
    assert (current.turns, current.fork_point, current.at, current.prompt, current.parent) == (0, 0, 0.0, "", None)
    (other,) = others
    assert other.turns == 2 and other.prompt == "evil\u202eeliv"
    forms = branches_forms([], "main", others)
    for text in forms.values():
        assert "\u202e" not in text and "\u200b" not in text
    assert "saved, not reopened" in forms["text/plain"]
