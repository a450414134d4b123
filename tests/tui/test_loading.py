"""`sessiontree FILE` paints at once: the loading screen shows while the session is indexed,
then the browser replaces it; a failed open is a message, and quitting during the open stops
it cleanly."""

from __future__ import annotations

import asyncio
import inspect
import itertools
import socket
import time

import orjson
import pytest

from harness.pilot import settle
from sessiontree.outline import Filter
from sessiontree.tui.app import SessionTreeApp
from sessiontree.tui.browser import BrowserScreen
from sessiontree.tui.help import HelpScreen
from sessiontree.tui.launch import LOADING_MIN, build_app
from sessiontree.tui.loading import LoadingScreen
from sessiontree.tui.tree_view import SessionTreeView

SIZE = (100, 30)


def write_big(path, n: int = 60_000) -> None:
    header = {
        "type": "session",
        "version": 3,
        "id": "big",
        "timestamp": "2026-12-03T10:00:00.000Z",
        "cwd": "/p",
    }
    lines = [orjson.dumps(header)]
    parent = None
    for k in range(n):
        eid = f"e{k:07d}"
        message = {"role": "user", "content": f"turn {k} " + "x" * 600, "timestamp": k}
        entry = {"type": "message", "id": eid, "parentId": parent, "timestamp": "2026-12-03T10:00:00.000Z"}
        lines.append(orjson.dumps({**entry, "message": message}))
        parent = eid
    path.write_bytes(b"\n".join(lines) + b"\n")


async def test_the_loading_screen_paints_first_then_the_browser_takes_over(tmp_path):
    big = tmp_path / "big.jsonl"
    write_big(big)
    seen: list[tuple[int, int]] = []
    advance = LoadingScreen.advance

    def record(self, done: int, total: int) -> None:
        seen.append((done, total))
        advance(self, done, total)

    LoadingScreen.advance = record  # type: ignore[method-assign]
    try:
        app = build_app(str(big))
        async with app.run_test(size=SIZE) as pilot:
            assert isinstance(app.screen, LoadingScreen)  # painted before the file was read
            await settle(app, pilot)
            assert isinstance(app.screen, BrowserScreen)
            assert app.session is not None and app.session.entry_count() == 60_000
    finally:
        LoadingScreen.advance = advance  # type: ignore[method-assign]
    assert seen and seen[-1][1] == big.stat().st_size  # bytes of the whole file
    assert all(a <= b for (a, _), (b, _) in itertools.pairwise(seen))


async def test_a_file_that_is_not_a_session_says_so_and_q_quits(tmp_path):
    bad = tmp_path / "notes.jsonl"
    bad.write_text("these are my notes, not a session\n" * 200_000)  # big: behind the loading screen
    app = build_app(str(bad))
    async with app.run_test(size=SIZE) as pilot:
        await settle(app, pilot)
        await pilot.pause(0.2)
        screen = app.screen
        assert isinstance(screen, LoadingScreen)
        shown = str(screen.query_one("#loading-status").render())
        assert "not" in shown.lower() or "session" in shown.lower()  # the reason, in one line
        assert "Cannot open notes.jsonl" in str(screen.query_one("#loading-title").render())
        # it will not open: "other keys act once it is open" promised what never came (QA)
        assert str(screen.query_one("#loading-keys").render()) == "q or Esc quits"
        await pilot.press("q")
        await pilot.pause()
    assert not app.is_running


@pytest.mark.parametrize("key", ["q", "escape", "ctrl+c"])
async def test_quitting_while_the_session_opens_stops_cleanly(tmp_path, key):
    """Ctrl+C did nothing there: Textual's own says "press q to quit", which this screen did
    not show (QA)."""
    big = tmp_path / "big.jsonl"
    write_big(big)
    app = build_app(str(big))
    async with app.run_test(size=SIZE) as pilot:
        assert isinstance(app.screen, LoadingScreen)
        await pilot.press(key)
        await pilot.pause()
        assert app._exit  # quitting now, not when the test ends
    assert not app.is_running
    assert app.browser is None  # the session was never shown (and what was opened is closed)


