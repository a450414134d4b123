"""The preview pane: anchored to the tree's cursor, rendered (Markdown, code, diffs), inert, and
never in the way of keys. Real session files in tmp_path, the real app under `App.run_test()`."""

from __future__ import annotations

import asyncio
import json
import shutil
import time
from pathlib import Path
from typing import Any

import pytest
from rich.style import Style
from textual._styles_cache import StylesCache
from textual.geometry import Region

from harness.pilot import screen_lines, settle
from helpers import PI_FIXTURES, A, U, zero_usage
from sessiontree import JsonlStorage, Session
from sessiontree.calls import diff_lines
from sessiontree.tui.app import SessionTreeApp
from sessiontree.tui.launch import open_for_browsing
from sessiontree.tui.preview import (
    COLLAPSED,
    ENTRY,
    STYLES,
    Plan,
    PreviewView,
    RenderCache,
    Renderer,
    Scope,
    body_parts,
    message_parts,
    plain_text,
    render_all,
    row_text,
    split_code,
    split_markdown,
)
from sessiontree.tui.preview_pane import PreviewPane
from sessiontree.tui.tree_view import SessionTreeView

pytestmark = pytest.mark.usefixtures("utc")

SIZES = [(80, 24), (160, 50)]

MARKDOWN = """## Goal

Make the **parser** handle *every* time zone.

- first item
- second item with `inline code`

| zone | offset |
| --- | --- |
| Tokyo | +9 |

```python
def parse(text: str) -> int:
    return len(text)
```

1. Finish the README
2. Release 1.4.0
"""


# --- helpers ----------------------------------------------------------------------------------


def make_app(path: Path, **kw: Any) -> SessionTreeApp:
    session, note = open_for_browsing(path, read_only=kw.pop("read_only", False))
    return SessionTreeApp(session, note=note, follow=kw.pop("follow", False), **kw)


def view(app: SessionTreeApp) -> PreviewView:
    return app.browser.query_one(PreviewView)


def pane(app: SessionTreeApp) -> PreviewPane:
    return app.browser.query_one(PreviewPane)


def tree(app: SessionTreeApp) -> SessionTreeView:
    return app.browser.query_one(SessionTreeView)


def cursor_id(app: SessionTreeApp) -> str:
    target = tree(app).current_target()
    assert target is not None
    return target.entry_id


async def put_cursor(app: SessionTreeApp, pilot: Any, entry_id: str) -> None:
    """The cursor on `entry_id` — under the "all" filter when the current one hides it (turns
    of only tool calls are hidden by default)."""
    t = tree(app)
    if t.outline.row_of[app.session.tree.pos[entry_id]] < 0:
        app.browser.action_set_filter("all")
    t.set_cursor(t.outline.row_for(app.session.tree.pos[entry_id]))
    await settle(app, pilot)


def anchored_text(app: SessionTreeApp) -> str:
    v = view(app)
    assert v.anchor_rows is not None
    start, end = v.anchor_rows
    return plain_text(v.rows[start:end])


def assert_anchor_in_view(app: SessionTreeApp) -> None:
    """The selected entry's heading is on screen, and so is its bar."""
    v = view(app)
    assert v.anchor_rows is not None
    start, _ = v.anchor_rows
    top = int(v.scroll_offset.y)
    height = v.scrollable_content_region.height
    assert top <= start < top + height, (top, start, height)
    drawn = v.render_line(start - top)
    assert drawn.text.startswith("▌ ")


def styles_of(rows: list, needle: str) -> list[Style]:
    """Styles of the segments whose text contains `needle`."""
    out = []
    for row in rows:
        for text, style in row[0]:
            if needle in text and STYLES[style] is not None:
                out.append(STYLES[style])
    return out


def assistant(*blocks: dict[str, Any], thinking: str | None = None) -> dict[str, Any]:
    msg = A("")
    msg["content"] = ([{"type": "thinking", "thinking": thinking}] if thinking else []) + list(blocks)
    return msg


def text(value: str) -> dict[str, Any]:
    return {"type": "text", "text": value}


def call(call_id: str, name: str, arguments: Any) -> dict[str, Any]:
    return {"type": "toolCall", "id": call_id, "name": name, "arguments": arguments}


def result(call_id: str, name: str, value: str, *, error: bool = False) -> dict[str, Any]:
    return {
        "role": "toolResult",
        "toolCallId": call_id,
        "toolName": name,
        "content": [{"type": "text", "text": value}],
        "isError": error,
        "timestamp": 3,
    }


@pytest.fixture
def conversation(tmp_path: Path) -> tuple[Path, dict[str, str]]:
    """A session with Markdown, code, an edit, a write, a read, thinking, a label and a tool
    result long enough to be cut; returns its path and the ids by name."""
    path = tmp_path / "conversation.jsonl"
    ids: dict[str, str] = {}
    with Session(JsonlStorage.create(path, cwd="/p")) as s:
        ids["ask"] = s.append_message(U("Please look at **the parser**.\nSecond line."))
        ids["plan"] = s.append_message(
            assistant(text(MARKDOWN), thinking="\n".join(f"step {n}" for n in range(10)))
        )
        ids["edit"] = s.append_message(
            assistant(
                text("Fixing it."),
                call(
                    "c1",
                    "edit",
                    {"path": "src/dates.py", "oldText": "x = 1\ny = 2\n", "newText": "x = 1\ny = 3\n"},
                ),
            )
        )
        ids["edited"] = s.append_message(result("c1", "edit", "Edited src/dates.py"))
        ids["multi"] = s.append_message(
            assistant(
                call(
                    "c2",
                    "edit",
                    {
                        "path": "a.py",
                        "edits": [
                            {"oldText": "alpha", "newText": "beta"},
                            {"oldText": "one", "newText": "two"},
                        ],
                    },
                ),
                call("c3", "edit", {"file_path": "b.py", "old_string": "gamma", "new_string": "delta"}),
            )
        )
        ids["write"] = s.append_message(
            assistant(
                call(
                    "c4",
                    "write",
                    {"path": "pkg/mod.py", "content": "import os\n\ndef main():\n    return os.sep\n"},
                )
            )
        )
        ids["read"] = s.append_message(
            assistant(call("c5", "read", {"path": "pkg/mod.py", "offset": 10, "limit": 40}))
        )
        ids["long result"] = s.append_message(
            result("c5", "read", "\n".join(f"line_{n} = {n}" for n in range(40)))
        )
        ids["grep"] = s.append_message(
            assistant(
                call("c6", "grep", {"pattern": "def .*", "path": "src", "flags": ["-n"], "note": "one\ntwo"})
            )
        )
        ids["last"] = s.append_message(U("And the last question, after which the label comes."))
        ids["label"] = s.append_label(ids["plan"], "the plan")
    return path, ids


