"""Copy, fork, compare and export from the browser, on real files."""

from __future__ import annotations

import asyncio
import gc
import json
import sys
import threading
from pathlib import Path

import pytest
from textual.widgets import Input

from harness.pilot import cursor_id, make_app, put_cursor, screen_lines, settle, status
from helpers import A, U
from sessiontree import JsonlStorage, Session, open_session
from sessiontree.tui.lines_view import LinesView
from sessiontree.tui.modals import ChoiceScreen, ConfirmScreen, LinesScreen, TextPrompt

pytestmark = pytest.mark.usefixtures("utc")


async def test_copy_each_kind_to_the_clipboard(demo):
    app = make_app(demo)
    async with app.run_test(size=(120, 40)) as pilot:
        await settle(app, pilot)
        await pilot.press("5")  # everything, so the tool result row is there
        await put_cursor(app, pilot, "3a7c0da5")
        copied = {}
        for n, key in enumerate(("text", "call", "sent", "id"), 1):
            await pilot.press("c")
            assert isinstance(app.screen, ChoiceScreen)
            await pilot.press(str(n))
            await settle(app, pilot)  # the context as sent is made in a thread
            copied[key] = app.clipboard
        assert copied["id"] == "3a7c0da5"
        sent = json.loads(copied["sent"])
        assert isinstance(sent, list) and sent[-1]["role"] == "toolResult"
        assert copied["call"].startswith("read(") and "→" in copied["call"]


async def test_copy_from_an_assistant_turn_takes_its_calls_in_full(demo):
    """The entry's text and its calls were the row's one-line summary, arguments cut at 80
    characters, and the calls came without their results. The text is the text alone."""
    app = make_app(demo)
    async with app.run_test(size=(80, 24)) as pilot:
        await settle(app, pilot)
        await put_cursor(app, pilot, "3a7c28ef")  # text, then an `edit` call with long arguments
        session = app.session
        message = session.entry_at(session.tree.pos["3a7c28ef"]).message
        text = next(b["text"] for b in message["content"] if b["type"] == "text")
        call = next(b for b in message["content"] if b["type"] == "toolCall")
        arguments = json.dumps(call["arguments"], ensure_ascii=False, indent=2)
        result = next(
            e.message for e in session.get_entries() if e.get("message", {}).get("toolCallId") == call["id"]
        )
        copied = []
        for n in (1, 2):
            await pilot.press("c", str(n))
            await pilot.pause()
            copied.append(app.clipboard)
        assert copied[0] == text  # the call is the next choice
        assert copied[1] == f"{call['name']}({arguments})\n\n→ {result['content'][0]['text']}"
        assert "…" not in copied[0] + copied[1]


async def test_a_tool_call_is_offered_only_where_there_is_one(demo):
    """The copy dialog lists every choice under the same number; where the entry has no tool
    call (a user message) that one is greyed out and its number only rings the bell."""
    from textual.widgets import OptionList

    app = make_app(demo)
    async with app.run_test(size=(120, 40)) as pilot:
        await settle(app, pilot)
        app.copy_to_clipboard("before")
        await put_cursor(app, pilot, "3a7c09bf")  # a user message
        await pilot.press("c")
        options = app.screen.query_one(OptionList)
        call = options.get_option("call")
        assert call.disabled and "(none here)" in str(call.prompt)
        assert not any(options.get_option(key).disabled for key in ("text", "sent", "id"))
        await pilot.press("2")
        await pilot.pause()
        assert isinstance(app.screen, ChoiceScreen) and app.clipboard == "before"
        await pilot.press("escape")
        await put_cursor(app, pilot, "3a7c0bb2")  # an assistant message calling `read`
        await pilot.press("c")
        assert not app.screen.query_one(OptionList).get_option("call").disabled
        await pilot.press("2")
        await pilot.pause()
        assert "read" in app.clipboard and app.clipboard != "before"


async def test_fork_writes_a_new_session_and_opens_it(demo):
    app = make_app(demo)
    async with app.run_test(size=(120, 40)) as pilot:
        await settle(app, pilot)
        await put_cursor(app, pilot, "3a7c137e")
        before = demo.read_bytes()
        await pilot.press("X")
        assert isinstance(app.screen, ConfirmScreen)
        await pilot.press("y")
        await pilot.pause()
        assert isinstance(app.screen, ConfirmScreen)  # "open it now?"
        await pilot.press("y")
        await settle(app, pilot)
        forked = app.session.location
        assert forked != str(demo) and demo.read_bytes() == before
        # the path's labels are written again after it, as Pi's fork does: the last is the leaf
        leaf = app.session.require_entry(app.session.leaf_id)
        assert leaf.type == "label" and app.session.labels() == {"3a7c137e": "diagnosis"}
    with open_session(forked, read_only=True) as s:
        assert s.header.parent_session and s.labels() == {"3a7c137e": "diagnosis"}
        assert s.require_entry(s.leaf_id).parent_id == "3a7c137e"  # the label hangs below the path


