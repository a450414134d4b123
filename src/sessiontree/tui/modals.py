"""Dialogs: the branch-summary prompt, one-line text prompts, the navigation history."""

from __future__ import annotations

import contextlib
import threading
import unicodedata
from collections.abc import Callable, Collection, Sequence
from dataclasses import dataclass
from typing import ClassVar, TypeVar

from rich.text import Text
from textual import events, on, work
from textual.app import ComposeResult
from textual.await_complete import AwaitComplete
from textual.binding import Binding, BindingType
from textual.containers import Horizontal, Vertical, VerticalScroll
from textual.css.query import NoMatches
from textual.message import Message
from textual.notifications import Notifications
from textual.screen import ModalScreen
from textual.widgets import Button, Input, Label, OptionList, RadioButton, RadioSet, Static, TextArea
from textual.widgets._toast import ToastRack  # Textual's toast layer, which has no public name
from textual.widgets.option_list import Option
from textual.worker import get_current_worker

from ..compare import Row
from ..display import counted, inert, one_line
from . import deliver
from .inputs import InTurnInput, InTurnTextArea, KeysAfterClosing
from .lines_view import LinesView
from .memory import give_back_in_background


def plain(text: str) -> Text:
    """Text for a widget, never parsed as markup, with control characters made visible:
    dialogs show entry ids, previews and a summarizer's stderr, all of which come from outside
    (an id like `[@click=app.quit]q[/]` must stay text)."""
    return Text(inert(text))


ResultT = TypeVar("ResultT")


class Dialog(ModalScreen[ResultT]):
    """A dialog that asks for something. The toasts on screen when it opens are cleared:
    Textual stacks them at the bottom right, where at 80×24 they covered a dialog's buttons and
    its keys line. (Help is not one: a warning about the key bindings stays readable there.)"""

    _answered = False

    def dismiss(self, result: ResultT | None = None) -> AwaitComplete:
        """Once only. A burst of keys can queue two answers (two Enters in a prompt, handled
        after both were typed): the second dismissed the screen below, the browser, leaving
        the app on an empty screen (QA)."""
        if self._answered:
            return AwaitComplete.nothing()
        self._answered = True
        return super().dismiss(result)

    @on(events.ScreenResume)
    def _clear_toasts(self) -> None:
        app = self.app
        app.clear_notifications()  # the toasts of this dialog's own layer
        for screen in app.screen_stack[:-1]:  # and those drawn on the screens it is over
            with contextlib.suppress(NoMatches):
                screen.get_child_by_type(ToastRack).show(Notifications())


@dataclass(frozen=True, slots=True)
class SummaryChoice:
    """What the summary prompt decided: no summary (text None) or this text."""

    text: str | None
    drafted_by: str | None = None


class Choice(RadioButton):
    """A radio button with a dot only when it is picked. Textual draws the same dot in every
    button and tells the picked one by colour alone, which NO_COLOR and 16-colour terminals
    barely show (QA)."""

    def __init__(self, label: str | Text, value: bool = False, *, id: str | None = None) -> None:
        super().__init__(label, value, id=id)
        self.BUTTON_INNER = self._dot()

    def _dot(self) -> str:
        return "●" if self.value else " "

    def watch_value(self) -> None:
        super().watch_value()
        self.BUTTON_INNER = self._dot()


class Kinds(KeysAfterClosing, RadioSet):
    """The kinds of summary: Enter picks the highlighted one, and on the one already picked it
    moves, the only thing left for it to do (it did nothing: "No summary" is picked when the
    dialog opens, and a user of lazygit presses Enter to go on; QA). The keys typed after that
    Enter act once the dialog has closed: they went to the closing list, and were lost (QA)."""

    BINDINGS: ClassVar[list[BindingType]] = [Binding("enter", "pick_or_move", "Pick", show=False)]

    class Confirmed(Message):
        """Enter on the kind already picked."""

    async def _on_key(self, event: events.Key) -> None:
        if self._keep(event):
            return
        if event.key == "enter" and self._on_the_pick():
            event.prevent_default()
            event.stop()
            await self._run_closing(self._confirm())

    async def _confirm(self) -> None:
        self.post_message(self.Confirmed())

    def _on_the_pick(self) -> bool:
        # The highlighted button, asked before the toggle: the set learns of a new pick by a
        # message, after this returns, so comparing the picks before and after always found
        # them equal and Enter on another kind moved at once, dropping a written summary (QA).
        highlighted = next(iter(self.query(".-selected")), None)
        return highlighted is not None and highlighted is self.pressed_button

    def action_pick_or_move(self) -> None:
        if self._on_the_pick():
            self.post_message(self.Confirmed())
        else:
            self.action_toggle_button()


