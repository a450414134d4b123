"""Taking a branch elsewhere from the browser: copy (entry text, a tool call with its result,
the context as sent, the id), fork the path into a new session file, compare two contexts, and
export to HTML or Markdown. The work is the library's (`sessiontree.fork`, `sessiontree.compare`,
`sessiontree.export`), the same code as the CLI's `fork`, `diff` and `export`."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

from textual import work
from textual.worker import get_current_worker

from ..compare import Row, compare_contexts, comparison_body, comparison_head
from ..display import entry_summary, one_line
from ..export.common import file_part, output_place
from ..fork import ForkResult, fork_point, fork_session
from ..model.errors import SessionError
from ..model.messages import assistant_text, content_text, tool_calls
from . import deliver
from .core import BrowserBase
from .modals import ChoiceScreen, ConfirmScreen, LinesScreen
from .notices import confirm, withdraw

HEAD_WIDTH = 200  # a comparison's head lines, wrapped by its dialog: what it compares, in full
CALLS = "the tool calls with their results"  # the second choice's label on a turn of several
COPY_CHOICES = [
    ("text", "the entry's text"),
    ("call", "the tool call with its result"),
    ("sent", "the context here, as sent to the model (JSON)"),
    ("id", "the entry id"),
]


def _call_text(call: dict[str, Any], result: dict[str, Any] | None = None) -> str:
    """A tool call with its arguments in full, and its result's text when there is one."""
    text = f"{call.get('name')}({json.dumps(call.get('arguments'), ensure_ascii=False, indent=2)})"
    if result is not None:
        text += f"\n\n→ {content_text(result.get('content'))}"
    return text