async def test_a_fork_not_opened_says_where_it_went(demo):
    """The dialog that named the new file is gone once answered: the status line keeps it."""
    app = make_app(demo)
    async with app.run_test(size=(120, 40)) as pilot:
        await put_cursor(app, pilot, "3a7c137e")
        await pilot.press("X", "y")
        await pilot.pause()
        await pilot.press("n")  # not now
        await settle(app, pilot)
        said = status(app)
        assert said.startswith("Forked to ") and said.endswith(" (not opened)")
        assert Path(said.removeprefix("Forked to ").removesuffix(" (not opened)")).is_file()
        assert app.session.location == str(demo)


@pytest.fixture
def held_fork(monkeypatch) -> tuple[threading.Event, threading.Event]:
    """The app's forks wait, in their worker, until the second event is set; the first is set
    once one has started."""
    from sessiontree.tui import branching

    started, go_on = threading.Event(), threading.Event()
    real = branching.fork_session

    def slow_fork(*args, **kwargs):
        started.set()
        go_on.wait(10)
        return real(*args, **kwargs)

    monkeypatch.setattr(branching, "fork_session", slow_fork)
    return started, go_on


async def test_a_fork_is_written_while_the_keys_go_on(demo, held_fork):
    # At a million entries a fork reads and writes seconds of entries: the app froze meanwhile.
    started, go_on = held_fork
    app = make_app(demo)
    async with app.run_test(size=(120, 40)) as pilot:
        await put_cursor(app, pilot, "3a7c137e")
        await pilot.press("X", "y")
        assert started.wait(5)
        assert status(app) == "Forking at 3a7c137e…"
        await pilot.press("k")  # handled while the fork is being written
        moved_to = cursor_id(app)
        assert moved_to != "3a7c137e"
        await pilot.press("X")  # one at a time: each says where it went
        assert status(app) == "A fork at 3a7c137e is being written: wait for it"
        assert not isinstance(app.screen, ConfirmScreen)
        go_on.set()
        await settle(app, pilot)
        assert isinstance(app.screen, ConfirmScreen) and "Forked to " in str(app.screen.question)
        await pilot.press("n")
        await pilot.pause()
        assert status(app).startswith("Forked to ") and cursor_id(app) == moved_to


async def test_quitting_during_a_fork_writes_no_fork(demo, held_fork):
    # Quitting closes the session under the fork's worker: the rest of the path was taken for
    # damage, and a fork cut short was written as a whole session that `check` called ok.
    started, go_on = held_fork
    before = sorted(demo.parent.iterdir())
    app = make_app(demo)
    async with app.run_test(size=(120, 40)) as pilot:
        await put_cursor(app, pilot, "3a7c137e")
        await pilot.press("X", "y")
        assert started.wait(5)
        threading.Timer(0.3, go_on.set).start()  # the fork goes on once the session is closed
        await pilot.press("q")
    go_on.wait(5)
    await asyncio.sleep(0.5)  # the worker's thread, let go, finds the session closed
    assert sorted(demo.parent.iterdir()) == before


async def test_compare_two_entries_shows_both_tails(demo):
    app = make_app(demo)
    async with app.run_test(size=(120, 40)) as pilot:
        await settle(app, pilot)
        await put_cursor(app, pilot, "3a7c137e")
        await pilot.press("d")
        assert status(app).startswith("Marked 3a7c137e")
        await pilot.press("a")  # to the leaf
        await settle(app, pilot)
        await pilot.press("d")
        await settle(app, pilot)
        assert isinstance(app.screen, LinesScreen)
        assert status(app).startswith("Compared 3a7c137e with ")  # the mark is used up
        head = app.screen.head  # above the listing, wrapped to the dialog's width
        assert head[0].startswith("---") and head[1].startswith("+++") and head[2].startswith("=")
        assert any(row.prefix == "+" for row in app.screen.rows)
        shown = "\n".join(screen_lines(app))
        assert shown.count("thinking medium") == 2  # the ends of the head lines, wrapped
        await pilot.press("escape")
        assert cursor_id(app) == app.session.leaf_id