SHORT_ROWS = 32  # terminals with fewer rows get the summary prompt's compact layout
TINY_ROWS = 12  # and with fewer than these, it leaves out what the move leaves behind
TRIM_DELAY = 0.5  # seconds after a comparison closes before freed memory goes back (`memory`)


class SummaryPrompt(Dialog[SummaryChoice | None]):
    """Before a move: no summary, write one, or draft one (then edit it). Cancel writes nothing."""

    BINDINGS = [
        Binding("escape", "cancel", "Cancel"),
        # run by the editor in turn with the keys around it (`InTurnTextArea`)
        Binding("ctrl+s", "confirm", "Move"),
    ]

    def __init__(
        self,
        *,
        target_text: str,
        branch_size: int,
        drafter: Callable[[str, threading.Event], str],
        drafter_name: str,
        context_tokens: int | None = None,
        kept: SummaryChoice | None = None,
    ) -> None:
        """`kept`: a summary whose move could not be written (another writer mid-line, a full
        disk), shown again to retry rather than lost with the dialog."""
        super().__init__()
        self.kept = kept
        self.context_tokens = context_tokens  # the `t` column's number for the new leaf
        self.target_text = target_text
        self.branch_size = branch_size
        self.drafter = drafter
        self.drafter_name = drafter_name
        self._drafted = False
        self._drafting = False  # a draft is being made: one at a time
        self._synced = ""  # the kind of summary the dialog's parts were last shown for
        self._discard_asked = ""  # what a first key over written text said before discarding it
        self._replace_asked = ""  # the text a first Ctrl+D asked about before replacing it
        self._draft_text = ""  # the last draft as it came, to tell a summary written by hand
        self._cancel = threading.Event()  # stops a running summarizer command (its process group)

    def compose(self) -> ComposeResult:
        with Vertical(id="summary-dialog", classes="dialog"):
            # Docked first: the buttons and their keys stay in view however small the terminal.
            with Horizontal(classes="dialog-buttons"):
                # Two lines cut where they read well: beside the buttons at 80 columns one line
                # wrapped as "Ctrl+S move · Ctrl+D" over "draft · Esc cancel".
                yield Static("^S move · ^D draft\nEsc cancels", classes="dialog-keys")
                yield Button("Move", variant="primary", id="confirm")
                yield Button("Cancel", id="cancel")
            with VerticalScroll(id="summary-body"):
                yield Static(plain(f"Move the leaf to {self.target_text}"), classes="dialog-title")
                leaving = (
                    f"The branch being left has {counted(self.branch_size, 'entry', 'entries')}."
                    if self.branch_size
                    else "Nothing is left behind by this move (no abandoned entries)."
                )
                if self.context_tokens == 0:  # as above the first user message
                    leaving += " The context at the new leaf is empty: no message comes before it."
                elif self.context_tokens is not None:
                    leaving += f" The context at the new leaf: ≈{self.context_tokens:,} tokens."
                yield Static(plain(leaving), classes="dialog-help", id="summary-leaving")
                with Kinds(id="summary-kind"):
                    yield Choice("No summary", value=True, id="kind-none")
                    yield Choice("Write a summary", id="kind-write")
                    yield Choice(plain(f"Draft a summary ({self.drafter_name})"), id="kind-draft")
                yield Input(
                    placeholder="Instructions for the draft (optional), then Enter", id="instructions"
                )
                yield InTurnTextArea(id="summary-text", soft_wrap=True)
            # Below the scrolled part, above the buttons: at 80x24 a failed draft's reason was
            # out of sight under the text box when the entry's title took three lines (QA).
            yield Static("", id="summary-status", classes="dialog-help")

    def on_mount(self) -> None:
        kept = self.kept
        if kept is None or kept.text is None:
            self._sync_kind("kind-none")
            self.query_one(RadioSet).focus()  # ↑ ↓ pick the kind of summary at once; Ctrl+S moves
            return
        kind = "kind-draft" if kept.drafted_by else "kind-write"
        self._drafted = kept.drafted_by is not None
        self.query_one(f"#{kind}", RadioButton).value = True
        self._sync_kind(kind)
        text = self.query_one("#summary-text", TextArea)
        text.load_text(kept.text)
        text.move_cursor(text.document.end)
        text.focus()
        self.query_one("#summary-status", Static).update(
            "Nothing was written (the message says why); the summary is kept: Ctrl+S tries again."
        )

    def on_resize(self, event: events.Resize) -> None:
        # At 24 rows the dialog's parts did not fit: the text box showed two rows, inside a
        # scrolled body. A short terminal gets the compact layout (`app.tcss`, `.-short`).
        self.set_class(event.size.height < SHORT_ROWS, "-short")
        self.set_class(event.size.height < TINY_ROWS, "-tiny")
        self.call_after_refresh(self._show_cursor)

    def _kind(self) -> str:
        pressed = self.query_one(RadioSet).pressed_button
        return pressed.id if pressed and pressed.id else "kind-none"

    def _sync_kind(self, kind: str) -> None:
        self._synced = kind
        self.set_class(kind == "kind-none", "-bare")
        text = self.query_one("#summary-text", TextArea)
        instructions = self.query_one("#instructions", Input)
        text.display = kind != "kind-none"
        instructions.display = kind == "kind-draft"
        status = self.query_one("#summary-status", Static)
        if kind == "kind-none":
            status.update("Only a leaf entry is written.")
        elif kind == "kind-write":
            status.update("A branch_summary entry with this text is written after the leaf entry.")
            text.focus()
        else:
            status.update("Enter in the instructions box (or Ctrl+D) makes a draft you can edit.")
            instructions.focus()

    @on(RadioSet.Changed)
    def _kind_changed(self, event: RadioSet.Changed) -> None:
        # Ctrl+D picks "Draft" and shows it at once; the change's message comes after, and
        # would put the hint back over "Drafting…" or "Draft ready" (QA).
        kind = event.pressed.id or "kind-none"
        if kind != self._synced:
            self._sync_kind(kind)

    @on(Kinds.Confirmed)
    def _kind_confirmed(self) -> None:
        self.action_confirm()

    @on(Input.Submitted, "#instructions")
    def _instructions_entered(self) -> None:
        self.action_draft()

    def action_draft(self) -> None:
        """Draft a summary now (Ctrl+D, or Enter in the instructions box), picking "Draft"
        first when another kind is picked. One draft at a time: a second summarizer ran
        beside the first (QA)."""
        if self._drafting:
            self.query_one("#summary-status", Static).update(
                plain(f"Still drafting with {self.drafter_name}… (Esc cancels)")
            )
            return
        written = self.query_one("#summary-text", TextArea).text
        if written.strip() and written not in (self._draft_text, self._replace_asked):
            # a draft replaced a summary written by hand, unasked (QA); asked once per text
            self._replace_asked = written
            self.query_one("#summary-status", Static).update(
                "Ctrl+D again replaces what is written with a draft; Ctrl+S moves with it."
            )
            return
        if self._kind() != "kind-draft":
            self.query_one("#kind-draft", RadioButton).value = True
            self._sync_kind("kind-draft")
        self.query_one("#summary-status", Static).update(
            plain(f"Drafting with {self.drafter_name}… (Esc cancels)")
        )
        self.query_one("#confirm", Button).disabled = True
        self._drafting = True
        self._run_draft(self.query_one("#instructions", Input).value)

    @work(thread=True, exclusive=True, group="draft")
    def _run_draft(self, instructions: str) -> None:
        worker = get_current_worker()
        try:
            text = self.drafter(instructions, self._cancel)
        except Exception as exc:  # the summarizer's failure is shown, never raised into the app
            if not worker.is_cancelled:
                deliver(self.app, self._draft_failed, str(exc))
            return
        if not worker.is_cancelled:
            deliver(self.app, self._draft_ready, text)

    def _draft_ready(self, text: str) -> None:
        if not self.is_attached:  # dismissed while the summarizer ran
            return
        self._drafting = False
        area = self.query_one("#summary-text", TextArea)
        area.text = text
        self._draft_text = area.text
        area.focus()
        self._drafted = True
        self.query_one("#confirm", Button).disabled = False
        self.query_one("#summary-status", Static).update("Draft ready: edit it, then Move (Ctrl+S).")

    def _draft_failed(self, message: str) -> None:
        if not self.is_attached:
            return
        self._drafting = False
        self.query_one("#confirm", Button).disabled = False
        self.query_one("#summary-status", Static).update(plain(f"Draft failed: {message}"))

    @on(Button.Pressed, "#confirm")
    def action_confirm(self) -> None:
        kind = self._kind()
        if kind == "kind-none":
            self.dismiss(SummaryChoice(None))
            return
        if self._drafting:  # the Move button is off meanwhile; Ctrl+S said "empty" (QA)
            self.query_one("#summary-status", Static).update(
                plain(f"Wait for the draft ({self.drafter_name}), or Esc to cancel.")
            )
            return
        text = self.query_one("#summary-text", TextArea).text
        if not text.strip():
            self.query_one("#summary-status", Static).update(
                "The summary is empty: write something, or pick No summary."
            )
            return
        self.dismiss(
            SummaryChoice(text, self.drafter_name if kind == "kind-draft" and self._drafted else None)
        )

    def action_cancel(self) -> None:
        """Esc: cancel the move, but not at once over a summary the user wrote or edited: it
        would be lost with the dialog. The first Esc says so; the second discards it."""
        if not self.asks_before_losing("Esc again discards it and cancels"):
            self._discard()

    def asks_before_losing(self, again: str) -> bool:
        """Whether the summary the user wrote or edited would be lost now, and is not yet
        asked about: then the status line asks (`again`: what the same key does a second time)
        and the caller stops. Esc asks here, and so does the app's Ctrl+Q."""
        text = self.query_one("#summary-text", TextArea)
        # Asked by this key (Esc's question is not Ctrl+Q's: after Ctrl+Q's, Esc discarded)
        if self._kind() == "kind-none" or not text.text.strip() or self._discard_asked == again:
            return False
        self._discard_asked = again
        self.query_one("#summary-status", Static).update(plain(f"{again}; Ctrl+S moves with it."))
        return True

    @on(TextArea.Changed, "#summary-text")
    def _edited(self) -> None:
        self._discard_asked = ""  # asked about the text as it was
        self._show_cursor()

    def _show_cursor(self) -> None:
        """The text box scrolled into the dialog's view, and its cursor into the box's: after a
        resize, what was typed went on out of sight (QA)."""
        area = self.query_one("#summary-text", TextArea)
        if self.focused is area:
            area.scroll_visible(animate=False)
            area.scroll_cursor_visible()

    @on(Button.Pressed, "#cancel")
    def _cancel_pressed(self) -> None:
        """As Esc: it threw a written summary away without asking (QA)."""
        if not self.asks_before_losing("Cancel again discards it"):
            self._discard()

    def _discard(self) -> None:
        self._cancel.set()
        self.workers.cancel_group(self, "draft")
        self.dismiss(None)

    def on_unmount(self) -> None:
        self._cancel.set()  # quitting with a draft running must not wait for the summarizer

    def key_ctrl_d(self) -> None:
        self.action_draft()


