"""Dialogs under hostile text and small terminals; the summarizer stops when the user cancels."""

from __future__ import annotations

import time
from pathlib import Path

import pytest

from harness.pilot import make_app, put_cursor, screen_lines, settle, until
from helpers import A, U
from sessiontree.opening import create_session
from sessiontree.tui.modals import SummaryPrompt, TextPrompt

pytestmark = pytest.mark.usefixtures("utc")

HOSTILE = "[@click=app.quit]quit[/] Output in [/tmp/build] [b]bold"


def hostile_session(tmp_path):
    s = create_session("/p", path=tmp_path / "h.jsonl")
    s.append_message(U("start"))
    reply = s.append_message(A(HOSTILE))
    s.append_message(U("later"))
    s.append_message(A("done"))
    s.close()
    return tmp_path / "h.jsonl", reply


def alive(pid: int) -> bool:
    """Running, not a zombie waiting for a parent (in a container, PID 1 may never reap it)."""
    try:
        state = Path(f"/proc/{pid}/stat").read_text().rsplit(")", 1)[1].split()[0]
    except FileNotFoundError:
        return False
    return state != "Z"


def summary_status(screen) -> str:
    """What the summary dialog's status line says."""
    return str(screen.query_one("#summary-status").render())


async def open_summary_dialog(app, pilot, entry_id: str) -> None:
    """The cursor on `entry_id`, then `s`: the dialog for a move there with a summary."""
    await put_cursor(app, pilot, entry_id)
    await pilot.press("s")
    await settle(app, pilot)


async def test_summary_prompt_shows_markup_shaped_text_literally(tmp_path):
    path, reply = hostile_session(tmp_path)
    app = make_app(path)
    async with app.run_test(size=(80, 24)) as pilot:
        await open_summary_dialog(app, pilot, reply)
        assert isinstance(app.screen, SummaryPrompt)
        title = str(app.screen.query_one(".dialog-title").render())
        assert "[/tmp/build]" in title and "[@click=app.quit]" in title
        await pilot.press("escape")
        await pilot.press("m")  # the label prompt names the entry too
        assert isinstance(app.screen, TextPrompt)
        await pilot.press("escape")
        assert app.is_running


async def test_summary_dialog_keeps_its_buttons_in_view_at_80x24(tmp_path):
    path, reply = hostile_session(tmp_path)
    app = make_app(path)
    async with app.run_test(size=(80, 24)) as pilot:
        await open_summary_dialog(app, pilot, reply)
        screen = app.screen
        for selector in ("#confirm", "#cancel", ".dialog-keys"):
            region = screen.query_one(selector).region
            assert region.height > 0 and screen.region.contains_region(region), selector
        keys = screen.query_one(".dialog-keys")
        assert str(keys.render()).split("\n") == ["^S move · ^D draft", "Esc cancels"]
        assert keys.size.width >= len("^S move · ^D draft") and keys.size.height >= 2  # unwrapped
        # the same number as the tokens column at the entry the leaf lands on
        from sessiontree.context import estimate_context_tokens

        expected = estimate_context_tokens(app.session.build_context(at=reply).messages)
        help_text = " ".join(str(w.render()) for w in screen.query(".dialog-help"))
        assert f"≈{expected:,} tokens" in help_text  # an assistant reply: the leaf lands on it


@pytest.mark.parametrize("size", [(80, 24), (160, 50)])
async def test_writing_a_summary_shows_the_whole_box_and_what_it_writes(demo, size):
    """Picking "Write a summary" at 80×24 used to leave two rows of the text box in a scrolled
    body, and the line saying what is written out of view."""
    app = make_app(demo)
    async with app.run_test(size=size) as pilot:
        await put_cursor(app, pilot, "3a7c4df8")  # a compaction: a long title
        await pilot.press("s")
        await settle(app, pilot)
        await pilot.press("down", "enter")  # "Write a summary"
        await settle(app, pilot)
        screen = app.screen
        assert isinstance(screen, SummaryPrompt)
        body = screen.query_one("#summary-body")
        assert body.max_scroll_y == 0  # everything fits: nothing scrolled out of view
        box = screen.query_one("#summary-text")
        assert box.has_focus and box.region.height >= 5  # three lines to write in, and the border
        for selector in ("#summary-text", "#summary-status", "#confirm", ".dialog-keys"):
            region = screen.query_one(selector).region
            assert region.height > 0 and body.region.union(screen.region).contains_region(region), selector
        assert "is written after the leaf entry" in summary_status(screen)
        await pilot.press(*"ok", "ctrl+s")
        await settle(app, pilot)
        assert app.session.get_entry(app.session.leaf_id).type == "branch_summary"