async def test_dialogs_fit_a_small_terminal(demo):
    """At 50x15 a dialog's minimum width ran past the right edge and its padding pushed its
    keys line out of sight: the compare dialog, help and the copy choices."""
    app = make_app(demo)
    async with app.run_test(size=(50, 15)) as pilot:
        await settle(app, pilot)
        await put_cursor(app, pilot, "3a7c137e")
        await pilot.press("d", "a")
        await settle(app, pilot)
        await pilot.press("d")
        await settle(app, pilot)
        for keys, shown_keys in (
            ((), "Esc closes"),
            (("escape", "question_mark"), "Esc closes"),
            (("escape", "c"), "Esc: cancel"),
        ):
            await pilot.press(*keys)
            await settle(app, pilot)
            dialog = app.screen.query_one(".dialog")
            assert dialog.region.right <= 50 and dialog.region.bottom <= 15
            lines = screen_lines(app)
            assert any(shown_keys in line for line in lines), lines
            assert "scroll)" in "".join(lines) or keys != ("escape", "question_mark")  # help's title
            assert all(line.rstrip().endswith("█") for line in lines if line.startswith("█"))
        await pilot.press("escape", "X")  # buttons: their keys line, broken into "y/" "⏎", is left out
        await settle(app, pilot)
        lines = screen_lines(app)
        assert any("Fork" in line and "Cancel" in line for line in lines)
        assert not any(line.strip("█ ").startswith(("y/", "⏎")) for line in lines), lines


async def test_at_40_by_12_a_dialog_keeps_its_question_buttons_and_keys(demo):
    """At 40x12 the summary dialog's three-row buttons pushed its question (three rows quoting
    the entry) out of sight, and history's keys line lost "Esc closes" (QA): on a low
    terminal a question takes one row and buttons one each, and a keys line wraps."""
    app = make_app(demo)
    async with app.run_test(size=(40, 12)) as pilot:
        await settle(app, pilot)
        await put_cursor(app, pilot, "3a7c4feb")
        await pilot.press("s")
        await settle(app, pilot)
        lines = screen_lines(app)
        title = lines[1]
        assert title.startswith("█ Move the leaf to 3a7c4df8, before") and title.rstrip("█ ").endswith("…")
        assert any("No summary" in line for line in lines)
        assert any("Move" in line and "Cancel" in line for line in lines[2:]), lines
        await pilot.press("escape", "H")
        await settle(app, pilot)
        lines = screen_lines(app)
        assert any("Esc closes" in line for line in lines), lines


async def test_a_long_comparison_is_drawn_a_screen_at_a_time(tmp_path):
    """Comparing a deep session's leaf with its start lists every message of the leaf's
    context: as one `Static` that froze the app for 40-60 s at 72,726 lines, and again on a
    resize. Only the lines on screen are made, cut to the width there is."""
    path = tmp_path / "long.jsonl"
    with Session(JsonlStorage.create(path, cwd="/p")) as s:
        first = s.append_message(U("the start " + "x" * 300))
        for k in range(1500):
            s.append_message(A(f"answer {k} " + "y" * 300))
            s.append_message(U(f"question {k} " + "z" * 300))
    app = make_app(path)
    async with app.run_test(size=(160, 40)) as pilot:
        await settle(app, pilot)
        app.browser.action_compare()  # the leaf marked
        await put_cursor(app, pilot, first)
        await pilot.press("d")
        await settle(app, pilot)
        view = app.screen.query_one(LinesView)
        assert len(view.rows) == 3000  # the leaf's tail: a row per message
        assert 0 < len(view._made) <= view.size.height
        await pilot.press("end")
        await settle(app, pilot)
        bottom = [line for line in screen_lines(app) if "question 1499" in line]
        assert len(bottom) == 1 and "z…" in bottom[0]  # cut to the view's width, not wrapped
        await pilot.resize_terminal(80, 24)
        await settle(app, pilot)
        shown = screen_lines(app)
        assert sum("-user: question" in line or "-assistant: answer" in line for line in shown) >= 4
        assert all(len(line.rstrip()) <= 80 for line in shown)
        # The head scrolls with the listing: held above it, its lines left 4 rows at 80x24 (QA)
        await pilot.press("home")
        await settle(app, pilot)
        assert any("--- " in line for line in screen_lines(app))
        keys = str(app.screen.query_one("#lines-keys").render())
        assert "Home End" in keys and f"of {view.line_count:,}" in keys and "lines 1–" in keys
        await pilot.press("pagedown")
        await settle(app, pilot)
        shown = screen_lines(app)
        assert not any("--- " in line for line in shown)
        assert sum("-user: question" in line or "-assistant: answer" in line for line in shown) >= 12
        # End shows the last line, and the count says so: the keys line grew to two rows on a
        # long count after End had scrolled, and took the last line out of sight (QA)
        await pilot.press("end")
        await settle(app, pilot)
        assert any("question 1499" in line for line in screen_lines(app))
        keys = str(app.screen.query_one("#lines-keys").render())
        assert keys.startswith("lines ") and f"–{view.line_count:,} of {view.line_count:,}" in keys
        # Closed, it lets the messages go at once: its widgets refer to each other, and held
        # them until the collector's rare full pass (a deep session's app grew by 200 MB per
        # comparison, QA).
        rows = view.rows
        gc.disable()
        try:
            await pilot.press("escape")
            await settle(app, pilot)
            assert not isinstance(app.screen, LinesScreen)
            assert sys.getrefcount(rows) == 2  # `rows` here, and the call's argument
        finally:
            gc.enable()