class OneLineInput(InTurnInput):
    """An input that keeps every line of a paste, joined by spaces: Textual's kept the first
    line alone, and a pasted two-line name was written as its first line, unsaid (QA)."""

    def _on_paste(self, event: events.Paste) -> None:
        event.prevent_default()  # Input's own handler, run after this one, keeps one line
        event.stop()
        joined = " ".join(line.strip() for line in event.text.splitlines() if line.strip())
        if not joined:
            return
        if self.selection.is_empty:
            self.insert_text_at_cursor(joined)
        else:
            self.replace(joined, *self.selection)


class TextPrompt(Dialog[str | None]):
    """One line of text (labels, the session name). Escape cancels; an empty value is allowed
    and means "clear"."""

    BINDINGS = [Binding("escape", "cancel", "Cancel")]

    def __init__(
        self,
        title: str,
        value: str = "",
        help_text: str = "",
        *,
        enter: str = "saves",
        check: Callable[[str], str | None] | None = None,
        retry: bool = False,
    ) -> None:
        """`check(value)`: why Enter cannot take `value` (said under the box, which stays open
        with the text kept, to be corrected), or None. `retry`: `value` is text whose write
        failed, shown again with the cursor at its end (selected, one key replaced it)."""
        super().__init__()
        self.retry = retry
        self.title_text = title
        self.value = value
        self.help_text = help_text
        self.enter = enter  # what Enter does, for the keys line ("saves", "goes there")
        self.check = check

    def compose(self) -> ComposeResult:
        with Vertical(classes="dialog small-dialog"):
            yield Label(plain(self.title_text), classes="dialog-title")
            yield OneLineInput(value=self.value, id="prompt-input", select_on_focus=not self.retry)
            problem = Static("", id="prompt-problem", classes="dialog-help")
            problem.display = False
            yield problem
            if self.help_text:
                yield Static(plain(self.help_text), classes="dialog-help")
            yield Static(plain(f"Enter {self.enter} · Esc cancels"), classes="dialog-keys")

    def on_mount(self) -> None:
        self.query_one(Input).focus()

    @on(Input.Changed)
    def _changed(self) -> None:
        self.query_one("#prompt-problem").display = False  # it was about the text before

    @on(Input.Submitted)
    def _submitted(self, event: Input.Submitted) -> None:
        # One line: a pasted tab or escape character became part of a session's name (QA).
        value = "".join(" " if unicodedata.category(c) == "Cc" else c for c in event.value)
        problem = self.check(value) if self.check is not None else None
        if problem is None:
            self.dismiss(value)
            return
        shown = self.query_one("#prompt-problem", Static)
        shown.update(plain(problem))
        shown.display = True

    def action_cancel(self) -> None:
        self.dismiss(None)


