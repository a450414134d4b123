"""Moving the leaf (with or without a branch summary), going back, the navigation history,
labels and the session name: every write the browser makes."""

from __future__ import annotations

import re
import threading

from ..display import counted, one_line
from ..model.errors import SessionError
from ..session import BranchSummary, Navigation
from ..summarize import collect_branch, summarize_branch
from .core import BrowserBase
from .modals import HistoryItem, HistoryScreen, SummaryChoice, SummaryPrompt, TextPrompt
from .notices import confirm
from .tree_view import RowTarget, row_preview

HISTORY_CHARS = 60  # a move's target as its history row shows it
ID_SAID = 24  # characters of an id the status line names (Pi's are 8)


class MovesMixin(BrowserBase):
    summarizer: str | None = None
    _back_cursor: int | None = None  # where `b` goes next; reset by any other move

    def action_move(self) -> None:
        target = self._target()
        if target is None or not self._writable():
            return
        self._write_when_checked(lambda: self._navigate(target, None), f"Move to {_short(target.entry_id)}")

    def _navigate(self, target: RowTarget, summary: BranchSummary | None) -> bool:
        """Move the leaf to `target`; False when the write was refused (the message says why)."""
        session = self.session
        known = session.entry_count()
        result: list[Navigation] = []
        if not self._guard(lambda: result.append(session.navigate(target.entry_id, summary))):
            return False
        nav = result[0]
        # A write reads what other processes appended first; entries the screen never showed
        # (follow paused, or an agent's turn landing just before the key) stay behind the move.
        unseen = session.entry_count() - known - (1 if nav.moved else 0) - (1 if nav.summary_id else 0)
        if not nav.moved:  # nothing written: `b` still goes where it would have
            if nav.editor_text is None:
                confirm(self, "That entry already is the leaf.")
            else:  # a user message just below the leaf: Pi's rule leaves the leaf where it is
                confirm(
                    self,
                    f"The leaf already is {_short(nav.new_leaf_id)}, this message's parent:"
                    " nothing was written" + self._offer_text(nav.editor_text),
                )
            return True
        self._back_cursor = None
        keep = session.tree.pos.get(nav.new_leaf_id) if nav.new_leaf_id else target.position
        message = (
            f"Leaf moved to {_short(nav.new_leaf_id) if nav.new_leaf_id else 'the start (empty context)'}"
        )
        if nav.summary_id:
            message += " with a branch summary"
        self._after_write(keep=keep)
        # The copied text first: it is what the reader acts on next, and the note after it was
        # cut off at 80 columns (QA).
        offered = self._offer_text(nav.editor_text) if nav.editor_text is not None else ""
        message += offered
        # Pi's rule puts the leaf above a user message, on its parent, which may be an entry the
        # filter hides (a label joins the path): the id named was on no row (QA). After the
        # copied text, a part of its own: ", a session_info entry …" read as part of the text.
        note = self._hidden_note(keep) if nav.new_leaf_id else ""
        message += f" · the leaf is{note[1:]}" if note and offered else note
        if unseen > 0:
            message += f" · {counted(unseen, 'entry', 'entries')} had arrived unseen (left behind)"
        if nav.new_leaf_id and self._leaf_archived():  # a stub row stands for it (QA)
            message += " · in an archived branch (A on its stub unarchives it)"
        confirm(self, message)
        return True

    def _leaf_archived(self) -> bool:
        """Whether the leaf is in a branch archived (`A`): an archived branch's root on the
        active path, whose marks the rebuild after the move keeps (walking up the parents was
        O(depth) on every move)."""
        tree = self._tree()
        return any(tree.outline.on_path(root) for root in tree.archived)

    def _hidden_note(self, position: int | None) -> str:
        """What the status line adds when the leaf is now an entry with no row of its own (the
        filter hides it, a fold, a search's view; the cursor is on the row it is drawn under):
        its kind and the key that shows it (`SessionTreeView.hidden_reason`)."""
        tree = self._tree()
        if position is None or tree.outline.exact_row(position) >= 0:
            return ""
        return f", {tree.hidden_reason(position)}"

    def _offer_text(self, text: str) -> str:
        """Pi puts the text of a user message moved above into its editor; we copy it. What the
        status line adds to say so ("" for an empty text)."""
        if not text:
            return ""
        self.app.copy_to_clipboard(text)
        return f" · copied the text to re-send: {one_line(text, 40)}"

    def action_move_with_summary(self) -> None:
        target = self._target()
        if target is None or not self._writable():
            return
        session = self.session
        if target.entry_id == session.leaf_id:
            confirm(self, "That entry already is the leaf.")
            return
        new_leaf, _ = session.navigation_target(target.entry_id)
        if new_leaf == session.leaf_id:  # a user message just below the leaf: no branch to leave
            confirm(
                self,
                f"The leaf already is {new_leaf}, this message's parent: there is no branch to summarize.",
            )
            return
        branch = collect_branch(session, new_leaf)
        command = self.summarizer

        def drafter(instructions: str, cancel: threading.Event) -> str:
            return summarize_branch(
                branch, command=command, custom_instructions=instructions, cancel=cancel
            ).summary

        def done(choice: SummaryChoice | None) -> None:
            if choice is None:
                confirm(self, "Move cancelled: nothing was written.")
                return
            self._write_when_checked(lambda: write(choice), f"Move to {_short(target.entry_id)}")

        def write(choice: SummaryChoice) -> None:
            summary = None
            if choice.text is not None:
                summary = BranchSummary(choice.text, details=branch.files.details())
            if not self._navigate(target, summary) and choice.text is not None:
                if session.read_only:
                    self._keep_typed(choice.text, "branch summary")
                else:
                    ask(choice)  # refused for now (another writer mid-line, a full disk): kept to retry

        name = f"command: {one_line(command, 30)}" if command else "offline extractive draft"
        landing = session.tree.pos.get(new_leaf) if new_leaf else None
        tokens = self._tree().sizes.compute(landing) if landing is not None else 0

        # A user message puts the leaf on its parent, to be sent again: the title named the
        # message, and the leaf went to the entry above it (QA).
        where = f"{target.entry_id} — {row_preview(session, target.position, 50)}"
        if new_leaf != target.entry_id:
            where = f"{new_leaf or 'the start'}, before {where}"

        def ask(kept: SummaryChoice | None) -> None:
            self.app.push_screen(
                SummaryPrompt(
                    target_text=where,
                    branch_size=branch.size,
                    drafter=drafter,
                    drafter_name=name,
                    context_tokens=tokens,
                    kept=kept,
                ),
                done,
            )

        ask(None)

    def _keep_typed(self, text: str, what: str) -> None:
        """A write refused because the session turned read-only while its dialog was open (the
        file replaced or truncated on disk): the dialog cannot open again to retry, so what was
        typed goes to the clipboard rather than nowhere (a typed summary was lost: QA)."""
        if text.strip():
            self.app.copy_to_clipboard(text)
            self.notify(
                f"The {what} you typed is on the clipboard: the session turned read-only.",
                title="Kept",
                severity="warning",
                markup=False,
            )

    def action_leaf_back(self) -> None:
        """Move the leaf to where it was before the most recent move; again for the one before.
        The move is found from the index's record of moves, without decoding any entry."""
        if not self._writable():
            return
        self._write_when_checked(self._back, "Back")

    def _back(self) -> None:
        session = self.session
        total = session.move_count()
        cursor = total - 1 if self._back_cursor is None else self._back_cursor
        if cursor < 0:
            confirm(self, "No earlier leaf is recorded in this session.")
            return
        previous = session.recent_leaf_moves(total - 1 - cursor, 1)[0].from_id
        here = session.leaf_id
        i = session.tree.pos.get(here) if here is not None else None
        # The summary written with a move is the leaf after it, and stays behind (QA: `b` did
        # not say it, and the summary looked lost or undone)
        left = i is not None and session.tree.type_name(i) == "branch_summary"
        known = session.entry_count()
        moved: list[bool] = []
        if not self._guard(lambda: moved.append(session.move_unless_leaf(previous))):
            return
        self._back_cursor = cursor - 1
        keep = session.tree.pos.get(previous) if previous else None
        self._after_write(keep=keep)
        where = _short(previous) if previous else "the start"
        if not moved[0]:  # another writer had taken the leaf there (another app's `b`, say)
            confirm(self, f"Back: the leaf is at {where} already; b again goes further back")
            return
        # A rename, a label or an archive record becomes the leaf as any entry appended does
        # (Pi's rule), so `b` may go back to one: said as Enter says it, not a bare id (QA).
        said = f"Back: leaf is {where} again"
        if left:
            said += "; the branch summary stays, on a branch of its own"
        said += self._hidden_note(keep)
        # as Enter says it: an agent's turns written after the key's screen stay behind (QA)
        unseen = session.entry_count() - known - 1
        if unseen > 0:
            said += f" · {counted(unseen, 'entry', 'entries')} had arrived unseen (left behind)"
        confirm(self, said)

    def action_history(self) -> None:
        session = self.session

        def page(skip: int, count: int) -> list[HistoryItem]:
            """A page of moves, newest first, decoded now: a long history opens at once."""
            items = []
            for move in session.recent_leaf_moves(skip, count):
                text, timestamp = "", ""
                try:  # an entry that fails to decode is listed without its text, not a crash
                    tree = session.tree
                    to = tree.pos.get(move.to_id) if move.to_id is not None else None
                    if to is not None:
                        text = row_preview(session, to, HISTORY_CHARS)
                        # A move with a summary: the summary, written next below the target,
                        # became the leaf, which the row did not say (QA)
                        after = tree.pos[move.entry_id] + 1
                        summary = after < len(tree) and tree.type_name(after) == "branch_summary"
                        if summary and tree.parent[after] == to:
                            text = f"+ summary {tree.ids[after]} · {text}"
                    timestamp = session.require_entry(move.entry_id).timestamp
                except SessionError as exc:
                    text = f"(unreadable: {exc.detail})"
                items.append(HistoryItem(move.entry_id, timestamp, move.from_id, move.to_id, text))
            return items

        def chosen(entry_id: str | None) -> None:
            if entry_id == "":  # a move to the start: no entry, so the top (it closed unsaid: QA)
                self._tree().action_first()
                confirm(self, "That move went to the start, before the first entry: the top row")
            elif entry_id and session.tree.pos.get(entry_id) is not None:
                self.reveal(session.tree.pos[entry_id], f"At {entry_id}, where that move went")

        self.app.push_screen(HistoryScreen(page, session.move_count()), chosen)

    def action_label(self) -> None:
        target = self._target()
        if target is None or not self._writable():
            return
        session = self.session

        def done(value: str | None) -> None:
            if value is None:  # Esc: the status line kept saying whatever it said before (QA)
                confirm(self, f"Label left as it was on {target.entry_id}: nothing was written")
                return
            text = value.strip() or None
            if text == session.get_label(target.entry_id):  # Enter on the text as it was
                confirm(self, f"Label unchanged on {target.entry_id}: nothing was written")
                return
            self._write_when_checked(lambda: write(value, text), f"Label on {_short(target.entry_id)}")

        def write(value: str, text: str | None) -> None:
            if self._guard(lambda: session.append_label(target.entry_id, text)):
                # As typed, not as Python writes it: a backslash read as two (QA).
                what = f"Label '{one_line(text, 80)}' set on" if text else "Label cleared on"
                self._after_write(keep=target.position, message=f"{what} {target.entry_id}")
            elif session.read_only:
                self._keep_typed(value, "label")
            else:  # refused for now (another writer mid-line): kept to retry
                ask(value, retry=True)

        def ask(value: str, *, retry: bool = False) -> None:
            self.app.push_screen(
                TextPrompt(
                    f"Label for {target.entry_id}",
                    value,
                    "Enter saves; an empty label clears it."
                    " (As in Pi, the label entry joins the current branch.)",
                    retry=retry,
                ),
                done,
            )

        ask(session.get_label(target.entry_id) or "")

    def action_rename(self) -> None:
        if not self._writable():
            return
        session = self.session

        def done(value: str | None) -> None:
            if value is None:
                confirm(self, "Name left as it was: nothing was written")
                return
            if re.sub(r"[\r\n]+", " ", value).strip() == (session.session_name or ""):  # as stored
                confirm(self, "Name unchanged: nothing was written")
                return
            self._write_when_checked(lambda: write(value), "Rename")

        def write(value: str) -> None:
            if self._guard(lambda: session.append_session_name(value)):
                # Pi's coding agent passes over an empty name and shows the last one given:
                # said, as the two then name the session apart (QA)
                cleared = "Name cleared here (Pi's coding agent keeps showing the last name given)"
                self._after_write(message=f"Session renamed to {value.strip()}" if value.strip() else cleared)
            elif session.read_only:
                self._keep_typed(value, "name")
            else:  # as a label's: kept to retry
                ask(value, retry=True)

        def ask(value: str, *, retry: bool = False) -> None:
            self.app.push_screen(
                TextPrompt(
                    "Session name",
                    value,
                    "Enter saves; an empty name clears it here, though Pi's coding agent then keeps"
                    " showing the last name given.",
                    retry=retry,
                ),
                done,
            )

        ask(session.session_name or "")


def _short(entry_id: str | None) -> str:
    """An id as the status line names it: a 300-character one (other harnesses' ids) cut off
    what the line said after it, "copied the text to re-send" (QA)."""
    return one_line(entry_id or "", ID_SAID)