async def test_export_html_from_the_palette_writes_next_to_the_session(demo):
    app = make_app(demo)
    async with app.run_test(size=(120, 40)) as pilot:
        await settle(app, pilot)
        command = next(c for c in app.get_system_commands(app.screen) if c.title == "Export as HTML")
        command.callback()
        assert status(app).startswith("Exporting the path to ")  # in a thread: seconds at 100k
        await settle(app, pilot)
        out = demo.with_name(f"demo.{app.session.leaf_id}.html")
        assert out.exists() and b"<html" in out.read_bytes()[:500].lower()
        assert status(app) == f"Exported to {out}"
        command.callback()  # again: asked first, as the CLI refuses without --force
        await settle(app, pilot)
        assert isinstance(app.screen, ConfirmScreen) and out.name in app.screen.question
        await pilot.press("y")
        await settle(app, pilot)
        assert status(app) == f"Exported to {out} (replaced)"


async def test_export_from_the_palette_over_a_directory_says_so_without_asking(demo):
    app = make_app(demo)
    async with app.run_test(size=(120, 40)) as pilot:
        await settle(app, pilot)
        taken = demo.with_name(f"demo.{app.session.leaf_id}.html")
        taken.mkdir()
        command = next(c for c in app.get_system_commands(app.screen) if c.title == "Export as HTML")
        command.callback()
        await settle(app, pilot)
        assert app.screen is app.browser and taken.is_dir()
        assert any("is a directory" in n.message for n in app._notifications)


async def test_export_from_the_palette_never_replaces_a_file_unasked(demo):
    """A file of the export's name that the user wrote was replaced without a word, and the
    status line called it "the last export of it" (QA)."""
    app = make_app(demo)
    async with app.run_test(size=(120, 40)) as pilot:
        await settle(app, pilot)
        mine = demo.with_name(f"demo.{app.session.leaf_id}.md")
        mine.write_text("USER FILE, not an export\n")
        command = next(c for c in app.get_system_commands(app.screen) if c.title == "Export as Markdown")
        command.callback()
        await settle(app, pilot)
        assert isinstance(app.screen, ConfirmScreen)
        await pilot.press("n")
        await settle(app, pilot)
        assert mine.read_text() == "USER FILE, not an export\n"
        assert status(app) == f"Not exported: {mine.name} is left as it was"


