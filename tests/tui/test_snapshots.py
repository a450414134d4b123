"""Pictures of the browser (pytest-textual-snapshot). Regenerate with
`python -m pytest tests/test_snapshots.py --snapshot-update` after a deliberate visual change.

pytest-textual-snapshot 1.1 pins syrupy 4.8, which needs pytest < 9: the test extra pins
`pytest>=8,<9` for that reason."""

from __future__ import annotations

import pytest

from harness.pilot import settle_picture
from sessiontree import open_session
from sessiontree.tui.app import SessionTreeApp
from sessiontree.tui.tree_view import SessionTreeView

SIZE = (120, 36)


pytestmark = pytest.mark.usefixtures("utc")


@pytest.fixture
def demo_app(demo):
    return SessionTreeApp(open_session(demo), follow=False)


def test_snapshot_default(snap_compare, demo_app):
    async def before(pilot):
        # Up and back to the leaf: the very first preview of a process races the first layout
        # for its scrollbar's position, which would make this picture flaky.
        await settle_picture(pilot)
        await pilot.press("k", "j")
        await settle_picture(pilot)

    assert snap_compare(demo_app, terminal_size=SIZE, run_before=before)


def test_snapshot_everything_filter_at_fork(snap_compare, demo_app):
    async def before(pilot):
        await pilot.press("5")  # the "all" filter
        tree = pilot.app.browser.query_one(SessionTreeView)
        tree.go_to_position(pilot.app.session.tree.pos["3a7c137e"])
        await settle_picture(pilot)

    assert snap_compare(demo_app, terminal_size=SIZE, run_before=before)


def test_snapshot_llm_preview(snap_compare, demo_app):
    async def before(pilot):
        tree = pilot.app.browser.query_one(SessionTreeView)
        tree.go_to_position(pilot.app.session.tree.pos["3a7c26fc"])
        await pilot.press("p")
        await settle_picture(pilot)

    assert snap_compare(demo_app, terminal_size=SIZE, run_before=before)


def test_snapshot_summary_prompt(snap_compare, demo_app):
    async def before(pilot):
        tree = pilot.app.browser.query_one(SessionTreeView)
        tree.go_to_position(pilot.app.session.tree.pos["3a7c2123"])
        await pilot.press("s")
        await settle_picture(pilot)
        await pilot.click("#kind-draft")
        await pilot.click("#instructions")
        await pilot.press("enter")
        await settle_picture(pilot)
        # the text cursor drawn, not caught mid-blink (it was, on a loaded CI run)
        pilot.app.screen.query_one("#summary-text").cursor_blink = False
        await settle_picture(pilot)

    assert snap_compare(demo_app, terminal_size=(120, 44), run_before=before)


@pytest.fixture
def retries_app(tmp_path):
    from harness.retries import write_retries

    write_retries(tmp_path / "retries.jsonl", retries=300, nested=40).close()
    return SessionTreeApp(open_session(tmp_path / "retries.jsonl"), follow=False)


def test_snapshot_300_retries_at_80x24_cursor_up_three(snap_compare, retries_app):
    """Every row keeps its words at the leaf of a session retried 300 times; the cursor bar is
    on the fourth row from the bottom, the leaf row marked."""

    async def before(pilot):
        await pilot.press("k", "k", "k")
        await settle_picture(pilot)

    assert snap_compare(retries_app, terminal_size=(80, 24), run_before=before)


def test_snapshot_300_retries_at_160x50_preview_focused(snap_compare, retries_app):
    """With the preview focused the cursor bar stays, dimmer."""

    async def before(pilot):
        await pilot.press("k", "k", "k", "k", "k")
        pilot.app.browser.query_one("#preview").focus()
        await settle_picture(pilot)

    assert snap_compare(retries_app, terminal_size=(160, 50), run_before=before)
