"""What a filter keeps between builds is built while nobody types, not on its first key."""

from __future__ import annotations

import threading
import time
from collections import Counter

from harness.pilot import make_app, settle
from harness.retries import write_retries
from sessiontree import layout
from sessiontree import outline as outline_module
from sessiontree.outline import Filter
from sessiontree.tui import collector
from sessiontree.tui.tree_view import SessionTreeView


def spy(monkeypatch, module, name: str, calls: Counter) -> None:
    """Count the calls to `module.name`, which still does its work."""
    real = getattr(module, name)

    def counted(*args, **kwargs):
        calls[name] += 1
        return real(*args, **kwargs)

    monkeypatch.setattr(module, name, counted)


async def test_filters_are_prepared_between_keys_and_their_first_use_builds_nothing(tmp_path, monkeypatch):
    path = tmp_path / "retries.jsonl"
    write_retries(path, retries=300, nested=40).close()  # 687 runs: the array layout with this
    monkeypatch.setattr(outline_module, "VECTOR_MIN", 0)
    built: Counter = Counter()
    spy(monkeypatch, outline_module, "_type_mask", built)  # a filter's mask
    spy(monkeypatch, layout, "_shown_before", built)  # shown entries before each position
    spy(monkeypatch, layout, "_nearest", built)  # each run's nearest shown ancestor
    monkeypatch.setattr(collector, "QUIET", 0.6)  # keys below come every ~0.05 s
    app = make_app(path)
    async with app.run_test(size=(120, 30)) as pilot:
        await settle(app, pilot)
        tree = app.browser.query_one(SessionTreeView)
        await pilot.press("j")  # input from here on: nothing prepared until it stops
        # The default filter's mask, built to open; and on a machine busy with other tests,
        # which may settle past `QUIET`, a filter a tick prepared before this key (CI once
        # counted 2 below, not 3).
        early = built["_type_mask"]
        built.clear()
        typing_until = time.monotonic() + 1.5
        while time.monotonic() < typing_until:
            await pilot.press("j")
            await pilot.pause(0.05)
        assert not built
        await pilot.pause(0.6)  # quiet from here: one filter per tick, then the warm-up
        await until_warmed(tree, pilot)  # waits for ticks a machine busy with other tests skips
        # every filter but "labeled-only", each once
        assert early + built["_type_mask"] == 4
        built.clear()
        for key in "23451":
            await pilot.press(key)
            await pilot.pause()
        assert tree.filter is Filter.DEFAULT
        assert not built


async def test_a_tick_while_the_tree_is_gone_prepares_nothing(tmp_path, monkeypatch):
    """The app's timer ticks while the browser's widgets are mounted or torn down (at exit it
    once raised NoMatches from the timer)."""
    path = tmp_path / "retries.jsonl"
    write_retries(path, retries=30, nested=4).close()
    monkeypatch.setattr(collector, "QUIET", 0.0)
    app = make_app(path)
    async with app.run_test(size=(80, 24)) as pilot:
        await settle(app, pilot)
        await app.browser.query_one(SessionTreeView).remove()
        assert app.browser.prepare() is False
        app._between_keys()  # what the timer calls: no exception


def decoded_here(app, monkeypatch) -> list[int]:
    """The positions of the entries the app decodes from now on on the UI thread, where rows
    are drawn (a worker's decoding is not counted)."""
    drawn: list[int] = []
    session = app.session
    real = session.entry_at

    def counted(position: int):
        if threading.current_thread() is threading.main_thread():
            drawn.append(position)
        return real(position)

    monkeypatch.setattr(session, "entry_at", counted)
    return drawn


async def until_warmed(tree: SessionTreeView, pilot) -> None:
    for _ in range(200):  # ticks come every `CHECK_EVERY`; a busy machine may skip some
        if tree.prepared and tree.warmed:
            break
        await pilot.pause(0.05)
    for _ in range(20):  # the pages above and below the screen, read ahead a step at a time
        if not tree.prepare():
            break
    assert not tree.prepare()  # nothing left


async def test_the_page_above_the_screen_is_read_while_nobody_types(tmp_path, monkeypatch):
    """A page key draws a screen of rows new to it: decoding their entries was half the
    tree's part of that frame on a deep 1M-entry file, drawing them the other half. Both are
    done ahead: the page draws only the rows the cursor leaves and lands on."""
    path = tmp_path / "retries.jsonl"
    write_retries(path, retries=100, nested=4).close()
    monkeypatch.setattr(collector, "QUIET", 0.2)
    app = make_app(path)
    async with app.run_test(size=(100, 24)) as pilot:
        await settle(app, pilot)
        tree = app.browser.query_one(SessionTreeView)
        assert len(tree.outline) > 3 * tree.scrollable_content_region.height
        await until_warmed(tree, pilot)
        drawn = decoded_here(app, monkeypatch)
        strips: list[object] = []
        draw = tree._draw
        monkeypatch.setattr(tree, "_draw", lambda look: strips.append(look) or draw(look))
        top = int(tree.scroll_offset.y)
        await pilot.press("pageup", "pageup")  # the first takes the cursor to the screen's top
        await pilot.pause()
        assert int(tree.scroll_offset.y) < top and not drawn
        assert len(strips) <= 4, strips  # the cursor's rows: left, landed on, twice