# --- anchoring --------------------------------------------------------------------------------


@pytest.mark.parametrize("size", SIZES)
async def test_the_selected_entry_is_marked_and_in_view_as_the_cursor_moves(conversation, size):
    path, ids = conversation
    app = make_app(path)
    async with app.run_test(size=size) as pilot:
        await settle(app, pilot)
        v = view(app)
        assert v._width == v.render_width() > 20  # the first render is for the laid-out width
        for name in ("ask", "plan", "edit", "write", "long result", "last"):
            await put_cursor(app, pilot, ids[name])
            assert_anchor_in_view(app)
            assert f"up to {ids[name]}" in str(app.browser.query_one("#preview-title").render())
        await put_cursor(app, pilot, ids["plan"])
        assert anchored_text(app).startswith("── assistant")
        assert "Goal" in anchored_text(app)
        for key in ("k", "k", "j", "j", "j"):  # through the tree's keys
            await pilot.press(key)
            await settle(app, pilot)
            assert_anchor_in_view(app)
        # the mark is drawn: a bar down the entry's rows, a band behind its heading
        v = view(app)
        start, _ = v.anchor_rows
        top = int(v.scroll_offset.y)
        heading = v.render_line(start - top)
        band = v.get_component_rich_style("preview--anchor", partial=True)
        assert band.bgcolor is not None
        assert any(seg.style and seg.style.bgcolor == band.bgcolor for seg in heading)
        if start - 1 >= top:
            assert not v.render_line(start - 1 - top).text.startswith("▌")


@pytest.fixture
def long_context(tmp_path) -> tuple[Path, str]:
    """60 questions and answers, every answer with Markdown: (the file, the last answer's id)."""
    path = tmp_path / "long.jsonl"
    with Session(JsonlStorage.create(path, cwd="/p")) as s:
        for n in range(60):
            s.append_message(U(f"question {n}"))
            last = s.append_message(A(f"answer {n}\n\n" + MARKDOWN))
    return path, last


async def test_the_last_entry_of_a_long_context_is_in_view_at_once(long_context):
    """The selected entry ends the context, usually far below its top."""
    path, last = long_context
    app = make_app(path)
    async with app.run_test(size=(120, 30)) as pilot:
        await put_cursor(app, pilot, last)
        assert_anchor_in_view(app)
        assert "answer 59" in anchored_text(app)
        v = view(app)
        assert int(v.scroll_offset.y) > 100  # far from the top of the context


async def test_expanded_a_long_context_shows_its_newest_thousand_entries_whole(tmp_path):
    """`e` rendered a context whole: a deep session's 72,726 messages took three minutes and
    1.6 GB that the app kept (QA). It shows the newest thousand, bodies whole, and says where
    the rest are; collapsed, the newest 400."""
    path = tmp_path / "long.jsonl"
    with Session(JsonlStorage.create(path, cwd="/p")) as s:
        for n in range(650):
            s.append_message(U(f"question {n}"))
            s.append_message(A(f"answer {n}\n" + "\n".join(f"line {k}" for k in range(20))))
    app = make_app(path)
    async with app.run_test(size=(120, 30)) as pilot:
        await settle(app, pilot)
        shown = plain_text(view(app).rows)
        assert "(900 older context entries not shown; e shows the newest 1,000 whole)" in shown
        assert "question 449" not in shown and "question 450" in shown and "line 19" not in shown
        await pilot.press("e")
        for _ in range(200):
            await settle(app, pilot)
            if "expanded" in str(app.browser.query_one("#preview-title").render()) and view(app).rows:
                shown = plain_text(view(app).rows)
                if "(300 older" in shown and "answer 649" in shown:
                    break
        assert "(300 older context entries not shown; sessiontree context FILE or an export" in shown
        assert "question 149" not in shown and "question 150" in shown and "line 19" in shown


def context_size(path: Path) -> int:
    with Session(JsonlStorage.open(path, read_only=True)) as s:
        return len(s.build_context().messages)


async def test_a_cut_context_counts_every_message_and_cuts_after_its_summary(tmp_path):
    """The header said "363 messages" where the context held 914 (`sessiontree context`), then
    "≥400 messages", vaguer than the CLI; the note of what was left out stood above the
    compaction summary, which the model gets first (QA). Its tokens are a lower bound."""
    path = tmp_path / "compacted.jsonl"
    with Session(JsonlStorage.create(path, cwd="/p")) as s:
        first = s.append_message(U("question 0"))
        s.append_message(A("answer 0"))
        s.append_compaction("SUMMARY of what came before", first, 5000)
        for n in range(1, 450):
            s.append_message(U(f"question {n}"))
            s.append_message(A(f"answer {n}"))
    app = make_app(path)
    async with app.run_test(size=(120, 30)) as pilot:
        await settle(app, pilot)
        lines = [line for line in plain_text(view(app).rows).splitlines() if line.strip()]
        assert lines[0].startswith("the leaf is at ") and f": {context_size(path):,} messages · ≥" in lines[0]
        summary = next(k for k, line in enumerate(lines) if "SUMMARY of what came before" in line)
        note = next(k for k, line in enumerate(lines) if "older context entries not shown" in line)
        assert summary < note < next(k for k, line in enumerate(lines) if "question" in line)
    with Session(JsonlStorage.open(path)) as s:  # an answer that reports its usage, at the end
        # answered after the compaction (a usage from before it measured the context it replaced)
        answer = A("reported", usage=zero_usage(input=90_000, totalTokens=90_000))
        s.append_message({**answer, "timestamp": int(time.time() * 1000)})
    app = make_app(path)
    async with app.run_test(size=(120, 30)) as pilot:
        await settle(app, pilot)
        first = plain_text(view(app).rows).splitlines()[0]
        # the estimate starts from that usage, as Pi's does: whole, not a lower bound (QA)
        assert f": {context_size(path):,} messages · ~90,000 tokens" in first, first


async def test_a_cut_context_without_a_compaction_counts_every_message(tmp_path):
    """The newest entries of a long path are read without listing the rest: the count of the
    messages left out comes from the index, settings entries (no message) not counted."""
    path = tmp_path / "long.jsonl"
    with Session(JsonlStorage.create(path, cwd="/p")) as s:
        for n in range(600):
            s.append_message(U(f"question {n}"))
            s.append_message(A(f"answer {n}"))
            if n % 50 == 0:
                s.append_thinking_level_change("high" if n % 100 else "low")
                s.append_custom_message_entry("note", f"note {n}", display=True)
    assert context_size(path) == 1212
    app = make_app(path)
    async with app.run_test(size=(120, 30)) as pilot:
        await settle(app, pilot)
        first = plain_text(view(app).rows).splitlines()[0]
        assert ": 1,212 messages · ≥" in first, first


