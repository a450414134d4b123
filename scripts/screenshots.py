"""Regenerate screenshots/*.svg (and .png where cairosvg is installed) from the bundled demo.

    python scripts/screenshots.py

Each picture is the real app, driven headless with Textual's pilot, on a private copy of the
demo session; nothing here is drawn by hand.
"""

from __future__ import annotations

import asyncio
import os
import shutil
import sys
import tempfile
import time
from collections.abc import Awaitable, Callable
from importlib import resources
from pathlib import Path

from sessiontree import open_session

sys.path.insert(0, str(Path(__file__).resolve().parent.parent / "tests"))
from harness.pilot import settle_picture
from sessiontree.tui.app import SessionTreeApp
from sessiontree.tui.tree_view import SessionTreeView

OUT = Path(__file__).resolve().parent.parent / "screenshots"
SIZE = (132, 40)
PICKER_TIMES = (1773480600, 1773478800)  # 2026-03-14 09:30 and 09:00 UTC

Steps = Callable[[object], Awaitable[None]]


async def settle(pilot) -> None:
    await settle_picture(pilot)


async def go_to(pilot, entry_id: str) -> None:
    tree = pilot.app.browser.query_one(SessionTreeView)
    tree.go_to_position(pilot.app.session.tree.pos[entry_id])
    await settle(pilot)


async def browser(pilot) -> None:
    await go_to(pilot, "3a7c137e")


async def everything(pilot) -> None:
    await pilot.press("5")  # the "all" filter
    await go_to(pilot, "3a7c2509")


async def as_sent(pilot) -> None:
    await go_to(pilot, "3a7c26fc")
    await pilot.press("p")
    await settle(pilot)


async def summary_prompt(pilot) -> None:
    await go_to(pilot, "3a7c2123")
    await pilot.press("s")
    await settle(pilot)
    await pilot.click("#kind-draft")
    await pilot.click("#instructions")
    await pilot.press(*"keep it short", "enter")
    await settle(pilot)


async def tokens_and_search(pilot) -> None:
    await pilot.press("t", "ampersand", *"timezone", "enter")
    await settle(pilot)


async def retries(pilot) -> None:
    await pilot.press("k", "k", "k")
    await settle(pilot)


async def picker(pilot) -> None:
    await settle(pilot)


SHOTS: dict[str, tuple[Steps, str, tuple[int, int]]] = {
    "browser": (browser, "demo", SIZE),
    "everything-filter": (everything, "demo", SIZE),
    "preview-as-sent": (as_sent, "demo", SIZE),
    "summary-prompt": (summary_prompt, "demo", SIZE),
    "search-filter-and-tokens": (tokens_and_search, "demo", SIZE),
    "300-retries-80x24": (retries, "retries", (80, 24)),
    "picker": (picker, "picker", (120, 30)),
}


def make_app(kind: str, workdir: Path) -> SessionTreeApp:
    """The demo session, a session retried 300 times (tests/harness/retries.py), or the picker
    over a folder holding both."""
    demo = workdir / "demo.jsonl"
    with resources.as_file(resources.files("sessiontree.demo") / "demo.jsonl") as src:
        shutil.copyfile(src, demo)
    retried = workdir / "retries.jsonl"
    if not retried.exists():
        from harness.retries import write_retries

        write_retries(retried, retries=300, nested=40).close()
    if kind == "picker":  # fixed times: the picker shows them, and the picture should not change
        os.utime(demo, (PICKER_TIMES[0], PICKER_TIMES[0]))
        os.utime(retried, (PICKER_TIMES[1], PICKER_TIMES[1]))
        return SessionTreeApp(None, picker_dir=workdir, opener=open_session)
    return SessionTreeApp(open_session(demo if kind == "demo" else retried))


async def shoot(name: str, steps: Steps, kind: str, size: tuple[int, int], workdir: Path) -> Path:
    app = make_app(kind, workdir)
    async with app.run_test(size=size) as pilot:
        await settle(pilot)
        await steps(pilot)
        path = OUT / f"{name}.svg"
        app.save_screenshot(filename=path.name, path=str(OUT))
    return path


def to_png(svg: Path) -> Path | None:
    try:
        import cairosvg
    except ImportError:
        return None
    png = svg.with_suffix(".png")
    cairosvg.svg2png(url=str(svg), write_to=str(png))
    return png


async def main() -> None:
    os.environ["TZ"] = "UTC"
    time.tzset()
    OUT.mkdir(exist_ok=True)
    # A folder of a fixed name: the picker's title shows it.
    workdir = Path(tempfile.gettempdir()) / "sessiontree-screenshots"
    shutil.rmtree(workdir, ignore_errors=True)
    workdir.mkdir()
    try:
        for name, (steps, kind, size) in SHOTS.items():
            svg = await shoot(name, steps, kind, size, workdir)
            png = to_png(svg)
            print(f"wrote {svg.relative_to(OUT.parent)}" + (f" and {png.name}" if png else ""))
    finally:
        shutil.rmtree(workdir, ignore_errors=True)


if __name__ == "__main__":
    asyncio.run(main())
