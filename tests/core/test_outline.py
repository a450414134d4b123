"""The row layout: indentation follows side-branch nesting only, never the forks along a path."""

from __future__ import annotations

from harness.retries import write_retries
from helpers import PI_FIXTURES, A, U
from sessiontree import open_session
from sessiontree.opening import create_session
from sessiontree.outline import GUIDE, Filter, Outline, active_marks


def depth(outline: Outline, row: int) -> int:
    return len(outline.prefix(row)) // GUIDE


def test_three_hundred_retries_stay_within_two_levels(tmp_path):
    with write_retries(tmp_path / "r.jsonl", retries=300, nested=40) as s:
        outline = Outline(s.tree, Filter.ALL)
        assert len(outline) == len(s.tree)
        assert max(depth(outline, r) for r in range(len(outline))) == 2
        # every row on the active path is drawn in the first column
        marks = active_marks(s.tree, s.tree.leaf)
        assert all(depth(outline, outline.row_of[i]) == 0 for i in range(len(s.tree)) if marks[i])
        assert len(outline.side_roots) == 300 + len(range(0, 300, 300 // 40))  # retries + nested


def test_the_child_toward_the_leaf_continues_in_place_and_side_branches_come_first(tmp_path):
    s = create_session("/p", path=tmp_path / "s.jsonl")
    u1 = s.append_message(U("question"))
    s.append_message(A("first answer"))
    s.move_to(u1)
    a2 = s.append_message(A("second answer"))  # the leaf: the active path goes through it
    s.move_to(u1)
    a3 = s.append_message(A("third answer"))  # newest, but no longer on the active path
    s.move_to(a2)
    outline = Outline(s.tree, Filter.DEFAULT)
    order = [s.tree.ids[outline.position(r)] for r in range(len(outline))]
    assert order[0] == u1 and order[-1] == a2  # the path to the leaf reads straight down
    assert [depth(outline, r) for r in range(len(outline))] == [0, 1, 1, 0]
    assert outline.prefix(1) == outline.prefix(2) == "├─ " and a3 in order[1:3]
    s.close()


def test_inside_a_side_branch_its_latest_child_continues(tmp_path):
    s = create_session("/p", path=tmp_path / "s.jsonl")
    root = s.append_message(U("start"))
    s.append_message(A("main line"))
    s.move_to(root)
    side = s.append_message(A("side"))
    old = s.append_message(U("older try in the side branch"))
    s.move_to(side)
    new = s.append_message(U("newer try in the side branch"))
    s.move_to(s.tree.ids[s.tree.parent[s.tree.pos[new]]])
    s.move_to(s.tree.ids[1])  # back on the main line: the leaf is "main line"
    outline = Outline(s.tree, Filter.DEFAULT)
    rows = {s.tree.ids[outline.position(r)]: r for r in range(len(outline))}
    assert depth(outline, rows[side]) == 1 and depth(outline, rows[new]) == 1  # continues in place
    assert depth(outline, rows[old]) == 2  # the older try nests one step further
    s.close()


def test_folding_every_side_branch_leaves_the_active_path_and_one_stub_per_branch(tmp_path):
    with write_retries(tmp_path / "r.jsonl", retries=50, nested=5) as s:
        full = Outline(s.tree, Filter.ALL)
        folded = Outline(s.tree, Filter.ALL, folded=full.side_roots)
        marks = active_marks(s.tree, s.tree.leaf)
        top_level = [k for k in full.side_roots if marks[s.tree.parent[k]]]
        assert len(top_level) == 50 < len(full.side_roots)  # nested ones fold with their branch
        assert len(folded) == sum(marks) + len(top_level)


def test_no_tools_filter_on_a_real_pi_session():
    with open_session(PI_FIXTURES / "large-session.jsonl", read_only=True) as s:
        default = Outline(s.tree, Filter.DEFAULT)
        no_tools = Outline(s.tree, Filter.NO_TOOLS)
        roles = [
            s.entry_at(no_tools.position(r)).get("message", {}).get("role") for r in range(len(no_tools))
        ]
        tool_results = sum(1 for r in range(len(default)) if s.tree.role[default.position(r)] == 3)
        assert tool_results > 0 and "toolResult" not in roles
        assert len(no_tools) == len(default) - tool_results


def test_filters_keep_their_old_names_for_scripts():
    assert Filter("everything") is Filter.ALL and Filter("user messages") is Filter.USER
    assert Filter("labeled") is Filter.LABELED


CALL = {"type": "toolCall", "id": "c1", "name": "read", "arguments": {"path": "x"}}


def _a_turn_of_only_tool_calls(path):
    """A session: a question, an answer that only calls a tool (its id), and the tool's result."""
    s = create_session("/p", path=path)
    s.append_message(U("do it"))
    only_tools = s.append_message({**A(""), "content": [CALL], "stopReason": "toolUse"})
    s.append_message(
        {"role": "toolResult", "toolCallId": "c1", "toolName": "read", "content": "x", "timestamp": 3}
    )
    return s, only_tools


def test_default_filter_hides_assistant_turns_of_only_tool_calls_like_pi(tmp_path):
    s, only_tools = _a_turn_of_only_tool_calls(tmp_path / "s.jsonl")
    call = CALL
    errored = s.append_message({**A(""), "content": [call], "stopReason": "error", "errorMessage": "boom"})
    said = s.append_message({**A("I will read x"), "content": [{"type": "text", "text": "I will"}, call]})
    leaf_only_tools = s.append_message({**A(""), "content": [call], "stopReason": "toolUse"})
    shown = {
        s.tree.ids[Outline(s.tree, Filter.DEFAULT).position(r)]
        for r in range(len(s.tree))
        if r < len(Outline(s.tree, Filter.DEFAULT))
    }
    assert only_tools not in shown
    assert {errored, said, leaf_only_tools} <= shown  # errors, text, and the leaf stay visible
    assert only_tools in {s.tree.ids[i] for i in Outline(s.tree, Filter.ALL).rows_pos}
    s.close()
    with open_session(tmp_path / "s.jsonl", read_only=True) as again:  # the fast path agrees
        assert bytes(again.tree.flags) == bytes(s.tree.flags)


def test_a_labelled_turn_of_only_tool_calls_is_shown(tmp_path):
    """Hidden by the default filter as in Pi, a labelled one hid its label too: it could be seen
    only under labeled-only (QA). A label is set to be found again: it shows the turn."""
    s, only_tools = _a_turn_of_only_tool_calls(tmp_path / "s.jsonl")
    i = s.tree.pos[only_tools]

    def shown(flt: Filter) -> bool:
        return i in Outline(s.tree, flt, labels=s.storage.labels()).rows_pos

    assert not shown(Filter.DEFAULT) and not shown(Filter.NO_TOOLS)
    s.append_label(only_tools, "the read")
    assert shown(Filter.DEFAULT) and shown(Filter.NO_TOOLS) and shown(Filter.LABELED)
    assert not shown(Filter.USER)
    s.append_label(only_tools, None)
    assert not shown(Filter.DEFAULT)
    s.close()


def test_tool_only_turns_of_a_real_pi_session_are_hidden_by_default():
    with open_session(PI_FIXTURES / "large-session.jsonl", read_only=True) as s:
        default = Outline(s.tree, Filter.DEFAULT)
        shown = set(default.rows_pos)
        hidden = [i for i in range(len(s.tree)) if s.tree.flags[i] and i != s.tree.leaf]
        assert hidden and not shown & set(hidden)
        for i in hidden[:50]:
            message = s.entry_at(i).get("message")
            assert message["role"] == "assistant"
            texts = [b.get("text", "") for b in message["content"] if b.get("type") == "text"]
            assert not any(t.strip() for t in texts)