async def test_a_command_kept_from_the_model_says_so_in_the_context(tmp_path):
    """A `!!` command (`excludeFromContext`) is in the context Pi keeps but never sent: it
    looked like any other command run (QA)."""
    path = tmp_path / "bash.jsonl"
    with Session(JsonlStorage.create(path, cwd="/p")) as s:
        s.append_message(U("question"))
        for command, hidden in (("ls", False), ("cat secret", True)):
            s.append_message(
                {
                    "role": "bashExecution",
                    "command": command,
                    "output": "x",
                    "exitCode": 0,
                    "cancelled": False,
                    "truncated": False,
                    "timestamp": 1,
                    "excludeFromContext": hidden,
                }
            )
    app = make_app(path)
    async with app.run_test(size=(120, 30)) as pilot:
        await settle(app, pilot)
        shown = plain_text(view(app).rows)
        assert shown.count("bashExecution · not sent") == 1
        assert "bashExecution · ~" in shown


async def test_raw_json_of_an_old_format_file_says_it_was_converted(tmp_path, demo):
    """A version 1 file's raw JSON showed an id and a parentId its line does not hold (QA)."""
    path = tmp_path / "v1.jsonl"
    shutil.copyfile(PI_FIXTURES / "large-session.jsonl", path)
    app = make_app(path, read_only=True)
    async with app.run_test(size=(120, 30)) as pilot:
        await settle(app, pilot)
        await pilot.press("p", "p")
        await settle(app, pilot)
        shown = plain_text(view(app).rows)
        assert "(a version 1 file: the entry as converted to version 3 when read" in shown
    app = make_app(demo, read_only=True)  # version 3
    async with app.run_test(size=(120, 30)) as pilot:
        await settle(app, pilot)
        await pilot.press("p", "p")
        await settle(app, pilot)
        assert "as converted" not in plain_text(view(app).rows)


async def test_images_in_the_context_say_their_type(tmp_path):
    """The context showed a bare "[image]" where "as sent" gave its type and size."""
    path = tmp_path / "image.jsonl"
    picture = {"type": "image", "mimeType": "image/png", "data": "AAAA"}
    with Session(JsonlStorage.create(path, cwd="/p")) as s:
        s.append_message(
            {"role": "user", "content": [{"type": "text", "text": "see"}, picture], "timestamp": 1}
        )
        s.append_message(A("a cat"))
    app = make_app(path)
    async with app.run_test(size=(120, 30)) as pilot:
        await settle(app, pilot)
        shown = plain_text(view(app).rows)
        assert "[image image/png]" in shown and "[image]" not in shown


async def test_a_find_in_a_long_entry_shows_its_match(tmp_path):
    """A find that landed on an entry with a 500-line result marked the match and said "the
    match among them", but the preview stayed at the entry's top: expanded (`e`), the reader
    paged 250 lines to it (QA). It opens at the first match when none is in sight."""
    path = tmp_path / "long-result.jsonl"
    with Session(JsonlStorage.create(path, cwd="/p")) as s:
        s.append_message(U("run it"))
        s.append_message(
            {
                "role": "toolResult",
                "toolCallId": "c1",
                "toolName": "bash",
                "isError": False,
                "content": [{"type": "text", "text": "\n".join(f"output line {k}" for k in range(500))}],
                "timestamp": 1,
            }
        )
        s.append_message(A("done"))
    app = make_app(path)
    async with app.run_test(size=(120, 30)) as pilot:
        await settle(app, pilot)
        await pilot.press("slash", *'"line 250"', "enter")
        await settle(app, pilot)
        await pilot.press("e")
        await settle(app, pilot)
        v = view(app)
        top = int(v.scroll_offset.y)
        shown = [row_text(row) for row in v.rows[top : top + v.size.height]]
        assert any("output line 250" in line for line in shown), shown[:3]
        assert v.anchor_rows[0] < top  # scrolled into the entry, past its heading
        # the entry alone (`v`) opened at its top, paging to the match again (QA)
        await pilot.press("v")
        await settle(app, pilot)
        assert v.anchor_rows is None  # the whole view is the entry
        top = int(v.scroll_offset.y)
        shown = [row_text(row) for row in v.rows[top : top + v.size.height]]
        assert top > 0 and any("output line 250" in line for line in shown), shown[:3]


async def test_expanding_after_a_find_keeps_to_the_match(tmp_path):
    """`e` after a find on a real session: the expanded rows came first fewer than those shown,
    Textual clamped the offset, and the view took that for the reader scrolling, placing the
    entry 44 rows down and never going to the match, 1,400 rows further (QA)."""
    path = tmp_path / "large.jsonl"
    shutil.copyfile(PI_FIXTURES / "large-session.jsonl", path)
    app = make_app(path)
    async with app.run_test(size=(160, 50)) as pilot:
        await settle(app, pilot)
        await pilot.press("g", "slash", *"Credentials", "enter")
        await settle(app, pilot)
        await pilot.press("e")
        for _ in range(50):
            await settle(app, pilot)
            v = view(app)
            if "expanded" in str(app.browser.query_one("#preview-title").render()) and len(v.rows) > 3000:
                break
        top = int(v.scroll_offset.y)
        shown = [row_text(row).lower() for row in v.rows[top : top + v.size.height]]
        assert any("credentials" in line for line in shown)


async def test_anchored_after_search(conversation):
    path, ids = conversation
    app = make_app(path)
    async with app.run_test(size=(120, 36)) as pilot:
        await put_cursor(app, pilot, ids["ask"])
        await pilot.press("slash", *"Fixing", "enter")
        await settle(app, pilot)
        assert cursor_id(app) == ids["edit"]
        assert_anchor_in_view(app)
        assert "Fixing it." in anchored_text(app)


async def test_an_entry_that_adds_no_message_is_marked_at_the_end(conversation):
    path, ids = conversation
    app = make_app(path)
    async with app.run_test(size=(120, 36)) as pilot:
        await pilot.press("5")  # everything: labels have rows
        await put_cursor(app, pilot, ids["label"])
        assert_anchor_in_view(app)
        said = " ".join(anchored_text(app).split())
        parent = app.session.get_entry(ids["label"]).parent_id
        # what it records beside it, its parent named by id: the label's own words read as
        # the parent's (QA)
        assert f"label {ids['label']} (label " in said and "adds no message" in said, said
        assert said.endswith(f"the context is as at its parent, {parent}"), said
        v = view(app)
        assert v.anchor_rows[1] == len(v.rows)


