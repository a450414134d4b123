"""Driving the browser under `App.run_test()`: the helpers every TUI test uses."""

from __future__ import annotations

import os
from pathlib import Path

from rich.console import Console
from textual.worker import WorkerCancelled

from sessiontree.outline import Filter
from sessiontree.tui.app import SessionTreeApp
from sessiontree.tui.launch import open_for_browsing
from sessiontree.tui.loading import LoadingScreen
from sessiontree.tui.notices import StatusLine
from sessiontree.tui.preview import PreviewView
from sessiontree.tui.preview_pane import PREVIEW_DELAY, PreviewPane
from sessiontree.tui.tree_view import SessionTreeView

# Themes for comparing what the app draws with what Textual would: light and dark, an ANSI theme
# (Textual's ANSI line filter off), and one under `NO_COLOR` (its monochrome filter on).
THEMES = ["textual-dark", "textual-light", "ansi-dark", "monokai", "nord+NO_COLOR"]


def use_theme(spec: str, monkeypatch) -> str:
    """The theme named by a `THEMES` entry, with `NO_COLOR` set for the app about to be made
    when the entry asks for it."""
    theme, _, no_color = spec.partition("+")
    if no_color:
        monkeypatch.setenv("NO_COLOR", "1")
    return theme


def screen_lines(app) -> list[str]:
    """What the terminal shows, line by line."""
    with open(os.devnull, "w") as sink:
        console = Console(width=app.size.width, height=app.size.height, record=True, file=sink)
        console.print(app.screen._compositor.render_update(full=True))
    return console.export_text().splitlines()


def rows(app) -> list[str]:
    tree = app.browser.query_one(SessionTreeView)
    return [tree.render_line(y).text for y in range(tree.size.height)]


def cursor_id(app) -> str:
    return app.browser.query_one(SessionTreeView).current_target().entry_id


async def settle(app, pilot) -> None:
    for _ in range(500):  # a session opened behind the loading screen: wait for the browser
        if not isinstance(app.screen, LoadingScreen):
            break
        await pilot.pause(0.01)
    await pilot.pause(PREVIEW_DELAY + 0.05)  # let the preview's debounce timer fire
    for _ in range(100):  # and a rebuild due for turns live follow brought (at most 0.5 s away)
        if all(p._follow_timer is None for p in app.screen.query(PreviewPane)):
            break
        await pilot.pause(0.02)
    for _ in range(100):
        try:
            await app.workers.wait_for_complete()
            break
        except WorkerCancelled:  # a newer request replaced it (an exclusive group): wait for that
            await pilot.pause(0.01)
    await pilot.pause()


async def settle_picture(pilot) -> None:
    """Until two pictures in a row agree: the preview fills in over a few deliveries from its
    worker, and its scrollbar follows one refresh later (snapshots and screenshots)."""
    await pilot.pause(PREVIEW_DELAY + 0.05)  # let the preview's debounce timer fire
    before = None
    for _ in range(20):
        await pilot.app.workers.wait_for_complete()
        await pilot.pause(0.1)
        now = pilot.app.export_screenshot()
        if now == before:
            return
        before = now


def preview_text(app) -> str:
    return app.browser.query_one(PreviewView).plain_text()


def status(app) -> str:
    """What the browser's status line says (`tui/notices.py`)."""
    return app.browser.query_one(StatusLine).message


def make_app(path: Path, **kw) -> SessionTreeApp:
    session, note = open_for_browsing(path, read_only=kw.pop("read_only", False))
    return SessionTreeApp(session, note=note, **kw)


def row_of(app, entry_id: str) -> int:
    tree = app.browser.query_one(SessionTreeView)
    return tree.outline.row_for(app.session.tree.pos[entry_id])


async def put_cursor(app, pilot, entry_id: str) -> None:
    """The cursor on `entry_id`; the "all" filter first if the current one hides the entry."""
    tree = app.browser.query_one(SessionTreeView)
    if tree.outline.row_of[app.session.tree.pos[entry_id]] < 0:
        app.browser.action_set_filter(Filter.ALL.value)
    tree.set_cursor(row_of(app, entry_id))
    await settle(app, pilot)


async def until(pilot, ready, seconds: float = 4.0) -> None:
    """Pause until `ready()` is true (a worker's result delivered), or fail."""
    for _ in range(int(seconds / 0.02)):
        if ready():
            return
        await pilot.pause(0.02)
    raise AssertionError("timed out")
