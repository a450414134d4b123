"""Display helpers shared by the CLI and the browser."""

from __future__ import annotations

from hypothesis import given, settings
from hypothesis import strategies as st
from rich.cells import cell_len

from helpers import examples
from sessiontree.display import call_label, counted, inert, message_summary, one_line
from sessiontree.outline import Filter, Outline
from sessiontree.storage.index import TreeIndex
from sessiontree.tui.preview import wrap


@settings(max_examples=examples(500), deadline=None)
@given(st.text(alphabet=st.sampled_from(list("ab  xyz日本é\t")), max_size=200), st.integers(2, 40))
def test_wrap_keeps_every_character_and_fits(text, width):
    pieces = wrap(text, width)
    assert "".join(pieces) == text
    assert all(cell_len(p) <= width for p in pieces)


def test_wrap_is_linear_on_huge_lines():
    import time

    start = time.perf_counter()
    assert len(wrap("x" * 2_000_000, 80)) == 25_000
    assert time.perf_counter() - start < 2


def test_inert_makes_controls_visible():
    assert inert("a\x1b[31mb\x07") == "a␛[31mb␇"
    assert inert("x\u202ey\u200bz") == "x⟨U+202E⟩y⟨U+200B⟩z"
    assert inert("tab\tand\nnewline") == "tab\tand\nnewline"
    assert one_line("a\n\nb   c", 10) == "a b c"
    assert one_line("x" * 50, 10) == "x" * 9 + "…"


def _chain(n: int) -> TreeIndex:
    index = TreeIndex()
    parent = None
    for k in range(n):
        index.add(f"e{k}", parent, "message", "user")
        parent = f"e{k}"
    return index


def test_deep_chain_is_flat_and_needs_no_recursion():
    index = _chain(20_000)  # far beyond Python's recursion limit
    outline = Outline(index, Filter.ALL)
    assert len(outline) == 20_000
    assert {outline.prefix(r) for r in range(len(outline))} == {""}


def test_forks_indent_and_nested_forks_stay_bounded():
    index = TreeIndex()
    index.add("root", None, "message", "user")
    parent = "root"
    for depth in range(60):  # 60 nested forks: the indentation is capped, not unbounded
        index.add(f"a{depth}", parent, "message", "user")
        index.add(f"b{depth}", parent, "message", "user")
        parent = f"b{depth}"
    outline = Outline(index, Filter.ALL)
    assert len(outline) == 121
    assert outline.prefix(1) == "├─ "
    assert max(len(outline.prefix(r)) for r in range(len(outline))) <= 3 * 24 + 3


def test_emoji_joined_by_zwj_stay_whole_and_other_joiners_stay_visible():
    family = "👨\u200d👩\u200d👧"
    assert inert(f"the {family} and 🏳️\u200d🌈") == f"the {family} and 🏳️\u200d🌈"
    assert inert("a\u200db") == "a⟨U+200D⟩b"  # between letters it hides text: shown
    assert inert("\u200d👩") == "⟨U+200D⟩👩" and inert("👩\u200d") == "👩⟨U+200D⟩"


def test_tool_rows_keep_what_tells_them_apart():
    """Rows of tool calls differ where the calls differ: an agent's `cd DIR &&` preamble goes,
    a command keeps well past Pi's 50 characters, a long path keeps its file name."""
    cwd = "/Users/someone/workspaces/pi-mono"
    bash = {"name": "bash", "arguments": {"command": f"cd {cwd} && npm run check 2>&1 | tail -40"}}
    assert call_label(bash) == "[bash: npm run check 2>&1 | tail -40]"
    quoted = {"name": "bash", "arguments": {"command": 'cd "/a b/c"; git add -A && git commit -m x'}}
    assert call_label(quoted) == "[bash: git add -A && git commit -m x]"
    assert call_label({"name": "bash", "arguments": {"command": "cd /tmp"}}) == "[bash: cd /tmp]"
    long = "echo " + "x" * 200
    assert call_label({"name": "bash", "arguments": {"command": long}}) == f"[bash: {long[:120]}…]"
    path = f"{cwd}/packages/coding-agent/src/core/agent-session.ts"
    label = call_label({"name": "edit", "arguments": {"path": path}})
    assert label.startswith("[edit: …/") and label.endswith("/src/core/agent-session.ts]")
    assert len(label) <= len("[edit: ]") + 60
    assert call_label({"name": "read", "arguments": {"path": "src/x.py"}}) == "[read: src/x.py]"