async def test_lines_take_the_new_colours_after_a_theme_change(conversation):
    """Line styles are resolved once per widget and kept (see `CachedStyles`); a theme change
    must still reach every line of the preview and of the tree."""
    path, ids = conversation
    app = make_app(path)
    async with app.run_test(size=(120, 30)) as pilot:
        await put_cursor(app, pilot, ids["last"])
        widgets = (view(app), tree(app))
        before = [list(w.render_line(0)) for w in widgets]
        app.theme = "textual-light" if app.current_theme.dark else "textual-dark"
        await settle(app, pilot)
        after = [list(w.render_line(0)) for w in widgets]
        for w in widgets:
            w._styles.clear()
        tree(app)._cache.clear()
        assert [list(w.render_line(0)) for w in widgets] == after
        assert after[0] != before[0] and after[1] != before[1]


async def test_the_reader_keeps_the_place_they_scrolled_to(conversation):
    """A rebuild of the same entry (a write, a resize, more rows arriving) does not yank the
    view back; another entry is placed afresh."""
    path, ids = conversation
    app = make_app(path)
    async with app.run_test(size=(120, 30)) as pilot:
        await put_cursor(app, pilot, ids["last"])
        v = view(app)
        v.focus()
        await pilot.press("home")
        await pilot.pause()
        assert int(v.scroll_offset.y) == 0
        pane(app).rebuild()
        await settle(app, pilot)
        assert int(v.scroll_offset.y) == 0  # still where the reader put it
        tree(app).focus()
        await pilot.press("k")
        await settle(app, pilot)
        assert_anchor_in_view(app)  # another entry: placed afresh


async def test_live_follow_keeps_the_new_leaf_anchored(tmp_path):
    path = tmp_path / "followed.jsonl"
    with Session(JsonlStorage.create(path, cwd="/p")) as s:
        for n in range(8):
            s.append_message(U(f"question {n}"))
            s.append_message(A(MARKDOWN))
    app = make_app(path, follow=True)
    async with app.run_test(size=(120, 30)) as pilot:
        await settle(app, pilot)
        assert cursor_id(app) == app.session.leaf_id
        new = "feed0001"
        record = {
            "type": "message",
            "id": new,
            "parentId": app.session.leaf_id,
            "timestamp": "2026-03-14T10:00:00.000Z",
            "message": U("appended while browsing, with **Markdown**"),
        }
        with open(path, "ab") as f:  # the agent (Pi, no lock) appends while we browse
            f.write(json.dumps(record).encode() + b"\n")
        for _ in range(40):
            await pilot.pause(0.1)
            if cursor_id(app) == new:
                break
        await settle(app, pilot)
        assert cursor_id(app) == new
        assert_anchor_in_view(app)
        assert "appended while browsing, with Markdown" in anchored_text(app)


@pytest.mark.parametrize("size", SIZES)
async def test_resize_renders_again_for_the_new_width(conversation, size):
    path, ids = conversation
    app = make_app(path)
    async with app.run_test(size=(120, 36)) as pilot:
        await put_cursor(app, pilot, ids["plan"])
        await pilot.resize_terminal(*size)
        await settle(app, pilot)
        v = view(app)
        width = v.render_width()
        assert all(sum(len(t) for t, _ in row[0]) <= width for row in v.rows)
        assert_anchor_in_view(app)


async def test_the_selected_entry_stays_in_view_through_a_resize_and_back(demo):
    """Growing the terminal clamps the preview's scroll to its shorter content; that is not the
    reader scrolling, so the rows rendered for the next width are placed on the entry again."""
    app = make_app(demo)
    async with app.run_test(size=(80, 24)) as pilot:
        await put_cursor(app, pilot, "3a7c1764")  # "Fix it by always parsing in UTC."
        assert_anchor_in_view(app)
        for size in ((160, 50), (80, 24), (120, 40), (70, 20), (160, 50), (80, 24)):
            await pilot.resize_terminal(*size)
            await settle(app, pilot)
            assert_anchor_in_view(app)
        v = view(app)
        assert v.anchor_rows is not None
        offset = v.anchor_rows[0] - int(v.scroll_offset.y)  # the entry's row on screen
        top = int(v.scroll_offset.y)
        assert top >= 2
        v.scroll_to(0, top - 2, animate=False, immediate=True)  # the reader scrolls up a little
        assert v.anchor_rows[0] - int(v.scroll_offset.y) == offset + 2
        await pilot.resize_terminal(100, 24)
        await settle(app, pilot)
        assert v.anchor_rows is not None
        assert v.anchor_rows[0] - int(v.scroll_offset.y) == offset + 2  # kept through the resize


# --- the scope toggle -------------------------------------------------------------------------


@pytest.mark.parametrize("size", SIZES)
async def test_v_shows_the_entry_alone_and_whole_then_the_context_again(conversation, size):
    path, ids = conversation
    app = make_app(path)
    async with app.run_test(size=size) as pilot:
        await put_cursor(app, pilot, ids["long result"])
        context = view(app).plain_text()
        assert "if the leaf were at" in context and "more lines" in context
        assert "line_39 = 39" not in context
        await pilot.press("v")
        await settle(app, pilot)
        assert pane(app).scope is Scope.ENTRY
        title = str(app.browser.query_one("#preview-title").render())
        assert f"entry {ids['long result']}" in title
        title_width = app.browser.query_one("#preview-title").size.width
        # The hint for `v` where it fits (always at 160 columns); a narrow pane drops it, not cut.
        if title.endswith(" · v: context"):
            assert len(title) <= title_width
        else:
            assert len(f"{title} · v: context") > title_width and size[0] < 160
        alone = view(app).plain_text()
        assert "if the leaf were at" not in alone and "Please look at" not in alone
        assert "line_0 = 0" in alone and "line_39 = 39" in alone  # whole, not cut
        assert int(view(app).scroll_offset.y) == 0
        await put_cursor(app, pilot, ids["plan"])  # the scope stays while the cursor moves
        alone = view(app).plain_text()
        assert "step 9" in alone and "Release 1.4.0" in alone and "more lines" not in alone
        await pilot.press("v")
        await settle(app, pilot)
        assert pane(app).scope is Scope.CONTEXT
        assert "if the leaf were at" in view(app).plain_text()
        assert_anchor_in_view(app)


async def test_v_on_an_entry_without_messages_shows_what_it_records(conversation):
    path, ids = conversation
    app = make_app(path)
    async with app.run_test(size=(120, 36)) as pilot:
        await pilot.press("5")
        await put_cursor(app, pilot, ids["label"])
        await pilot.press("v")
        await settle(app, pilot)
        shown = view(app).plain_text()
        assert "the plan" in shown and '"type": "label"' in shown


