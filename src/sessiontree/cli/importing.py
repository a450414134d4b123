"""`sessiontree import SRC… --to TARGET`: JSONL session files into a SQLite or PostgreSQL
database (see `sessiontree.importing` for what idempotent and incremental mean here).

One line per file on stdout; skipped lines, refusals and progress on stderr. With stderr on a
terminal, progress is a live bar; otherwise a line every few seconds while a long file runs, so
a log shows the import is alive. Exit status 0 when every file was imported whole (an
incomplete last line, which a later import takes, and one another writer continued, whose entry
was read, do not count against that), 1 when a file
was refused or failed or a line was skipped or changed, 2 when the target is unusable.
"""

from __future__ import annotations

import argparse
import sys
import time
from typing import Any

from ..display import counted, inert
from ..importing import BATCH, FileResult, ImportProgress, Problem, Target, find_sources, import_file
from .output import err, out

COMMANDS = ("import",)
PROBLEMS_SHOWN = 20  # per file; the rest are counted
QUIET_PROGRESS_SECONDS = 5.0


def register(sub: Any) -> None:
    p = sub.add_parser(
        "import",
        help="copy JSONL session files into a SQLite or PostgreSQL database (idempotent, incremental)",
        description="Import Pi session files (or directories of them) into a database. Sessions keep"
        " their ids; importing again appends only what the files gained since.",
    )
    p.add_argument(
        "sources", nargs="+", metavar="SRC", help="session files or directories (searched recursively)"
    )
    p.add_argument(
        "--to",
        required=True,
        metavar="TARGET",
        help="a SQLite database (.sqlite, .db, .sqlite3; created if missing) or a postgresql:// URL",
    )
    p.add_argument("--no-progress", action="store_true", help="no progress display on stderr")
    p.set_defaults(func=cmd_import)


def cmd_import(args: argparse.Namespace) -> int:
    target = Target(args.to)
    target.check()
    paths = find_sources(args.sources)
    if not paths:
        err("sessiontree: no .jsonl session files found in the given sources")
        return 1
    started = time.monotonic()
    results: list[FileResult] = []
    with _Progress(enabled=not args.no_progress) as progress:
        for number, path in enumerate(paths, 1):
            progress.file(str(path), number, len(paths))
            try:
                result = import_file(
                    path, target, file_number=number, files=len(paths), progress=progress.update
                )
            except KeyboardInterrupt:
                progress.close()
                done = progress.last.done if progress.last is not None else 0
                err(
                    f"sessiontree: interrupted in {path} (file {number} of {len(paths)}) after"
                    f" ~{done:,} entries; what was committed is kept (a commit at least every"
                    f" {BATCH:,} entries): importing again goes on from there"
                )
                raise
            results.append(result)
            progress.done(result)
    _summary(results, target, time.monotonic() - started)
    bad = any(  # what was said: an unchanged file's roots were not, and it exited 1 unsaid (QA)
        r.status in ("refused", "failed") or any(p.kind not in ("pending", "noted") for p in _said(r))
        for r in results
    )
    return 1 if bad else 0


WRITTEN = ("new", "appended")  # the statuses of a file whose entries were written


def _said(result: FileResult) -> list[Problem]:
    """The problems worth saying of `result`: a line "imported as a root" (or mended) was not,
    in a file refused or failed, where nothing was written (its report and the summary said it
    was)."""
    if result.status in WRITTEN:
        return list(result.problems)
    return [p for p in result.problems if p.kind not in ("rooted", "mended")]


def _report(result: FileResult) -> None:
    problems = _said(result)
    for problem in problems[:PROBLEMS_SHOWN]:
        err(f"{problem}")
    if len(problems) > PROBLEMS_SHOWN:
        err(f"{result.path}: … and {len(problems) - PROBLEMS_SHOWN} more problems")
    sid = result.session_id or "?"
    if result.status == "new":
        out(f"{result.path} → {sid}: imported {counted(result.added, 'entry', 'entries')} (new session)")
    elif result.status == "appended":
        added = counted(result.added, "new entry", "new entries")
        out(f"{result.path} → {sid}: {added} ({result.total:,} in all)")
    elif result.status == "unchanged":
        out(f"{result.path} → {sid}: unchanged ({counted(result.total, 'entry', 'entries')})")
    elif result.status == "refused":
        err(f"{result.path}: refused: {result.message}")
    else:
        err(f"{result.path}: not imported: {result.message}")


RATE_FROM = 1000  # entries added from which the summary gives their rate


def _summary(results: list[FileResult], target: Target, seconds: float) -> None:
    counts: dict[str, int] = {}
    for r in results:
        counts[r.status] = counts.get(r.status, 0) + 1
    added = sum(r.added for r in results)
    skipped = sum(p.kind == "skipped" for r in results for p in _said(r))
    rooted = sum(p.kind == "rooted" for r in results for p in _said(r))
    mended = sum(p.kind == "mended" for r in results for p in _said(r))
    parts = [f"{n} {status}" for status, n in counts.items()]
    # a rate of a few entries is the import's setup, not its speed ("1 entry added, 0 entries/s", QA)
    rate = f", {added / seconds:,.0f} entries/s" if seconds > 0 and added >= RATE_FROM else ""
    rerooted = f", {rooted} written as roots" if rooted else ""
    rerooted += f", {mended} written mended (a broken character, a number out of range)" if mended else ""
    entries = counted(added, "entry", "entries")
    err(
        f"{counted(len(results), 'file')} into {target.display}: {', '.join(parts)}; {entries} added"
        f"{rate}; {counted(skipped, 'line')} skipped{rerooted}"
    )


class _Progress:
    """A Rich bar on a terminal; elsewhere an occasional line; nothing with --no-progress."""

    def __init__(self, *, enabled: bool) -> None:
        self.enabled = enabled
        self.live = enabled and sys.stderr.isatty()
        self._rich: Any = None
        self._task: Any = None
        self._last = time.monotonic()
        self.last: ImportProgress | None = None  # the latest event: what an interrupt says

    def __enter__(self) -> _Progress:
        if self.live:
            from rich.console import Console
            from rich.progress import BarColumn, MofNCompleteColumn, Progress, TextColumn, TimeRemainingColumn

            self._rich = Progress(
                TextColumn("{task.description}"),
                BarColumn(),
                MofNCompleteColumn(),
                TimeRemainingColumn(),
                console=Console(stderr=True),
                transient=True,
            )
            self._rich.__enter__()
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()

    def close(self) -> None:
        if self._rich is not None:
            self._rich.__exit__(None, None, None)
            self._rich = None

    def file(self, path: str, number: int, files: int) -> None:
        self._last = time.monotonic()
        self.last = None
        if self._rich is not None:
            from rich.markup import escape

            label = escape(f"[{number}/{files}] {inert(_short(path))}")
            self._task = self._rich.add_task(label, total=None)

    def update(self, event: ImportProgress) -> None:
        self.last = event
        if self._rich is not None and self._task is not None:
            self._rich.update(self._task, completed=event.done, total=event.total)
        elif self.enabled and time.monotonic() - self._last >= QUIET_PROGRESS_SECONDS:
            self._last = time.monotonic()
            files = f"file {event.file_number} of {event.files}"
            err(f"{event.path}: {event.done:,}/{event.total:,} entries ({files})")

    def done(self, result: FileResult) -> None:
        if self._rich is not None and self._task is not None:
            self._rich.remove_task(self._task)
            self._task = None
        _report(result)  # while the bar is live, Rich prints what is written above it


def _short(path: str, width: int = 50) -> str:
    return path if len(path) <= width else "…" + path[-(width - 1) :]
