"""The session header (line 1 of a JSONL file; the `sessions` row in SQLite)."""

from __future__ import annotations

import json
from collections.abc import Mapping
from dataclasses import dataclass, field
from typing import Any

from .errors import SessionError

CURRENT_VERSION = 3


@dataclass(frozen=True, slots=True)
class SessionHeader:
    """Header fields we interpret; `raw` keeps the whole object (v1 extras such as `provider`,
    `branchedFrom` stay untouched)."""

    id: str
    timestamp: str
    cwd: str
    version: int = CURRENT_VERSION
    parent_session: str | None = None
    metadata: dict[str, Any] | None = None
    raw: dict[str, Any] = field(default_factory=dict, compare=False, repr=False)

    @classmethod
    def new(
        cls,
        session_id: str,
        timestamp: str,
        cwd: str,
        *,
        parent_session: str | None = None,
        metadata: dict[str, Any] | None = None,
    ) -> SessionHeader:
        raw: dict[str, Any] = {
            "type": "session",
            "version": CURRENT_VERSION,
            "id": session_id,
            "timestamp": timestamp,
            "cwd": cwd,
        }
        if parent_session is not None:
            raw["parentSession"] = parent_session
        if metadata is not None:
            raw["metadata"] = metadata
        return cls.from_dict(raw)

    @classmethod
    def from_dict(cls, data: object, *, path: str | None = None) -> SessionHeader:
        """Validate a decoded header; tolerant where Pi's coding agent is (missing/empty cwd,
        missing version = v1), strict where a wrong value would mislead."""

        def bad(reason: str) -> SessionError:
            return SessionError("invalid_session", f"invalid session header: {reason}", path=path, line=1)

        if not isinstance(data, Mapping):
            raise bad("line 1 is not a JSON object")
        if data.get("kind") == "header" or data.get("v") == 4:
            raise bad("this is a Pi v4 (lanes/records) file, which sessiontree does not read")
        if data.get("type") != "session":
            raise bad('first line is not a session header (expected "type": "session")')
        version = data.get("version", 1)
        if isinstance(version, float) and version.is_integer():
            version = int(version)  # JavaScript has one number type: Pi reads `3.0` as 3
        if isinstance(version, bool) or not isinstance(version, int) or not 1 <= version <= 3:
            shown = json.dumps(version, ensure_ascii=True)  # as the file spells it: null, not None
            raise bad(f"unsupported session version {shown[:40]} (sessiontree reads versions 1-3)")
        sid = data.get("id")
        if not isinstance(sid, str) or not sid:
            raise bad("missing session id")
        ts = data.get("timestamp", "")
        if not isinstance(ts, str):
            raise bad("timestamp is not a string")
        cwd = data.get("cwd", "")
        if not isinstance(cwd, str):
            raise bad("cwd is not a string")
        parent = data.get("parentSession")
        if parent is not None and not isinstance(parent, str):
            raise bad("parentSession is not a string")
        metadata = data.get("metadata")
        if metadata is not None and not isinstance(metadata, dict):
            raise bad("metadata is not an object")
        return cls(
            id=sid,
            timestamp=ts,
            cwd=cwd,
            version=version,
            parent_session=parent,
            metadata=metadata,
            raw=dict(data),
        )

    def to_dict(self) -> dict[str, Any]:
        return dict(self.raw)

    def upgraded(self) -> SessionHeader:
        """This header as version 3 (used by an explicit upgrade)."""
        raw = dict(self.raw)
        raw["version"] = CURRENT_VERSION
        # keep Pi's key order: type, version, id, ...
        ordered = {"type": "session", "version": CURRENT_VERSION}
        ordered.update((k, v) for k, v in raw.items() if k not in ordered)
        return SessionHeader.from_dict(ordered)