# --- rendering --------------------------------------------------------------------------------


async def test_markdown_is_rendered(conversation):
    path, ids = conversation
    app = make_app(path)
    async with app.run_test(size=(160, 50)) as pilot:
        await put_cursor(app, pilot, ids["plan"])
        await pilot.press("v")
        await settle(app, pilot)
        rows = view(app).rows
        shown = plain_text(rows)
        assert "Goal" in shown and "## Goal" not in shown
        assert "Make the parser handle every time zone." in shown
        assert "• first item" in shown and "inline code" in shown and "`inline code`" not in shown
        assert "Tokyo" in shown and "| Tokyo |" not in shown  # a table, not pipes
        assert "def parse(text: str) -> int:" in shown and "```" not in shown
        assert "1. Finish the README" in shown and "2. Release 1.4.0" in shown
        assert any(s.bold for s in styles_of(rows, "parser"))
        assert any(s.italic for s in styles_of(rows, "every"))
        assert any(s.color is not None for s in styles_of(rows, "def"))  # highlighted by Pygments
        assert any(s.bgcolor is not None for s in styles_of(rows, "def"))  # a code block
        assert "step 9" in shown  # thinking, whole in the entry scope


async def test_newlines_in_messages_are_line_breaks(conversation):
    path, ids = conversation
    app = make_app(path)
    async with app.run_test(size=(160, 50)) as pilot:
        await put_cursor(app, pilot, ids["ask"])
        shown = anchored_text(app)
        assert "Please look at the parser.\nSecond line." in shown


async def test_edits_are_a_coloured_diff(conversation):
    path, ids = conversation
    app = make_app(path)
    async with app.run_test(size=(160, 50)) as pilot:
        await put_cursor(app, pilot, ids["edit"])
        start, end = view(app).anchor_rows
        rows = view(app).rows[start:end]
        shown = plain_text(rows)
        assert "→ edit  src/dates.py  (−1 +1)" in shown
        assert "oldText" not in shown and "\\n" not in shown
        removed = [row_text(r) for r in rows if r[1] == "preview--diff-removed"]
        added = [row_text(r) for r in rows if r[1] == "preview--diff-added"]
        context = [row_text(r) for r in rows if r[1] == "preview--diff-context"]
        assert [x.strip() for x in removed] == ["- y = 2"]
        assert [x.strip() for x in added] == ["+ y = 3"]
        assert [x.strip() for x in context] == ["x = 1"]
        v = view(app)
        colour = v.get_component_rich_style("preview--diff-added", partial=True)
        assert colour.bgcolor is not None
        await put_cursor(app, pilot, ids["multi"])
        start, end = view(app).anchor_rows
        rows = view(app).rows[start:end]
        shown = plain_text(rows)
        assert "→ edit  a.py  (−2 +2)" in shown and "→ edit  b.py  (−1 +1)" in shown
        removed = [row_text(r).strip() for r in rows if r[1] == "preview--diff-removed"]
        assert removed == ["- alpha", "- one", "- gamma"]


async def test_written_files_are_highlighted_by_their_name(conversation):
    path, ids = conversation
    app = make_app(path)
    async with app.run_test(size=(160, 50)) as pilot:
        await put_cursor(app, pilot, ids["write"])
        rows = view(app).rows
        shown = plain_text(rows)
        assert "→ write  pkg/mod.py  (4 lines)" in shown
        assert "def main():" in shown and "content" not in shown
        keyword = styles_of(rows, "import")
        name = styles_of(rows, "main")
        assert keyword and name and keyword[0].color != name[0].color  # Python, highlighted


async def test_tool_arguments_are_fields_and_results_are_cut(conversation):
    path, ids = conversation
    app = make_app(path)
    async with app.run_test(size=(160, 50)) as pilot:
        await put_cursor(app, pilot, ids["grep"])
        shown = plain_text(view(app).rows)
        assert "→ grep  src" in shown
        assert "pattern: def .*" in shown and 'flags: ["-n"]' in shown
        assert "note:\n    one\n    two" in shown
        assert any(s.bold for s in styles_of(view(app).rows, "pattern"))
        await put_cursor(app, pilot, ids["long result"])
        shown = anchored_text(app)
        assert "line_5 = 5" in shown and "line_6 = 6" not in shown
        assert "34 more lines" in shown
        assert any(
            s.color is not None for s in styles_of(view(app).rows, "line_0")
        )  # a read: its file's lexer
        await put_cursor(app, pilot, ids["plan"])
        shown = anchored_text(app)
        assert "thinking: step 0" in shown and "step 3" not in shown and "7 more lines" in shown
        await pilot.press("e")
        await settle(app, pilot)
        shown = anchored_text(app)
        assert "step 9" in shown and "more lines" not in shown


# --- hostile content --------------------------------------------------------------------------

# (text in the session, what must be shown); control, bidi and invisible characters must never be
# drawn (FORBIDDEN), nor any link or click action.
HOSTILE_MARKDOWN = {
    "javascript link": ("[x](javascript:alert(1))", "javascript:alert(1)"),
    "textual click markup": ("[@click=app.quit]x[/]", "[@click=app.quit]x[/]"),
    "rich link markup": ("[link=https://evil.example]l[/link]", "[link=https://evil.example]l[/link]"),
    "link to a real site": ("[docs](https://example.com/docs)", "docs (https://example.com/docs)"),
    "OSC 8 in a code fence": (
        "```python\nprint('\x1b]8;;https://evil.example\x07x\x1b]8;;\x07')\n```",
        "␛]8;;https://evil.example␇x",
    ),
    "bidi in a code fence": ("```\nabc\u202edef\n```", "abc⟨U+202E⟩def"),
    "ESC in a link target": ("[a](http://e.example/\x1b[31m)", "http://e.example/␛[31m"),
    "bidi in a link target": ("[b](<http://e\u202e.example>)", "http://e⟨U+202E⟩.example"),
    "character references": ("&#x202e; &#x200b; &#8238; &#27;", "⟨U+202E⟩ ⟨U+200B⟩ ⟨U+202E⟩"),
    "ESC in inline code": ("`\x1b[2J` done", "␛[2J done"),
    "html": ("<script>alert(1)</script>", "<script>alert(1)</script>"),
    "hostile fence info": ("```[@click=app.quit]\ncode here\n```", "code here"),
    "markup in a heading": ("# [bold red]x[/]", "[bold red]x[/]"),
    "bidi in a table": ("| a\u2066 | b |\n|---|---|\n| \x1b[31m | c |", "a⟨U+2066⟩"),
    "C1 control": ("a\x9b31mb", "a⟨U+009B⟩31mb"),
}

