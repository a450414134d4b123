"""In-memory storage: the reference backend, and the one tests and tools use for scratch work."""

from __future__ import annotations

from collections.abc import Iterable, Sequence

from ..model.entries import Entry, entry_from_dict, validate_entry
from ..model.errors import Diagnostic, SessionError
from ..model.header import SessionHeader
from ..model.ids import iso_now, new_session_id
from .base import SessionStorage
from .index import TreeIndex
from .scan import add_dict


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
        self.header = header or SessionHeader.new(session_id or new_session_id(), iso_now(), cwd)
        self._index = TreeIndex()
        self._entries: list[Entry] = []
        for n, item in enumerate(entries, 1):
            data = item.to_dict() if isinstance(item, Entry) else dict(item)
            reason = validate_entry(data)
            if reason is not None:
                raise SessionError("invalid_entry", f"seed entry #{n} {reason}")
            add_dict(self._index, data, n)
            self._entries.append(entry_from_dict(data))
        self._index.finish_load()
        self._mark_damaged()

    @property
    def index(self) -> TreeIndex:
        return self._index

    @property
    def diagnostics(self) -> list[Diagnostic]:
        return self._index.diagnostics

    def _load(self, i: int) -> Entry:
        return self._entries[i]

    def _persist(self, entries: Sequence[Entry], encoded: list[bytes]) -> None:
        for entry in entries:
            data = entry.to_dict()
            add_dict(self._index, data, None)
            self._entries.append(entry_from_dict(data))
