"""LiveParts' patches (widgets/parts.py): whatever two HTML strings, the ops sent turn the old into the new as the
frontend applies them (in order, offsets in UTF-16 units); a plan row whose status changed is patched by its
class and mark only, not the words between. And the saved form's inline styles (cardstyle.inline_styles) resolve
the card classes as the live stylesheet does."""

from __future__ import annotations

import json
import re

from hypothesis import given, settings
from hypothesis import strategies as st

from acp_notebook.widgets.cardstyle import CARD_CSS, inline_styles
from acp_notebook.widgets._html import tool_call_html
from acp_notebook.widgets.parts import REFINE_MAX, patch_ops
from acp_notebook.widgets.turn_sections import plan_rows, tool_ticking

TEXT = st.text(alphabet=st.sampled_from(list("ab <>\"é\u00a0\U0001f600\n")), max_size=400)


def applied(old: str, ops: list[list]) -> str:
    """The frontend's ``apply`` for one part's ops, in Python (JavaScript strings are UTF-16)."""
    units = old.encode("utf-16-le", "surrogatepass")
    for op in ops:
        assert op[0] == "="
        units = units[:2 * op[2]] + op[4].encode("utf-16-le", "surrogatepass") + units[2 * op[3]:]
    return units.decode("utf-16-le", "surrogatepass")


@settings(max_examples=400, deadline=None)
@given(TEXT, st.lists(st.tuples(st.integers(0, 400), st.integers(0, 6), TEXT.map(lambda t: t[:60])), max_size=6))
def test_the_ops_turn_the_old_html_into_the_new(old, edits):
    new = edited(old, edits)
    assert applied(old, patch_ops("k", old, new)) == new


def edited(old: str, edits: list[tuple[int, int, str]]) -> str:
    """``old`` with each edit made in turn: at ``at`` (or its end), ``cut`` characters replaced by ``put``."""
    new = old
    for at, cut, put in edits:
        at = min(at, len(new))
        new = new[:at] + put + new[at + cut:]
    return new


# Long parts are compared by tags and text runs: pieces long enough that a part passes REFINE_MAX.
PIECES = st.sampled_from(['<span class="a">', "</span>", "<div>", "</div>", "<", ">", "\n", "é\U0001f600",
                          "x" * 300, "word " * 40, '<pre class="acpnb-diff">'])
LONG = st.lists(PIECES, max_size=60).map("".join)


@settings(max_examples=150, deadline=None)
@given(LONG, st.lists(st.tuples(st.integers(0, 6000), st.integers(0, 400), LONG.map(lambda t: t[:700])), max_size=5))
def test_the_ops_turn_a_long_old_html_into_the_new(old, edits):
    new = edited(old, edits)
    assert applied(old, patch_ops("k", old, new)) == new


class Call:
    """A tool call as the view reads it."""

    def __init__(self, status, content=()):
        self.id, self.title, self.kind, self.status = "call-7", "Edit file_7.py", "edit", status
        self.locations, self.content, self.updates = [{"path": "/work/file_7.py"}], list(content), []


def test_a_tool_card_that_ends_with_a_long_diff_is_sent_its_badge_and_diff_not_its_head_again():
    diff = {"type": "diff", "path": "/work/file_7.py", "oldText": None,
            "newText": "    value = compute(value, 'lorem ipsum dolor')\n" * 60}
    running = tool_ticking(tool_call_html(Call("in_progress"), timing="0 s"), 1795858361.333)
    done = tool_call_html(Call("completed", [diff]))
    assert len(done) > REFINE_MAX
    ops = patch_ops("call-7", running, done)
    assert applied(running, ops) == done
    sent = "".join(op[4] for op in ops)
    assert "Edit file_7.py" not in sent and "/work/file_7.py</div>" not in sent  # the head and path stay put
    # What goes out (as JSON) is about the diff and the badge's new words, with a few ops' keys and offsets.
    assert len(json.dumps(ops)) < len(json.dumps(done[done.index("<pre"):])) + 200


def test_a_plan_row_whose_status_changed_is_patched_by_its_class_and_mark():
    (_, working), = plan_rows([{"content": "Step 3: change module 3 (12 of 98 tests pass)", "status": "in_progress"}])[1:]
    (_, done), = plan_rows([{"content": "Step 3: change module 3", "status": "completed"}])[1:]
    ops = patch_ops("p0", working, done)
    assert applied(working, ops) == done
    assert [op[4] for op in ops] == ["", "745", "completed"]  # the note dropped, the mark, the class


def test_a_saved_card_writes_each_property_once_as_the_stylesheet_would_resolve_it():
    # The saved form writes the card classes' declarations inline (no stylesheet there): a status class overrides
    # its base whatever the order in the attribute, and the overridden value is not written.
    html = inline_styles('<span class="acpnb-b-failed acpnb-badge">failed</span>')
    style = re.search(r'style="([^"]*)"', html).group(1)
    properties = [declaration.split(":")[0] for declaration in style.split(";")]
    assert len(properties) == len(set(properties)) and style.endswith("background:#c62828")
    assert "background:#c62828" in CARD_CSS.split(".acpnb-b-failed{")[1]  # the same colour live
    # A saved <pre> leaves its font to the renderer (every one sets a pre in a code font); a live one names it.
    saved = inline_styles('<pre class="acpnb-diff">x</pre><div class="acpnb-card-text">y</div>')
    assert "font-family" not in saved.split("</pre>")[0] and "font-family" in saved.split("</pre>")[1]
    assert "font-family" in CARD_CSS.split(".acpnb-diff{")[1].split("}")[0]
    # A saved element keeps its look, not the classes that only carry it (a diff's coloured runs, a chip); the
    # classes that say what it is stay.
    assert inline_styles('<pre class="acpnb-diff"><span class="acpnb-d-add">+x</span></pre>').endswith(
        '<span style="color:#2e7d32">+x</span></pre>')
    assert re.fullmatch('<span class="acpnb-tool-kind" style="[^"]*border-radius:9px[^"]*">edit</span>',
                        inline_styles('<span class="acpnb-chip acpnb-tool-kind">edit</span>'))
    # An element that brings its own style keeps it.
    assert inline_styles('<b class="acpnb-chip" style="color:red">k</b>') == '<b class="acpnb-chip" style="color:red">k</b>'