FORBIDDEN = "\x1b\x07\x9b\u202e\u200b\u2066\u2069"


@pytest.mark.parametrize("case", list(HOSTILE_MARKDOWN))
async def test_markdown_shaped_attacks_stay_inert(tmp_path, case):
    hostile, shown = HOSTILE_MARKDOWN[case]
    path = tmp_path / "hostile.jsonl"
    with Session(JsonlStorage.create(path, cwd="/p")) as s:
        s.append_message(U(hostile))
        target = s.append_message(
            assistant(
                text(hostile),
                call("h1", "edit", {"path": hostile, "oldText": hostile, "newText": hostile + "!"}),
                call("h2", "write", {"path": "x.md", "content": hostile}),
                call("h3", "other", {"field": hostile, "block": hostile + "\n" + hostile}),
            )
        )
    app = make_app(path)
    async with app.run_test(size=(200, 40)) as pilot:
        for scope_key in ((), ("v",)):
            await put_cursor(app, pilot, target)
            if scope_key:
                await pilot.press(*scope_key)
                await settle(app, pilot)
            v = view(app)
            text_shown = v.plain_text()
            assert shown in text_shown
            assert not any(ch in text_shown for ch in FORBIDDEN)
            for row in v.rows:  # no link, no click action, nothing that acts
                for _, style_id in row[0]:
                    style = STYLES[style_id]
                    assert style is None or (not style.link and not style.meta)
            for y in range(v.scrollable_content_region.height):  # as drawn
                for segment in v.render_line(y):
                    assert not segment.control
                    assert not any(ch in segment.text for ch in FORBIDDEN)
                    assert segment.style is None or (
                        not segment.style.link and "@click" not in segment.style.meta
                    )


def test_renderer_output_is_inert_whatever_the_body():
    """Below the app: every body kind, straight through the renderer."""
    hostile = "".join(h for h, _ in HOSTILE_MARKDOWN.values())
    for kind in ("markdown", "code", "plain"):
        rendered = render_all(Plan(body_parts(("k",), hostile, ENTRY, kind=kind)), 70)
        text_shown = plain_text(rendered.rows)
        assert not any(ch in text_shown for ch in FORBIDDEN), kind
        for row in rendered.rows:
            for _, style_id in row[0]:
                style = STYLES[style_id]
                assert style is None or not style.link_id


# --- big entries and speed --------------------------------------------------------------------


