"""Errors and diagnostics.

Two channels on purpose: a `SessionError` stops an operation (nothing is written), a `Diagnostic`
describes damage found while reading a file that can still be shown (read-only) to the user.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Literal

from .secrets import redact

ErrorCode = Literal[
    "not_found",
    "invalid_session",
    "invalid_entry",
    "invalid_argument",
    "locked",
    "read_only",
    "storage",
]


class SessionError(Exception):
    """An operation on a session failed; `code` is stable, the message says what to do."""

    def __init__(
        self,
        code: ErrorCode,
        message: str,
        *,
        path: str | None = None,
        line: int | None = None,
        transient: bool = False,
        damaged: bool = False,
    ) -> None:
        # a password of a connection URL never reaches a message, whoever built it
        message = redact(message)
        path = None if path is None else redact(path)
        self.code: ErrorCode = code
        # The same call may work later: a database server that did not answer, or a connection
        # it ended (a restart). Live follow keeps looking after such an error.
        self.transient = transient
        # What is stored is damaged (a malformed database page), not out of reach: `check`
        # counts it as damage, not as a session it could not read.
        self.damaged = damaged
        self.path = path
        self.line = line
        where = ""
        if path is not None:
            where = f"{path}:{line}: " if line is not None else f"{path}: "
        super().__init__(f"{where}{message}")
        self.detail = message


Severity = Literal["error", "warning", "info"]


@dataclass(frozen=True, slots=True)
class Diagnostic:
    """One problem found while loading.

    `line` is the physical 1-based line number in the file (header = 1), `None` for storages
    without lines. Errors make a session read-only; warnings (a torn final line) do not.
    """

    severity: Severity
    code: str
    message: str
    line: int | None = None
    entry_id: str | None = None

    def said(self) -> str:
        """The problem for a sentence: where and what ("line 48: not valid JSON"), the line
        said once and without the severity or the code, which `format` gives for `check`."""
        if self.line is not None and f"line {self.line}" not in self.message:
            return f"line {self.line}: {self.message}"
        return self.message

    def format(self, path: str | None = None) -> str:
        where = path or ""
        if self.line is not None:
            where = f"{where}:{self.line}" if where else f"line {self.line}"
        prefix = f"{where}: " if where else ""
        return f"{prefix}{self.severity}: {self.message} [{self.code}]"
