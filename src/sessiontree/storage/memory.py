"""In-memory storage: the reference backend, and the one tests and tools use for scratch work."""

from __future__ import annotations

from collections.abc import Iterable, Sequence

from ..model.entries import Entry, entry_from_dict, validate_entry
from ..model.errors import Diagnostic, SessionError
from ..model.header import SessionHeader
from ..model.ids import iso_now, session_id_or_new
from .base import SessionStorage
from .index import TreeIndex
from .scan import add_dict, encode_line, full_decode


class MemoryStorage(SessionStorage):
    location = "<memory>"

    def __init__(
        self,
        entries: Iterable[Entry | dict] = (),
        *,
        header: SessionHeader | None = None,
        cwd: str = "",
        session_id: str | None = None,
    ) -> None:
        """Seedable with existing entries (dicts or Entry objects, in append order); seeds are
        folded exactly like a file would be, invalid seeds raise `invalid_entry`."""
        super().__init__()
        self.header = header or SessionHeader.new(session_id_or_new(session_id), iso_now(), cwd)
        self._index = TreeIndex()
        # Each entry as its line: a read decodes a copy of its own, as the other storages do, so
        # what a caller changes in what it appended or was given is not seen by the next read.
        self._entries: list[bytes] = []
        for n, item in enumerate(entries, 1):
            data = item.to_dict() if isinstance(item, Entry) else dict(item)
            reason = validate_entry(data)
            if reason is not None:
                raise SessionError("invalid_entry", f"seed entry #{n} {reason}")
            try:
                line = encode_line(data)
            except (TypeError, ValueError) as exc:
                raise SessionError(
                    "invalid_entry", f"seed entry #{n} is not JSON-serialisable: {exc}"
                ) from None
            add_dict(self._index, data, n)
            self._entries.append(line)
        self._index.finish_load()
        self._mark_damaged()

    @property
    def index(self) -> TreeIndex:
        return self._index

    @property
    def diagnostics(self) -> list[Diagnostic]:
        return self._index.diagnostics

    def _load(self, i: int) -> Entry:
        self.require_open()
        return entry_from_dict(full_decode(self._entries[i]))

    def _persist(self, entries: Sequence[Entry], encoded: list[bytes]) -> None:
        for entry, line in zip(entries, encoded, strict=True):
            add_dict(self._index, entry.to_dict(), None)
            self._entries.append(line)