async def test_keys_after_a_quiet_spell_start_from_the_rows_on_screen(tmp_path, monkeypatch):
    """Laying the other filters out ahead leaves the layout of the rows on screen as the one
    the next key starts from (else a leaf move lays the whole tree out anew), and what the
    next keys read from those rows is found before they are pressed: the side branches `z`
    folds and the flags a leaf move's layout takes from the last one (`layout._relay`)."""
    path = tmp_path / "retries.jsonl"
    write_retries(path, retries=300, nested=40).close()
    monkeypatch.setattr(outline_module, "VECTOR_MIN", 0)
    monkeypatch.setattr(collector, "QUIET", 0.2)
    app = make_app(path)
    async with app.run_test(size=(120, 30)) as pilot:
        await settle(app, pilot)
        tree = app.browser.query_one(SessionTreeView)
        await pilot.press("3")  # user messages only: the other filters draw more runs
        await until_warmed(tree, pilot)  # four filters, then the warm-up, a tick each
        monkeypatch.setattr(collector, "QUIET", 60.0)  # nothing more ahead: the key alone counts
        in_key: Counter = Counter()
        spy(monkeypatch, layout, "_first_shown", in_key)  # finds the side branches' first rows
        spy(monkeypatch, layout._Shape, "groups", in_key)  # the first step of laying out anew
        flags = layout._Laid.flags

        def derived(laid):
            if laid.rot_ok is None:
                in_key["flags derived"] += 1
            return flags(laid)

        monkeypatch.setattr(layout._Laid, "flags", derived)
        tree.set_cursor(tree.cursor_row - 2)
        leaf = tree.session.tree.leaf
        await pilot.press("enter")
        await pilot.pause()
        assert tree.session.tree.leaf != leaf
        assert not in_key
        monkeypatch.undo()  # the spies above, and VECTOR_MIN and QUIET: set them again
        monkeypatch.setattr(outline_module, "VECTOR_MIN", 0)
        monkeypatch.setattr(collector, "QUIET", 0.2)
        await until_warmed(tree, pilot)
        monkeypatch.setattr(collector, "QUIET", 60.0)
        spy(monkeypatch, layout, "_first_shown", in_key)
        await pilot.press("z")
        await pilot.pause()
        assert tree.folded
        assert not in_key


async def test_pages_are_read_soon_after_a_page_key(tmp_path, monkeypatch):
    """Page keys half a second apart came before the idle work's turn (after `QUIET`), so
    each decoded and drew a whole page in its frame: the pages around the screen are read
    soon after each key's frame, whatever the quiet spell."""
    path = tmp_path / "retries.jsonl"
    write_retries(path, retries=100, nested=4).close()
    monkeypatch.setattr(collector, "QUIET", 60.0)  # the idle work never comes
    app = make_app(path)
    async with app.run_test(size=(100, 24)) as pilot:
        await settle(app, pilot)
        tree = app.browser.query_one(SessionTreeView)
        drawn = decoded_here(app, monkeypatch)
        await pilot.press("pageup", "pageup")  # the first takes the cursor to the screen's top
        await pilot.pause(0.6)
        assert not tree.read_ahead()  # read, all of it, by the app
        top, read = int(tree.scroll_offset.y), len(drawn)
        await pilot.press("pageup")
        await pilot.pause()
        assert int(tree.scroll_offset.y) < top and len(drawn) == read


async def test_a_fold_is_laid_out_once_while_nobody_types(tmp_path, monkeypatch):
    """The first fold of a session asked the system for the memory of arrays no layout had
    needed yet (18 ms of page faults on the deep 1M-entry tree, against 3 ms for the next): a
    fold is laid out once ahead, and its result dropped."""
    path = tmp_path / "retries.jsonl"
    write_retries(path, retries=300, nested=40).close()
    monkeypatch.setattr(outline_module, "VECTOR_MIN", 0)  # the array layout, as on big trees
    monkeypatch.setattr(collector, "QUIET", 0.2)
    tried: list[int] = []
    real = layout.lay_out

    def spied(index, runs, vis, folded, leaf, *, trial=False):
        if trial and len(folded):
            tried.append(len(folded))
        return real(index, runs, vis, folded, leaf, trial=trial)

    monkeypatch.setattr(layout, "lay_out", spied)  # imported where it is used
    app = make_app(path)
    async with app.run_test(size=(120, 30)) as pilot:
        await settle(app, pilot)
        tree = app.browser.query_one(SessionTreeView)
        await until_warmed(tree, pilot)
        assert tried == [1] and not tree.folded  # one fold, tried and dropped