async def test_a_session_that_opens_at_once_replaces_the_loading_screen_without_errors(tmp_path):
    """A session that opens within milliseconds takes the loading screen's place before it has
    finished mounting; nothing it mounted may fail afterwards (Textual's Header did, in a task)."""
    session = tmp_path / "quick.jsonl"
    write_big(session, n=7_000)  # just above the size that gets a loading screen
    assert session.stat().st_size >= LOADING_MIN
    for _ in range(5):
        app = build_app(str(session))
        async with app.run_test(size=SIZE) as pilot:
            await settle(app, pilot)
            assert isinstance(app.screen, BrowserScreen)
        assert app.return_code in (0, None)


async def test_a_small_session_opens_before_the_app_starts(demo):
    app = build_app(str(demo))
    assert app.session is not None  # no loading screen to paint: the tree comes up first
    async with app.run_test(size=SIZE) as pilot:
        assert isinstance(app.screen, BrowserScreen)
        await settle(app, pilot)


def held_open(tmp_path, monkeypatch) -> tuple[SessionTreeApp, asyncio.Event]:
    """The app opening a big file, whose open is done only once the event is set: keys are
    typed while the loading screen is up, whatever the machine's speed."""
    big = tmp_path / "big.jsonl"
    write_big(big, 20_000)
    gate = asyncio.Event()
    opened = SessionTreeApp._opened

    async def held(self, *args):
        await gate.wait()
        result = opened(self, *args)
        if inspect.isawaitable(result):
            await result

    monkeypatch.setattr(SessionTreeApp, "_opened", held)
    return build_app(str(big)), gate


async def test_keys_typed_while_the_session_opens_act_once_it_is_open(tmp_path, monkeypatch):
    """They were dropped by the loading screen (and with them a served page's first keys);
    `?` opened help over the loading screen, under which the browser then came up."""
    app, gate = held_open(tmp_path, monkeypatch)
    async with app.run_test(size=SIZE) as pilot:
        await pilot.press("f", "question_mark")
        await pilot.pause(0.2)
        assert isinstance(app.screen, LoadingScreen)  # still opening: the keys wait
        gate.set()
        await settle(app, pilot)
        assert isinstance(app.screen, HelpScreen)  # `?`, over the browser
        assert app.browser is not None and app.screen_stack[-2] is app.browser
        assert app.browser.query_one(SessionTreeView).filter is Filter.NO_TOOLS  # `f` before it


async def test_a_search_typed_while_the_session_opens_runs_once_it_is_open(tmp_path, monkeypatch):
    """`/`, the words and Enter typed during the open: the box opened with the words, but the
    Enter was lost (QA): the keys are replayed one at a time, each handled before the next."""
    app, gate = held_open(tmp_path, monkeypatch)
    async with app.run_test(size=SIZE) as pilot:
        await pilot.press("slash", *"turn 1999", "enter")
        await pilot.pause(0.2)
        gate.set()
        for _ in range(50):
            await pilot.pause(0.1)
            if app.browser is not None and app.browser._matches:
                break
        await settle(app, pilot)
        assert len(app.browser._matches) == 12  # turn 1999, 11999, 19990-19999
        assert app.screen is app.browser and app.focused is app.browser.query_one(SessionTreeView)


async def test_a_database_address_paints_first_and_q_does_not_wait_for_the_server(tmp_path):
    """A PostgreSQL address was opened before the app started: a blank terminal until the
    server answered (10 s for one that never does), keys echoed raw; and once the loading
    screen showed, `q` still waited for the connection's timeout (asyncio waits for its
    executor's threads when the app ends)."""
    with socket.socket() as silent:  # a server that accepts and never answers
        silent.bind(("127.0.0.1", 0))
        silent.listen(5)
        port = silent.getsockname()[1]
        app = build_app(f"postgresql://me:SECRET@127.0.0.1:{port}/db#abc")
        start = time.monotonic()
        async with app.run_test(size=SIZE) as pilot:
            await pilot.pause(0.3)
            assert isinstance(app.screen, LoadingScreen) and app.still_opening
            title = str(app.screen.query_one("#loading-title").render())
            assert f"postgresql://me:***@127.0.0.1:{port}/db#abc" in title and "SECRET" not in title
            await pilot.press("q")
            await pilot.pause()
        assert not app.is_running
        assert time.monotonic() - start < 5  # the connection's own timeout is 10 s