async def test_cancelling_a_draft_stops_the_summarizer_process_group(tmp_path):
    path, reply = hostile_session(tmp_path)
    pid_file = tmp_path / "pid"
    # The summarizer starts a child of its own (sleep): cancelling must stop both.
    command = f"sh -c 'sleep 30 & echo $! > {pid_file}; wait'"
    app = make_app(path, summarizer=command)
    async with app.run_test(size=(100, 30)) as pilot:
        await open_summary_dialog(app, pilot, reply)
        await pilot.click("#kind-draft")
        await pilot.click("#instructions")
        await pilot.press("enter")
        for _ in range(100):
            if pid_file.exists() and pid_file.read_text().strip():
                break
            await pilot.pause(0.05)
        child = int(pid_file.read_text())
        assert alive(child)
        await pilot.press("escape")
        started = time.monotonic()
        while time.monotonic() - started < 1.0:
            if not alive(child):
                break
            await pilot.pause(0.05)
        else:
            pytest.fail("the summarizer's child is still running 1 s after cancel")
        assert app.is_running
    assert len(path.read_text().splitlines()) == 5  # nothing was written


async def test_ctrl_d_from_the_options_says_it_drafts_and_drafts_once(tmp_path):
    """Ctrl+D with the option list focused started the summarizer under the hint "Enter in the
    instructions box … makes a draft"; a second Ctrl+D started a second summarizer beside it,
    and Ctrl+S said the summary was empty (QA)."""
    path, reply = hostile_session(tmp_path)
    starts = tmp_path / "starts"
    app = make_app(path, summarizer=f"sh -c 'echo started >> {starts}; sleep 30'")
    async with app.run_test(size=(100, 30)) as pilot:
        await open_summary_dialog(app, pilot, reply)
        await pilot.press("ctrl+d")  # `settle` would wait for the draft: pauses, here
        await pilot.pause(0.2)
        status = app.screen.query_one("#summary-status")
        assert str(status.render()).startswith("Drafting with")
        for _ in range(100):
            if starts.exists():
                break
            await pilot.pause(0.05)
        await pilot.press("ctrl+d")
        await pilot.pause(0.2)
        assert str(status.render()).startswith("Still drafting with")
        await pilot.press("ctrl+s")
        await pilot.pause(0.2)
        assert str(status.render()).startswith("Wait for the draft")
        await pilot.pause(0.3)
        assert starts.read_text().splitlines() == ["started"]  # one summarizer
        await pilot.press("escape")
    assert len(path.read_text().splitlines()) == 5  # nothing was written


async def test_ctrl_d_with_the_built_in_drafter_says_the_draft_is_ready(tmp_path):
    path, reply = hostile_session(tmp_path)
    app = make_app(path)
    async with app.run_test(size=(100, 30)) as pilot:
        await open_summary_dialog(app, pilot, reply)
        await pilot.press("ctrl+d")
        await settle(app, pilot)
        assert app.screen.query_one("#summary-text").text
        assert str(app.screen.query_one("#summary-status").render()).startswith("Draft ready")


@pytest.mark.parametrize("yes", ["Upgrade", "Fork", "Open"])
async def test_confirm_dialog_keys_fit_on_their_line_at_80x24(tmp_path, yes):
    """The key hint shares the row with the buttons; wrapped, its second line ran into them."""
    from rich.cells import cell_len

    from sessiontree.tui.modals import ConfirmScreen

    path, _ = hostile_session(tmp_path)
    app = make_app(path)
    async with app.run_test(size=(80, 24)) as pilot:
        await settle(app, pilot)
        question = "Upgrade /some/long/path/to/a/session.jsonl to v3?"
        app.push_screen(ConfirmScreen(question, "Detail.", yes=yes))
        await settle(app, pilot)
        hint = app.screen.query_one(".dialog-keys")
        assert hint.region.width >= cell_len(str(hint.render()))
        await pilot.press("n")
        assert app.is_running