@dataclass(frozen=True, slots=True)
class HistoryItem:
    leaf_entry_id: str
    timestamp: str
    from_id: str | None
    to_id: str | None
    to_text: str


class HistoryScreen(Dialog[str | None]):
    """Every recorded leaf move, newest first; Enter jumps the cursor to the move's target (its
    id, or "" for a move to the start).
    Moves are decoded a page at a time (`page(skip, count)`): the newest page at once, older
    ones when the last row, "older moves…", is chosen."""

    BINDINGS = [
        Binding("escape", "cancel", "Close"),
        Binding("j", "step(1)", show=False),  # as in the tree
        Binding("k", "step(-1)", show=False),
    ]
    PAGE = 200

    def __init__(self, page: Callable[[int, int], list[HistoryItem]], total: int) -> None:
        super().__init__()
        self.page = page
        self.total = total
        self.items: list[HistoryItem] = page(0, self.PAGE)

    def compose(self) -> ComposeResult:
        with Vertical(classes="dialog wide-dialog"):
            yield Label(plain(f"Navigation history ({counted(self.total, 'move')})"), classes="dialog-title")
            if not self.total:
                yield Static("No leaf moves are recorded in this session yet.", classes="dialog-help")
            yield OptionList(*self._options(self.items, 0), id="history-list", markup=False)
            # Short enough for an 80-column terminal's dialog.
            yield Static("Enter shows that entry · j/k move · Esc closes", classes="dialog-keys")

    def _options(self, items: list[HistoryItem], first: int) -> list[Option]:
        options = [
            Option(
                plain(
                    f"{item.timestamp[:19].replace('T', ' ')}  {item.from_id or 'start'} → "
                    f"{item.to_id or 'start'}  {one_line(item.to_text, 60)}"
                ),
                id=str(first + k),
            )
            for k, item in enumerate(items)
        ]
        left = self.total - first - len(items)
        if left > 0:
            options.append(
                Option(plain(f"… {left:,} older moves (Enter shows {min(left, self.PAGE)} more)"), id="more")
            )
        return options

    @on(OptionList.OptionSelected)
    def _chosen(self, event: OptionList.OptionSelected) -> None:
        if event.option.id != "more":
            self.dismiss(self.items[int(event.option.id or 0)].to_id or "")  # "": the start
            return
        listing = self.query_one("#history-list", OptionList)
        first = len(self.items)
        older = self.page(first, self.PAGE)
        self.items.extend(older)
        listing.remove_option("more")
        listing.add_options(self._options(older, first))
        listing.highlighted = first

    def action_step(self, step: int) -> None:
        listing = self.query_one("#history-list", OptionList)
        if step > 0:
            listing.action_cursor_down()
        else:
            listing.action_cursor_up()

    def action_cancel(self) -> None:
        self.dismiss(None)