async def test_archive_a_dead_branch_to_one_stub_row_and_back(demo):
    app = make_app(demo)
    async with app.run_test(size=(120, 40)) as pilot:
        await settle(app, pilot)
        tree = app.browser.query_one("SessionTreeView")
        before = len(tree.outline)
        await put_cursor(app, pilot, "3a7c1764")  # a side branch: the leaf is elsewhere
        side = app.session.tree.pos["3a7c1764"]
        assert app.session.tree.leaf not in _subtree(app.session.tree, side)
        await pilot.press("A")
        await settle(app, pilot)
        assert side in tree.archived and len(tree.outline) < before
        row = tree.outline.row_of[side]
        assert "archived · ▸" in tree.render_line(row - int(tree.scroll_offset.y)).text
        await pilot.press("5")  # "all" shows it all, its first row still marked (QA: drawn as any)
        await settle(app, pilot)
        row = tree.outline.row_of[side]
        assert "archived · Fix it by always parsing" in tree.render_line(row - int(tree.scroll_offset.y)).text
        index = app.session.tree
        inside = max(_subtree(index, side))  # its last entry, an assistant's answer
        await put_cursor(app, pilot, index.ids[inside])
        await pilot.press("enter")  # the leaf moves into the archived branch: said (QA)
        await settle(app, pilot)
        said = status(app)
        assert said.startswith(f"Leaf moved to {index.ids[inside]}") and "in an archived branch" in said
        await pilot.press("b")  # and back
        await settle(app, pilot)
        assert "archived" not in status(app)
        assert all(tree.outline.row_of[j] >= 0 for j in _subtree(app.session.tree, side))
        await pilot.press("1")
        await put_cursor(app, pilot, "3a7c1764")
        await pilot.press("A")  # unarchive
        await settle(app, pilot)
        assert len(tree.outline) == before and not tree.archived
        await pilot.press("a", "A")  # on the active path: refused, nothing written
        await settle(app, pilot)
        assert any("active path" in str(n.message) for n in app._notifications)


def _subtree(index, i: int) -> set[int]:
    out, stack = set(), [i]
    while stack:
        j = stack.pop()
        out.add(j)
        c = index.first_child[j]
        while c != -1:
            stack.append(c)
            c = index.next_sibling[c]
    return out


async def test_the_keys_under_a_dialog_are_its_own(demo):
    """The browser's footer stayed on the bottom row under every dialog, listing keys that do
    not work there; the dialog's own keys line says which do."""
    app = make_app(demo)
    async with app.run_test(size=(80, 24)) as pilot:
        await settle(app, pilot)
        footer = app.browser.query_one("Footer")
        assert "Move" in screen_lines(app)[-1]
        await pilot.press("c")
        await pilot.pause()
        assert isinstance(app.screen, ChoiceScreen) and not footer.visible
        assert "Move" not in screen_lines(app)[-1]
        await pilot.press("escape")
        await pilot.pause()
        assert footer.visible and "Move" in screen_lines(app)[-1]


async def test_d_twice_on_one_entry_clears_its_mark_and_colon_goes_to_an_id(demo):
    """`d` again on the marked entry said nothing and kept the mark; going to an id was in the
    palette alone and said nothing either."""
    app = make_app(demo)
    async with app.run_test(size=(80, 24)) as pilot:
        await settle(app, pilot)
        await put_cursor(app, pilot, "3a7c137e")
        await pilot.press("d", "d")
        assert status(app) == "Mark on 3a7c137e cleared" and app.browser._compare_mark is None
        await pilot.press("colon", *"3a7c17", "enter")
        await settle(app, pilot)
        assert cursor_id(app) == "3a7c1764" and status(app) == "At 3a7c1764"
        await pilot.press("colon", *"3a7c", "enter")  # the start of every id here
        await settle(app, pilot)
        # The prompt stays open with the text kept, to be given more of (it closed, and the
        # next letters typed went to the tree: QA).
        assert isinstance(app.screen, TextPrompt) and app.screen.query_one(Input).value == "3a7c"
        assert "give more of it" in str(app.screen.query_one("#prompt-problem").render())
        await pilot.press("1")  # typing on: the problem was about the text before
        assert not app.screen.query_one("#prompt-problem").display
        await pilot.press("backspace")
        await pilot.press(*"137", "enter")
        await settle(app, pilot)
        assert app.screen is app.browser and cursor_id(app) == "3a7c137e"


@pytest.mark.skipif(not sys.platform.startswith("linux"), reason="glibc's malloc_trim")
def test_freed_memory_is_given_back_on_glibc():
    """The heap is handed back through glibc's `malloc_trim`, in a thread of its own."""
    from sessiontree.tui import memory

    assert memory.give_back()
    memory.give_back_in_background()


def chain_file(path: Path, messages: list[tuple[str, str]]) -> Path:
    """A session file of user messages, each the child of the one before, with the given ids
    (ids the library would never make: 300 characters, a `/`)."""
    ts = "2026-01-01T00:00:00.000Z"
    lines = [{"type": "session", "version": 3, "id": "s1", "timestamp": ts, "cwd": "/p"}]
    parent = None
    for k, (eid, text) in enumerate(messages):
        message = {"role": "user", "content": text, "timestamp": k + 1}
        lines.append({"type": "message", "id": eid, "parentId": parent, "timestamp": ts, "message": message})
        parent = eid
    path.write_text("".join(json.dumps(line) + "\n" for line in lines))
    return path