async def test_esc_over_a_written_summary_asks_before_discarding_it(demo):
    """Esc closed the dialog at once, losing a summary the user had written. The first Esc now
    says what a second would do; an edit after it asks again; the second discards it, and the
    move is cancelled with nothing written. With nothing written, Esc cancels at once."""
    app = make_app(demo)
    async with app.run_test(size=(100, 30)) as pilot:
        before = demo.read_bytes()
        await put_cursor(app, pilot, "3a7c137e")
        await pilot.press("s")
        await settle(app, pilot)
        await pilot.press("escape")  # "No summary" picked: nothing to lose
        await settle(app, pilot)
        assert not isinstance(app.screen, SummaryPrompt)
        await pilot.press("s")
        await settle(app, pilot)
        await pilot.press("down", "enter", *"tried X")  # "Write a summary"
        screen = app.screen
        await pilot.press("escape")
        assert app.screen is screen
        assert "Esc again discards" in summary_status(screen)
        await pilot.press("!", "escape")  # edited since it asked: it asks again
        assert app.screen is screen and screen.query_one("#summary-text").text == "tried X!"
        await pilot.press("escape")
        await settle(app, pilot)
        assert not isinstance(app.screen, SummaryPrompt)
        assert demo.read_bytes() == before


async def test_the_discard_question_is_in_sight_at_80x24(demo):
    """At 80x24 the first Esc's sentence was cut off below the dialog's body (QA)."""
    app = make_app(demo)
    async with app.run_test(size=(80, 24)) as pilot:
        await put_cursor(app, pilot, "3a7c137e")
        await pilot.press("s")
        await settle(app, pilot)
        await pilot.press("down", "enter", *"tried X", "escape")
        await settle(app, pilot)
        shown = "\n".join(screen_lines(app))
        assert "Esc again discards it and cancels; Ctrl+S moves with it." in shown, shown


async def test_moving_before_the_first_entry_says_the_context_is_empty(demo):
    """`s` on the first user message puts the leaf above it, where no message is: "≈0 tokens"
    read like a count gone wrong; the dialog says why there is nothing."""
    app = make_app(demo)
    async with app.run_test(size=(100, 30)) as pilot:
        await settle(app, pilot)
        await pilot.press("home", "s")
        await settle(app, pilot)
        assert isinstance(app.screen, SummaryPrompt)
        help_text = " ".join(str(w.render()) for w in app.screen.query(".dialog-help"))
        assert "The context at the new leaf is empty: no message comes before it." in help_text
        assert "tokens" not in help_text


async def test_the_cancel_button_asks_before_discarding_a_written_summary(demo):
    """Clicking Cancel threw a written summary away where Esc asks first (QA): it asks too, and
    a second click cancels the move with nothing written."""
    app = make_app(demo)
    async with app.run_test(size=(100, 30)) as pilot:
        before = demo.read_bytes()
        await open_summary_dialog(app, pilot, "3a7c137e")
        await pilot.press("down", "enter", *"tried X")
        screen = app.screen
        await pilot.click("#cancel")
        await settle(app, pilot)
        assert app.screen is screen and screen.query_one("#summary-text").text == "tried X"
        assert "Cancel again discards it; Ctrl+S moves with it." in str(
            screen.query_one("#summary-status").render()
        )
        await pilot.click("#cancel")
        await settle(app, pilot)
        assert not isinstance(app.screen, SummaryPrompt)
        assert demo.read_bytes() == before


def choice_rows(app) -> list[str]:
    return [line[line.index("▐") :] for line in screen_lines(app) if "summary" in line and "▐" in line]


async def test_only_the_picked_summary_kind_has_a_dot(demo):
    """Textual drew the same dot in all three and told the picked one by colour alone, which
    NO_COLOR and 16-colour terminals barely show (QA)."""
    app = make_app(demo)
    async with app.run_test(size=(100, 30)) as pilot:
        await open_summary_dialog(app, pilot, "3a7c137e")
        shown = choice_rows(app)
        assert [row[:3] for row in shown] == ["▐●▌", "▐ ▌", "▐ ▌"], shown
        await pilot.press("down", "enter")
        await settle(app, pilot)
        shown = choice_rows(app)
        assert [row[:3] for row in shown] == ["▐ ▌", "▐●▌", "▐ ▌"], shown