class ConfirmScreen(Dialog[bool]):
    """A yes/no question with both answers on buttons and keys (y / Enter, n / Esc)."""

    BINDINGS = [
        Binding("escape,n", "answer(False)", "No"),
        Binding("y", "answer(True)", "Yes"),
    ]

    def __init__(self, question: str, detail: str = "", yes: str = "Yes") -> None:
        super().__init__()
        self.question = question
        self.detail = detail
        self.yes = yes

    def compose(self) -> ComposeResult:
        with Vertical(classes="dialog small-dialog"):
            with Horizontal(classes="dialog-buttons"):
                # short enough to fit beside the buttons at 80 columns
                yield Static("y/⏎ yes · n/Esc no", classes="dialog-keys")
                yield Button(plain(self.yes), variant="primary", id="yes")
                yield Button("Cancel", id="no")
            yield Static(plain(self.question), classes="dialog-title")
            if self.detail:
                yield Static(plain(self.detail), classes="dialog-help")

    def on_mount(self) -> None:
        self.query_one("#yes", Button).focus()

    @on(Button.Pressed)
    def _pressed(self, event: Button.Pressed) -> None:
        self.dismiss(event.button.id == "yes")

    def action_answer(self, value: bool) -> None:
        self.dismiss(value)


class ChoiceScreen(Dialog[str | None]):
    """Pick one of a few choices: by number, or with the cursor and Enter; Esc cancels."""

    BINDINGS = [Binding("escape", "cancel", "Cancel")]

    def __init__(self, title: str, choices: list[tuple[str, str]], off: Collection[str] = ()) -> None:
        super().__init__()
        self.title_text = title
        self.choices = choices
        # Choices that do not apply here: listed greyed out, so every choice keeps its number.
        self.off = off

    def compose(self) -> ComposeResult:
        with Vertical(classes="dialog small-dialog"):
            yield Static(plain(self.title_text), classes="dialog-title")
            options = [
                Option(
                    plain(f"{n}  {label}" + (" (none here)" if key in self.off else "")),
                    id=key,
                    disabled=key in self.off,
                )
                for n, (key, label) in enumerate(self.choices, 1)
            ]
            yield OptionList(*options, id="choices", markup=False)
            yield Static("1-9 or Enter: choose · Esc: cancel", classes="dialog-keys")

    def on_mount(self) -> None:
        self.query_one(OptionList).focus()

    def on_key(self, event: events.Key) -> None:
        if event.character and event.character.isdigit():
            n = int(event.character)
            if 1 <= n <= len(self.choices):
                event.stop()
                key = self.choices[n - 1][0]
                if key in self.off:
                    self.app.bell()
                else:
                    self.dismiss(key)

    @on(OptionList.OptionSelected)
    def _chosen(self, event: OptionList.OptionSelected) -> None:
        self.dismiss(event.option.id)

    def action_cancel(self) -> None:
        self.dismiss(None)