class BranchingMixin(BrowserBase):
    _compare_mark: str | None = None  # the entry id marked with `d`, waiting for its pair
    _forking: str | None = None  # the entry a fork is being written at, in a worker

    # --- copy ---------------------------------------------------------------------------------

    def action_copy(self) -> None:
        target = self._target()
        if target is None:
            return
        try:  # an entry without a tool call lists that choice greyed out
            calls = self._calls(target.position)
        except SessionError:
            calls = 0
        choices = [(key, CALLS if key == "call" and calls > 1 else label) for key, label in COPY_CHOICES]

        def chosen(what: str | None) -> None:
            if what is None:
                return
            label = dict(choices)[what]
            if what == "sent":  # a whole context as JSON: seconds on a deep session
                confirm(self, f"Copying {label}…", timeout=3600)
                self._copy_sent(target.entry_id, label)
                return
            try:
                text = self._copy_text(target.position, target.entry_id, what)
            except SessionError as exc:
                self.notify(f"Nothing copied: {exc}", severity="error", markup=False)
                return
            self._copied(label, text)

        off = () if calls else ("call",)
        # the id cut: a 300-character one took six rows at 60x20 and pushed the keys out (QA)
        self.app.push_screen(ChoiceScreen(f"Copy from {one_line(target.entry_id, 40)}", choices, off), chosen)

    def _copied(self, label: str, text: str) -> None:
        if not text:
            withdraw(self, "Copying ")
            self.notify("Nothing to copy there.", severity="warning", markup=False)
            return
        self.app.copy_to_clipboard(text)
        size = f"{len(text):,} characters" if len(text) > 80 else one_line(text, 80)
        confirm(self, f"Copied {label}: {size}")

    @work(thread=True, exclusive=True, group="copy")
    def _copy_sent(self, entry_id: str, label: str) -> None:
        try:
            text = json.dumps(self.session.build_context(at=entry_id).to_llm(), ensure_ascii=False, indent=2)
        except SessionError as exc:
            deliver(self.app, self._not_copied, exc)
            return
        deliver(self.app, self._copied, label, text)

    def _not_copied(self, exc: SessionError) -> None:
        withdraw(self, "Copying ")
        self.notify(f"Nothing copied: {exc}", severity="error", markup=False)

    def _calls(self, position: int) -> int:
        """The tool calls the copy dialog offers at `position`: an assistant message's own, or
        the one a tool result answers."""
        message = self.session.entry_at(position).get("message")
        own = len(tool_calls(message)) if isinstance(message, dict) else 0
        return own or int(self.session.tool_call_of(position) is not None)

    def _copy_text(self, position: int, entry_id: str, what: str) -> str:
        session = self.session
        if what == "id":
            return entry_id
        entry = session.entry_at(position)
        message = entry.get("message")
        calls = tool_calls(message) if isinstance(message, dict) else []
        if what == "text":
            if not calls:
                return entry_summary(entry)
            # Its text; a turn that only calls tools, its calls in full (the row cuts them).
            return assistant_text(message).strip() or "\n\n".join(_call_text(c) for c in calls)
        if calls:  # the assistant message: each call with the result written below it
            results = session.tool_results_of(position)
            return "\n\n".join(_call_text(c, results.get(c.get("id", ""))) for c in calls)
        call = session.tool_call_of(position)
        return "" if call is None else _call_text(call, message)

    # --- fork ---------------------------------------------------------------------------------

    def _writes_nothing(self) -> bool:
        """Whether this is a page `serve --read-only` serves, which writes no file: said."""
        if not getattr(self.app, "writes_nothing", False):
            return False
        self.notify("This page is served read-only: it writes no file", markup=False, timeout=4)
        return True

    def action_fork(self) -> None:
        target = self._target()
        if target is None or self._writes_nothing():
            return
        if self._forking is not None:  # one at a time: each says where it went when done
            confirm(self, f"A fork at {self._forking} is being written: wait for it")
            return
        session = self.session
        try:
            end, resend = fork_point(session, target.entry_id)
        except SessionError as exc:
            self.notify(f"Cannot fork here: {exc}", severity="error", markup=False)
            return
        detail = f"The new session holds the path from the first entry to {end or 'nothing (empty)'}"
        if resend:
            detail += "; the message's text is copied to re-send, as Pi does"
        detail += ". This session is not changed."

        def answered(yes: bool | None) -> None:
            if yes and self._forking is None:
                self._forking = target.entry_id
                confirm(self, f"Forking at {target.entry_id}…", timeout=3600)
                self._fork(target.entry_id)

        self.app.push_screen(
            ConfirmScreen(f"Fork a new session at {target.entry_id}?", detail, "Fork"), answered
        )

    @work(thread=True, exclusive=True, group="fork")
    def _fork(self, entry_id: str) -> None:
        """In a thread, like an export: a fork of a deep path reads and writes every entry on
        it (seconds at a million entries, where the app froze)."""
        try:
            result = fork_session(self.session, entry_id)
        except SessionError as exc:
            deliver(self.app, self._not_forked, exc)
            return
        deliver(self.app, self._forked, result)

    def _not_forked(self, exc: SessionError) -> None:
        self._forking = None
        withdraw(self, "Forking ")
        self.notify(f"Not forked: {exc}", severity="error", markup=False)

    def _forked(self, result: ForkResult) -> None:
        self._forking = None
        withdraw(self, "Forking ")
        if result.resend_text:
            self.app.copy_to_clipboard(result.resend_text)
        self._offer_to_open(result.path)

    def _offer_to_open(self, path: str) -> None:
        def answered(yes: bool | None) -> None:
            if yes:
                self.app.open_path(Path(path))  # type: ignore[attr-defined]
            else:  # the path, once the dialog that named it has gone
                confirm(self, f"Forked to {path} (not opened)", timeout=10)

        self.app.push_screen(ConfirmScreen(f"Forked to {path}. Open it now?", yes="Open"), answered)

    # --- compare ------------------------------------------------------------------------------

    def action_compare(self) -> None:
        target = self._target()
        if target is None:
            return
        mark = self._compare_mark
        if mark == target.entry_id:  # d again: the mark goes
            self._compare_mark = None
            confirm(self, f"Mark on {mark} cleared")
            return
        if mark is None or mark not in self.session.tree.pos:
            self._compare_mark = target.entry_id
            confirm(self, f"Marked {target.entry_id}: move to another entry and press d to compare")
            return
        self._compare_mark = None
        # Two whole contexts: about a second each on a deep 100k session, so in a thread, with
        # the status line saying so meanwhile (the keys still answer).
        confirm(self, f"Comparing {mark} with {target.entry_id}…", timeout=3600)
        self._compare(mark, target.entry_id)

    @work(thread=True, exclusive=True, group="compare")
    def _compare(self, a: str, b: str) -> None:
        try:
            comparison = compare_contexts(self.session, a, b)
            head = [row.line(HEAD_WIDTH) for row in comparison_head(comparison)]
            body = comparison_body(comparison)
        except SessionError as exc:
            deliver(self.app, self._not_compared, exc)
            return
        if not get_current_worker().is_cancelled:
            deliver(self.app, self._compared, a, b, head, body)

    def _not_compared(self, exc: SessionError) -> None:
        withdraw(self, "Comparing ")
        self.notify(f"Cannot compare: {exc}", severity="error", markup=False)

    def _compared(self, a: str, b: str, head: list[str], body: list[Row]) -> None:
        self.app.push_screen(LinesScreen(f"Context at {a} (−) against {b} (+)", body, head))
        confirm(self, f"Compared {a} with {b}: d marks an entry again")  # the mark is used

    # --- export -------------------------------------------------------------------------------

    def export_here(self, kind: str) -> None:
        """Write root → cursor as a self-contained HTML page or as Markdown next to the session,
        in a thread: the page of a 100k-entry session takes seconds."""
        target = self._target()
        if target is None or self._writes_nothing():
            return
        try:  # next to the session's file; from PostgreSQL, in the current directory
            directory, stem = output_place(self.session)
        except SessionError as exc:
            self.notify(f"Not exported: {exc}", severity="error", markup=False)
            return
        out = Path(directory) / f"{stem}.{file_part(target.entry_id)}.{'html' if kind == 'html' else 'md'}"
        entry_id = target.entry_id
        try:
            is_dir, there = out.is_dir(), out.exists() or out.is_symlink()
        except OSError as exc:  # a name the system refuses: said, as a failed write is
            self.notify(f"Not exported: {out}: {exc.strerror or exc}", severity="error", markup=False)
            return
        if is_dir:  # asked "Replace it?", a yes then failed (QA)
            self.notify(f"Not exported: {out} is a directory", severity="error", markup=False)
            return
        if not there:
            self._start_export(kind, entry_id, out, replacing=False)
            return
        # Whatever is there may be the user's own file of that name, not an earlier export:
        # it was replaced without a word (QA), where the CLI refuses without --force.

        def answered(replace: bool | None) -> None:
            if replace:
                self._start_export(kind, entry_id, out, replacing=True)
            else:
                confirm(self, f"Not exported: {out.name} is left as it was")

        self.app.push_screen(
            ConfirmScreen(f"{out.name} exists. Replace it?", detail=str(out), yes="Replace"), answered
        )

    def _start_export(self, kind: str, entry_id: str, out: Path, *, replacing: bool) -> None:
        what = "HTML" if kind == "html" else "Markdown"
        confirm(self, f"Exporting the path to {entry_id} as {what}…", timeout=3600)
        self._export(kind, entry_id, out, replacing)

    @work(thread=True, exclusive=True, group="export")
    def _export(self, kind: str, entry_id: str, out: Path, replacing: bool) -> None:
        from ..export import context_markdown, html_chunks, write_file  # on first export: ~20 ms of import

        try:
            if kind == "html":
                chunks, _page = html_chunks(self.session, entry_id)
            else:
                chunks = [context_markdown(self.session, entry_id).encode()]
            write_file(out, chunks, force=True, sources=self.session.files)
        except SessionError as exc:
            deliver(self.app, self._not_exported, exc)
            return
        deliver(self.app, confirm, self, f"Exported to {out}{' (replaced)' if replacing else ''}", timeout=8)

    def _not_exported(self, exc: SessionError) -> None:
        withdraw(self, "Exporting ")
        self.notify(f"Not exported: {exc}", severity="error", markup=False)