def test_counted_says_one_thing_and_many_things():
    assert counted(1, "entry", "entries") == "1 entry"
    assert counted(0, "entry", "entries") == "0 entries"
    assert counted(1, "match", "matches") == "1 match"
    assert counted(2, "message") == "2 messages"
    assert counted(12345, "message") == "12,345 messages"


def test_a_custom_entry_is_not_drawn_like_a_label():
    """`◆ [ci-status] CI run…` read as a label (`[diagnosis]`) once dimmed off the path (QA)."""
    from sessiontree.display import entry_preview
    from sessiontree.model.entries import entry_from_dict

    def entry(**fields):
        return entry_from_dict({"id": "c1", "parentId": None, "timestamp": "2026-01-01T00:00:00Z", **fields})

    message = entry(type="custom_message", customType="ci-status", content="CI run #482 passed", display=True)
    assert entry_preview(message, 80) == "ci-status: CI run #482 passed"
    assert (
        entry_preview(entry(type="custom", customType="ext-state", data={"n": 1}), 80) == 'ext-state: {"n":1}'
    )
    assert entry_preview(entry(type="custom", customType="marker"), 80) == "marker"


def test_a_bash_row_says_how_the_command_ended_and_whether_it_was_sent():
    """A cancelled command read "→ exit None"; one kept from the model looked like any other (QA)."""
    run = {"role": "bashExecution", "command": "sleep 100", "output": ""}
    assert message_summary({**run, "exitCode": 2}) == "sleep 100  → exit 2"
    # what is unusual first: a long command is cut from its end (it took the word with it)
    assert message_summary({**run, "exitCode": None, "cancelled": True}) == "[cancelled] sleep 100"
    assert message_summary({**run, "exitCode": None}) == "[no exit code] sleep 100"
    hidden = {**run, "exitCode": 0, "excludeFromContext": True}
    assert message_summary(hidden) == "[not sent] sleep 100  → exit 0"


def test_a_message_without_text_says_empty_in_its_row():
    """An empty or blank message drew a bare `›` row (QA)."""
    from sessiontree.display import entry_preview
    from sessiontree.model.entries import entry_from_dict

    def entry(content):
        return entry_from_dict({"type": "message", "id": "m", "parentId": None, "timestamp": "t",
                                "message": {"role": "user", "content": content, "timestamp": 1}})  # fmt: skip

    assert entry_preview(entry("")) == entry_preview(entry("  \n ")) == "(empty)"
    assert entry_preview(entry("hi")) == "hi"


def test_an_aborted_answer_without_text_says_so_in_its_row():
    """An aborted turn with no content read "(empty)"; Pi's /tree says "(aborted)" (helper)."""
    from sessiontree.display import message_summary

    assert message_summary({"role": "assistant", "content": [], "stopReason": "aborted"}) == "(aborted)"
    assert message_summary({"role": "assistant", "content": [], "stopReason": "length"}) == "(length)"


def test_a_cut_inside_an_emoji_sequence_leaves_no_joiner():
    """A row cut inside 👨‍👩‍👧‍👦 ended in `⟨U+200D⟩…` (QA)."""
    family = "👨\u200d👩\u200d👧\u200d👦"
    for n in range(1, 30):
        assert "U+200D" not in one_line(family * 40, n) and not one_line(family * 40, n).endswith("\u200d…")