@pytest.mark.parametrize("size", [(80, 24), (100, 40), (30, 8)])
async def test_the_dialog_without_a_summary_is_as_tall_as_what_it_says(demo, size):
    """With no summary to type the dialog kept the text box's height: ten blank rows between
    the choices and "Only a leaf entry is written." at 80x24 (QA). At 30x8 what the move
    leaves behind took the rows and the choices were not drawn at all."""
    app = make_app(demo)
    async with app.run_test(size=size) as pilot:
        await open_summary_dialog(app, pilot, "3a7c137e")
        shown = screen_lines(app)
        draft = next(y for y, line in enumerate(shown) if "Draft a summary" in line)
        said = next(y for y, line in enumerate(shown) if "Only a leaf entry" in line)
        assert said - draft <= 3, "\n".join(shown)  # the choices' border and a blank line at most
        assert len(choice_rows(app)) == 3 and any("Move the leaf to" in line for line in shown)
        assert any("being left" in line for line in shown) is (size[1] >= 12)


async def test_enter_on_the_kind_already_picked_moves(demo):
    """Enter did nothing on "No summary", picked when the dialog opens: only Ctrl+S or Tab to
    the Move button moved (QA). Enter on another kind still picks it."""
    app = make_app(demo)
    async with app.run_test(size=(100, 30)) as pilot:
        await open_summary_dialog(app, pilot, "3a7c137e")
        await pilot.press("down", "enter")  # picks "Write a summary": the text box, no move
        await settle(app, pilot)
        assert isinstance(app.screen, SummaryPrompt) and app.session.leaf_id != "3a7c137e"
        await pilot.press("escape")
        await settle(app, pilot)
        assert not isinstance(app.screen, SummaryPrompt)
        await open_summary_dialog(app, pilot, "3a7c137e")
        await pilot.press("enter")  # on "No summary", picked as the dialog opens: moves
        await settle(app, pilot)
        assert not isinstance(app.screen, SummaryPrompt)
        assert app.session.leaf_id == "3a7c137e"
        assert app.session.get_entry(app.session.leaf_id).type == "message"  # no summary written


async def test_enter_on_another_kind_only_picks_it_and_keeps_what_is_written(demo):
    """Enter on a kind not picked moved at once, without the summary written (QA: the pick
    reaches the choices by a message, after the key, so they looked unchanged)."""
    app = make_app(demo)
    async with app.run_test(size=(100, 30)) as pilot:
        before = demo.read_bytes()
        await open_summary_dialog(app, pilot, "3a7c137e")
        await pilot.press("down", "enter", *"precious")  # "Write a summary", then typed
        screen = app.screen
        screen.query_one("#summary-kind").focus()
        await pilot.press("up", "enter")  # "No summary" picked: no move
        await settle(app, pilot)
        assert app.screen is screen and demo.read_bytes() == before
        assert screen.query_one("#summary-text").text == "precious"


async def test_a_draft_asks_before_replacing_a_summary_written_by_hand(demo):
    """Ctrl+D replaced a summary written by hand with a draft, unasked (QA)."""
    app = make_app(demo)
    async with app.run_test(size=(100, 30)) as pilot:
        await open_summary_dialog(app, pilot, "3a7c137e")
        await pilot.press("down", "enter", *"by hand", "ctrl+d")
        await settle(app, pilot)
        screen = app.screen
        assert screen.query_one("#summary-text").text == "by hand"
        said = summary_status(screen)
        assert said == "Ctrl+D again replaces what is written with a draft; Ctrl+S moves with it."
        await pilot.press("ctrl+d")
        await until(pilot, lambda: "Draft ready" in summary_status(screen))
        drafted = screen.query_one("#summary-text").text
        assert drafted != "by hand"
        await pilot.press("ctrl+d")  # over the draft as it came: no question
        await until(pilot, lambda: "Draft ready" in summary_status(screen))


async def test_esc_asks_for_itself_after_ctrl_q_asked(demo):
    """After Ctrl+Q's "Ctrl+Q again quits without it", Esc discarded the summary at once (QA)."""
    app = make_app(demo)
    async with app.run_test(size=(100, 30)) as pilot:
        await open_summary_dialog(app, pilot, "3a7c137e")
        await pilot.press("down", "enter", *"abc", "ctrl+q")
        await settle(app, pilot)
        screen = app.screen
        assert "Ctrl+Q again quits without it" in summary_status(screen)
        await pilot.press("escape")
        await settle(app, pilot)
        assert app.screen is screen and app.is_running
        assert "Esc again discards it" in summary_status(screen)