# Esc first: the line is one row cut at its end, and at 50 columns the scroll keys are the part
# that can go (they are every list's)
KEYS_LINE = "Esc closes · ↑ ↓ PgUp PgDn Home End scroll"


class LinesScreen(Dialog[None]):
    """Read-only rows (a comparison of two contexts) in a scrollable dialog, after a few head
    lines wrapped to its width (what is compared), which scroll with them (`LinesView`)."""

    BINDINGS = [Binding("escape,q", "close", "Close")]

    def __init__(self, title: str, rows: Sequence[Row], head: Sequence[str] = ()) -> None:
        super().__init__()
        self.title_text = title
        self.head = head
        self._body = LinesView(rows, head=head, id="lines-body")

    @property
    def rows(self) -> Sequence[Row]:
        return self._body.rows

    def compose(self) -> ComposeResult:
        with Vertical(classes="dialog wide-dialog", id="lines-dialog"):
            yield Static(plain(self.title_text), classes="dialog-title")
            yield self._body
            yield Static(plain(KEYS_LINE), id="lines-keys", classes="dialog-keys")

    def on_mount(self) -> None:
        self._body.focus()
        self.watch(self._body, "scroll_y", self._scrolled)

    def on_resize(self) -> None:
        self.call_after_refresh(self._scrolled)  # the head rewrapped: another count of lines

    def _scrolled(self) -> None:
        """Where in the listing the view is, beside the keys: 72,722 lines gave no sense of it."""
        body = self._body
        total = body.line_count
        if total <= body.size.height:
            said = KEYS_LINE
        else:  # first: the keys line is one row, cut at its end (`app.tcss`)
            last = min(int(body.scroll_y) + body.size.height, total)
            said = f"lines {int(body.scroll_y) + 1:,}–{last:,} of {total:,} · {KEYS_LINE}"
        self.query_one("#lines-keys", Static).update(plain(said))

    def on_unmount(self) -> None:
        # The rows hold the messages compared (all of a 72,726-message context): let them go
        # now, where this screen's widgets, which refer to each other, wait for the
        # collector's rare full pass (it found 290,000 objects there, 230 MB). Then the heap.
        self._body.rows = ()
        self.app.set_timer(TRIM_DELAY, give_back_in_background)

    def action_close(self) -> None:
        self.dismiss(None)