def big_markdown(size: int) -> str:
    return (MARKDOWN * (size // len(MARKDOWN) + 1))[:size] + "\n\nTHE END"


async def test_a_megabyte_entry_renders_a_prefix_and_keys_stay_answered(tmp_path):
    path = tmp_path / "big.jsonl"
    with Session(JsonlStorage.create(path, cwd="/p")) as s:
        s.append_message(U("before"))
        big = s.append_message(A(big_markdown(1_000_000)))
        after = s.append_message(U("after"))
    app = make_app(path)
    async with app.run_test(size=(160, 50)) as pilot:
        await put_cursor(app, pilot, big)
        assert "more lines (999,799 characters)" in view(app).plain_text()  # the context cuts it
        await pilot.press("v")  # the whole entry: a long render starts in the worker
        await pilot.pause(0.05)
        for key in "jkjk":  # the tree answers while it renders (and the move stops the render)
            before = cursor_id(app)
            await pilot.press(key)
            assert cursor_id(app) != before
        await settle(app, pilot)
        assert cursor_id(app) == big
        v = view(app)
        v.focus()  # scrolling the preview while it renders does not stop the render
        pane(app).cache.clear()
        pane(app).rebuild()
        lags = []
        while "done" not in pane(app).timings and len(lags) < 50:  # the event loop turns meanwhile
            t0 = time.perf_counter()
            await asyncio.sleep(0.01)
            lags.append(time.perf_counter() - t0 - 0.01)
        # Blocked, the loop would turn once, when the render ends. The bound is loose: the
        # machines these run on are shared.
        assert len(lags) >= 10 and sorted(lags)[len(lags) // 2] < 0.1
        await pilot.press(*"jjkk")
        await settle(app, pilot)
        shown = v.plain_text()
        assert "Release 1.4.0" in shown
        assert "more characters  (e: show them as plain text)" in shown and "THE END" not in shown
        await pilot.press("e")
        await settle(app, pilot)
        assert "THE END" in view(app).plain_text()  # e shows the rest, as plain text
        await put_cursor(app, pilot, after)
        assert "after" in view(app).plain_text()


async def test_what_is_on_screen_comes_before_the_rest(tmp_path):
    """A 90 KB entry shows its first screen long before its last row is rendered."""
    path = tmp_path / "big.jsonl"
    with Session(JsonlStorage.create(path, cwd="/p")) as s:
        s.append_message(U("before"))
        big = s.append_message(A(big_markdown(90_000)))
    app = make_app(path)
    async with app.run_test(size=(160, 50)) as pilot:
        await put_cursor(app, pilot, big)
        await pilot.press("v")
        await settle(app, pilot)
        pane(app).cache.clear()
        pane(app).rebuild()
        await settle(app, pilot)
        timings = pane(app).timings
        assert timings["first"] - timings["start"] < 0.5
        assert timings["done"] - timings["first"] > timings["first"] - timings["start"]
        assert "THE END" in view(app).plain_text()


# --- the pieces -------------------------------------------------------------------------------


def test_markdown_chunks_render_as_the_whole():
    source = big_markdown(30_000)
    chunks = split_markdown(source)
    assert len(chunks) > 5
    assert all(len(chunk) <= 3 * 4000 for chunk, _ in chunks)
    joined = "\n".join(("\n" if gap else "") + chunk for chunk, gap in chunks)
    assert joined.replace("\n", "") == source.replace("\n", "")
    for chunk, _ in chunks:  # every fence opened in a chunk is closed in it
        assert chunk.count("```") % 2 == 0


def test_a_fence_cut_for_size_is_closed_and_reopened():
    source = "```python\n" + "\n".join(f"x_{n} = {n}" for n in range(3000)) + "\n```\n"
    chunks = split_markdown(source)
    assert len(chunks) > 3
    for chunk, gap in chunks:
        assert chunk.startswith("```python") and chunk.rstrip().endswith("```") and not gap
    rendered = render_all(Plan(body_parts(("k",), source, ENTRY)), 60)
    shown = plain_text(rendered.rows)
    assert "x_0 = 0" in shown and "x_2999 = 2999" in shown and "```" not in shown


def test_long_lines_are_split_into_chunks():
    chunks = split_code("y" * 50_000)
    assert len(chunks) > 5 and "".join(chunks) == "y" * 50_000


def test_diff_lines():
    assert diff_lines("a\nb\nc\n", "a\nB\nc\n") == [(" ", "a"), ("-", "b"), ("+", "B"), (" ", "c")]
    far = "\n".join(str(n) for n in range(40))
    changed = far.replace("\n2\n", "\ntwo\n").replace("\n35\n", "\nthirty-five\n")
    signs = [sign for sign, _ in diff_lines(far, changed)]
    assert "⋯" in signs  # two hunks, unchanged lines between them left out


def test_cut_bodies_say_what_is_left():
    rendered = render_all(Plan(body_parts(("k",), "\n".join(map(str, range(30))), COLLAPSED)), 60)
    assert "… 16 more lines  (e: expand · v: entry)" in plain_text(rendered.rows)
    # Counted in the whole text, not in the prefix cut off it first: 50,000 lines of "line"
    # read "787 more lines and 246,000 more characters" (QA).
    rendered = render_all(Plan(body_parts(("k",), "line\n" * 50_000, COLLAPSED)), 60)
    assert "… 49,986 more lines (249,931 characters)" in plain_text(rendered.rows)


@pytest.mark.parametrize("width", [20, 33, 60])
def test_a_message_heading_keeps_to_one_row(width):
    """At 80 columns the preview is 33 wide: "── assistant ·" stood on a row of its own, the
    model and the tokens on the next. What sits between the role and the tokens goes first."""
    msg = {**A("hello"), "provider": "anthropic", "model": "claude-sonnet-4-5"}
    rows = plain_text(render_all(Plan(message_parts(msg, ("m",), COLLAPSED)), width).rows).splitlines()
    heading = rows[0]
    assert heading.startswith("── assistant") and len(heading) <= width
    assert rows[1].strip() == "hello"
    if width >= 33:
        assert heading.endswith(" tok ──")
    if width >= 60:
        assert "claude-sonnet-4-5" in heading


def test_the_render_cache_is_bounded_by_rows():
    cache = RenderCache(max_rows=100)
    renderer = Renderer(40, cache=cache)
    for n in range(20):
        renderer.rows(body_parts(("k", n), "\n".join(["line"] * 10), ENTRY, kind="plain")[0])
    assert cache._rows <= 100
    assert cache.get(("k", 19, "entry", "text", 0, 40, renderer.code_theme)) is not None
    assert cache.get(("k", 0, "entry", "text", 0, 40, renderer.code_theme)) is None


async def test_rows_arriving_above_leave_the_lines_on_screen_undrawn(tmp_path, monkeypatch):
    """The context above the selected entry arrives after it; the lines on screen are the same
    rows scrolled with them, so only the scrollbar is drawn again, and what is kept is still
    what Textual would draw."""
    path = tmp_path / "long.jsonl"
    with Session(JsonlStorage.create(path, cwd="/p")) as s:
        for n in range(60):
            s.append_message(U(f"question {n}"))
            s.append_message(A(f"answer {n}\n\n" + MARKDOWN))
    redrawn: list[tuple[bool, int]] = []  # (fresh, lines asked to be drawn again) per delivery
    show_rows, refresh = PreviewView.show_rows, PreviewView.refresh

    def spied_show_rows(self, rendered, *, fresh):
        asked: list[int] = []

        def spied_refresh(*regions, **kw):
            asked.append(sum(r.height for r in regions) if regions else self.size.height)
            return refresh(self, *regions, **kw)

        self.refresh = spied_refresh
        try:
            show_rows(self, rendered, fresh=fresh)
        finally:
            del self.refresh
        redrawn.append((fresh, sum(asked)))

    monkeypatch.setattr(PreviewView, "show_rows", spied_show_rows)
    app = make_app(path)
    async with app.run_test(size=(120, 30)) as pilot:
        await settle(app, pilot)
        for key in ("up", "up", "down"):
            redrawn.clear()
            await pilot.press(key)
            await settle(app, pilot)
            assert redrawn[0][0] and redrawn[0][1] > 0  # another entry: drawn afresh
            later = [lines for fresh, lines in redrawn[1:] if not fresh]
            assert later and not any(later), redrawn  # its context, above: nothing to draw
            v = view(app)
            crop = Region(0, 0, *v.region.size)
            kept = v._direct_lines(crop)
            assert kept is not None
            assert [list(line) for line in kept] == [
                list(line) for line in StylesCache().render_widget(v, crop)
            ]
            assert_anchor_in_view(app)


async def test_a_slow_rebuild_says_it_is_working_until_its_rows_come(demo, monkeypatch):
    """The whole context expanded on a deep session took seconds before its first row, and the
    rows of the last view stayed under the new title without a word. Past SLOW_PREVIEW the title
    says it is working, and its first rows put the title back."""
    from sessiontree.tui import preview_pane

    plan = PreviewPane._plan

    def slow(self, request):
        if request.expanded:
            time.sleep(3 * preview_pane.SLOW_PREVIEW)
        return plan(self, request)

    monkeypatch.setattr(PreviewPane, "_plan", slow)
    app = make_app(demo)
    async with app.run_test(size=(120, 40)) as pilot:
        await pilot.pause(0.3)
        title = app.browser.query_one("#preview-title")
        assert not str(title.render()).startswith(preview_pane.WORKING)
        await pilot.press("e")
        await pilot.pause(2 * preview_pane.SLOW_PREVIEW)
        assert str(title.render()).startswith(f"{preview_pane.WORKING}context · up to")
        for _ in range(100):
            if pane(app).timings.get("first", 0) > pane(app).timings["start"]:
                break
            await pilot.pause(0.05)
        await pilot.pause()
        assert str(title.render()).startswith("context · up to") and "expanded" in str(title.render())


async def test_keys_scroll_the_preview_at_once(long_context):
    """PgUp, PgDn, Home and End jump: Textual's smooth scroll left the preview moving for
    0.7-1.0 s after each key (a QA pass in tmux), through ~30 frames, where the tree jumps."""
    path, last = long_context
    app = make_app(path)
    async with app.run_test(size=(120, 30)) as pilot:
        await put_cursor(app, pilot, last)
        v = view(app)
        v.focus()
        offsets: list[int] = []
        v.watch(v, "scroll_y", lambda y: offsets.append(round(y)), init=False)
        bottom = round(v.scroll_offset.y)
        page = v.scrollable_content_region.height
        for key, expected in (
            ("pageup", bottom - page),
            ("pageup", bottom - 2 * page),
            ("home", 0),
            ("pagedown", page),
            ("end", round(v.max_scroll_y)),
        ):
            offsets.clear()
            await pilot.press(key)
            assert offsets == [expected], key  # one step, no frames in between


@pytest.mark.parametrize(
    ("extra", "said"),
    [
        ({"stopReason": "error"}, "(stopped: error)"),
        ({"stopReason": "error", "errorMessage": " "}, "(stopped: error)"),
        ({"stopReason": "error", "errorMessage": "overloaded"}, "(stopped: error: overloaded)"),
        ({"stopReason": "aborted"}, "(stopped: aborted)"),
    ],
)
def test_a_turn_that_stopped_says_how_without_a_dangling_colon(extra, said):
    """An error without its message read "(error: )" (QA)."""
    msg = {**A("partial"), **extra}
    text = plain_text(render_all(Plan(message_parts(msg, ("m",), COLLAPSED)), 60).rows)
    assert said in text and ": )" not in text


def test_marked_segments_cut_spans_across_segments_and_keep_their_styles():
    from rich.segment import Segment

    from sessiontree.query import compile_query
    from sessiontree.tui.preview import marked_segments

    bold, italic, mark = Style(bold=True), Style(italic=True), Style(reverse=True)
    segments = [Segment("Fix the ", bold), Segment("flaky date", None), Segment(" parsing date", italic)]
    text = "".join(s.text for s in segments)
    out = marked_segments(segments, text, compile_query('"the flaky date parsing" fix'), mark)
    assert "".join(s.text for s in out) == text
    assert [(s.text, s.style) for s in out] == [
        ("Fix", bold + mark),
        (" ", bold),
        ("the ", bold + mark),
        ("flaky date", mark),
        (" parsing", italic + mark),
        (" date", italic),
    ]
    assert marked_segments(segments, text, compile_query("nowhere"), mark) is segments


async def test_a_tool_calls_long_path_wraps_under_its_name(tmp_path):
    """`→ edit  packages/…/CHANGELOG` went on at the pane's left edge (`.md  (−0 +2)`), under
    the arrow, where the call's lines are indented: it wraps past the arrow now."""
    path = tmp_path / "s.jsonl"
    long = "packages/coding-agent/src/modes/interactive/components/a-very-long-file-name-for-a-component.ts"
    call = {"type": "toolCall", "id": "c1", "name": "edit",
            "arguments": {"path": long, "oldText": "a", "newText": "b"}}  # fmt: skip
    with Session(JsonlStorage.create(path, cwd="/p")) as s:
        s.append_message(U("edit it"))
        turn = s.append_message({**A(""), "content": [call], "stopReason": "toolUse"})
    app = make_app(path)
    async with app.run_test(size=(80, 30)) as pilot:
        await settle(app, pilot)
        await put_cursor(app, pilot, turn)
        v = view(app)
        assert v.anchor_rows is not None
        rows = v.rows[v.anchor_rows[0] : v.anchor_rows[1]]
        k = next(i for i, row in enumerate(rows) if "→ edit" in row_text(row))
        title, after = row_text(rows[k]), row_text(rows[k + 1])
        assert rows[k + 1][2], (title, after)  # the title's own line, wrapped
        arrow = title.index("→")
        assert after[: arrow + 2].strip() == "" and after[arrow + 2] != " ", (title, after)


def test_a_cut_that_leaves_out_only_a_last_newline_says_nothing():
    """An answer of exactly as many lines as are shown, ending in a newline, said "… 1 more
    characters (e: expand)", and e showed nothing more (QA)."""
    from sessiontree.tui.preview import _cut

    text = "".join(f"line {k}\n" for k in range(8))
    assert _cut(text, 8) == (text.rstrip("\n"), None)
    _, more = _cut(text + "x", 8)
    assert more is not None and more.startswith("… 1 more line")
    from sessiontree.tui.preview import BODY_CHARS

    _, more = _cut("a" * (BODY_CHARS + 1), 8)  # one line, one character past the cut
    assert more is not None and more.startswith("… 1 more character ")


@pytest.mark.parametrize("width", [31, 34, 40])
def test_a_failed_tool_results_heading_keeps_error_longest(width):
    """At 80 columns a failed tool result's heading was "── toolResult · ~19 tok ──": "error"
    went first, before the tool's name and the closing rule (QA)."""
    msg = {"role": "toolResult", "toolCallId": "c1", "toolName": "read", "isError": True,
           "content": [{"type": "text", "text": "no such file"}], "timestamp": 1}  # fmt: skip
    heading = plain_text(render_all(Plan(message_parts(msg, ("m",), COLLAPSED)), width).rows).splitlines()[0]
    assert "error" in heading and len(heading) <= width, heading
    assert ("read" in heading) == (width >= 40)


def test_an_answer_cut_at_the_output_limit_says_so():
    """`stopReason: "length"` was drawn as a whole answer; "aborted" and "error" said so (QA)."""
    msg = {**A("the first half of"), "stopReason": "length"}
    shown = plain_text(render_all(Plan(message_parts(msg, ("m",), COLLAPSED)), 60).rows)
    assert "(stopped: length, the answer reached the model's output token limit)" in " ".join(shown.split())


async def test_emoji_sequences_keep_the_tree_and_the_preview_apart(tmp_path):
    """👍🏽 is four cells in tmux, VTE and xterm and ❤️ one, where Rich counts two: a row of them
    ran over the divider, another fell short of it (QA). Measured as such a terminal draws each
    character, the divider stands in one column on every row."""
    import unicodedata

    def drawn(text: str) -> int:  # one character at a time, as tmux draws them
        return sum(
            0
            if unicodedata.combining(c) or c in "\u200d\ufe0f"
            else 2
            if unicodedata.east_asian_width(c) in "WF"
            else 1
            for c in text
        )

    path = tmp_path / "emoji.jsonl"
    with Session(JsonlStorage.create(path, cwd="/p")) as s:
        s.append_message(U("SKIN " + "👍🏽" * 30))
        s.append_message(A("HEART " + "❤️" * 30 + " family 👨‍👩‍👧 flag 🏳️‍🌈 key #️⃣"))
        s.append_label(s.leaf_id, "❤️👍🏽")
        s.append_message(U("plain"))
    app = make_app(path)
    async with app.run_test(size=(80, 24)) as pilot:
        await settle(app, pilot)
        shown = [line for line in screen_lines(app) if "▊" in line]
        assert any("👍" in line for line in shown) and any("❤" in line for line in shown)
        columns = {drawn(line[: line.index("▊")]) for line in shown}
        assert len(columns) == 1, shown