async def test_export_at_an_entry_with_a_long_or_pathlike_id_names_a_file_next_to_the_session(tmp_path):
    """The name was `{file}.{entry id}.html`: a 300-character id made a name past the system's
    limit and the app ended in a traceback (exit status 0); a `/` in it named another
    directory (QA). The id is made safe and cut, with a hash of the whole."""
    weird = "../" + "x" * 300
    path = chain_file(tmp_path / "s.jsonl", [("u1", "question"), (weird, "with a long id")])
    app = make_app(path)
    async with app.run_test(size=(120, 40)) as pilot:
        await settle(app, pilot)
        assert app.session.leaf_id == weird
        command = next(c for c in app.get_system_commands(app.screen) if c.title == "Export as HTML")
        command.callback()
        await settle(app, pilot)
        for _ in range(100):
            if status(app).startswith("Exported to"):
                break
            await pilot.pause(0.05)
        written = [p for p in tmp_path.iterdir() if p.suffix == ".html"]
        assert len(written) == 1 and status(app) == f"Exported to {written[0]}"
        name = written[0].name
        assert name.startswith("s.___xxx") and len(name) < 80 and "/" not in name
        assert b"with a long id" in written[0].read_bytes()


async def test_copy_at_an_entry_with_a_long_id_keeps_its_keys_at_60_by_20(tmp_path):
    """The copy dialog's title held a 300-character id: six rows at 60x20, and its keys line
    ("1-9 or Enter: choose · Esc: cancel") was cut off (QA)."""
    weird = "y" * 300
    path = chain_file(tmp_path / "s.jsonl", [(weird, "a question")])
    app = make_app(path)
    async with app.run_test(size=(60, 20)) as pilot:
        await settle(app, pilot)
        await pilot.press("c")
        await settle(app, pilot)
        assert isinstance(app.screen, ChoiceScreen)
        shown = "\n".join(screen_lines(app))
        assert "Esc: cancel" in shown and "y" * 60 not in shown


async def test_the_summary_dialog_names_where_the_leaf_goes_for_a_user_message(demo):
    """`s` on a user message said "Move the leaf to 3a7c09bf", the message; the leaf went to
    3a7c07cc, its parent, as Pi's navigation puts it, to send the message again (QA)."""
    app = make_app(demo)
    async with app.run_test(size=(120, 30)) as pilot:
        await settle(app, pilot)
        await put_cursor(app, pilot, "3a7c09bf")
        assert app.session.navigation_target("3a7c09bf")[0] == "3a7c07cc"
        await pilot.press("s")
        await settle(app, pilot)
        said = "\n".join(screen_lines(app))
        assert "Move the leaf to 3a7c07cc, before 3a7c09bf — " in said, said
        await pilot.press("ctrl+s")  # no summary typed: the move alone
        await settle(app, pilot)
        assert app.session.leaf_id == "3a7c07cc"


async def test_a_page_served_read_only_writes_no_file(tmp_path):
    """`serve --read-only` never wrote to the session, but a fork, an export or an upgrade from
    the page wrote files next to it on the server, made by whoever reached the page."""
    from helpers import PI_FIXTURES
    from sessiontree.tui.launch import build_app

    for name in ("demo.jsonl", "v1.jsonl"):
        folder = tmp_path / name.split(".")[0]
        folder.mkdir()
        source = PI_FIXTURES / "large-session.jsonl" if name == "v1.jsonl" else None
        path = folder / name
        if source is None:
            with Session(JsonlStorage.create(path, cwd="/p")) as s:
                s.append_message(U("hello"))
                s.append_message(A("hi"))
        else:
            path.write_bytes(source.read_bytes())
        before = {p.name: p.read_bytes() for p in folder.iterdir()}
        app = build_app(str(path), read_only=True, only=True)
        async with app.run_test(size=(120, 30), notifications=True) as pilot:
            await settle(app, pilot)
            await pilot.press("X")
            await settle(app, pilot)
            app.browser.export_here("html")
            await pilot.press("U")
            await settle(app, pilot)
            said = [str(n.message) for n in app._notifications]
            assert said.count("This page is served read-only: it writes no file") == 2, said
            if name == "v1.jsonl":
                assert status(app) == "Not upgraded: the page is served read-only"
        assert {p.name: p.read_bytes() for p in folder.iterdir()} == before
