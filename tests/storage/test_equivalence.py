"""Property: the same random operation sequence gives the same state on every storage,
including after reopening (write through one storage, read back through a fresh one)."""

from __future__ import annotations

import tempfile
import uuid
from pathlib import Path

from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from helpers import A, U, examples
from sessiontree import JsonlStorage, MemoryStorage, PostgresStorage, Session, SqliteStorage

ops = st.lists(
    st.one_of(
        st.tuples(st.just("user"), st.text(max_size=8)),
        st.tuples(st.just("assistant"), st.text(max_size=8)),
        st.tuples(st.just("thinking"), st.sampled_from(["off", "low", "high"])),
        st.tuples(st.just("model"), st.sampled_from(["a/x", "b/y"])),
        st.tuples(st.just("tools"), st.lists(st.sampled_from(["read", "bash", "edit"]), max_size=3)),
        st.tuples(st.just("custom"), st.integers(0, 3)),
        st.tuples(st.just("custom_message"), st.text(max_size=5)),
        st.tuples(st.just("label"), st.integers(0, 50), st.sampled_from([None, "x", "  y  ", ""])),
        st.tuples(st.just("name"), st.text(max_size=6)),
        st.tuples(st.just("compaction"), st.integers(0, 50), st.booleans()),
        st.tuples(st.just("move"), st.integers(-1, 50), st.sampled_from([None, "", "went back"])),
        st.tuples(st.just("reopen")),
    ),
    max_size=30,
)


class Runner:
    def __init__(self, kind: str, tmp: Path, pg_url: str | None = None) -> None:
        self.kind = kind
        self.tmp = tmp
        self.pg_url = pg_url
        self.sid = str(uuid.uuid4())
        if kind == "memory":
            self.session = Session(MemoryStorage(cwd="/p"))
        elif kind == "jsonl":
            self.session = Session(JsonlStorage.create(tmp / "s.jsonl", cwd="/p"))
        elif kind == "postgres":
            assert pg_url is not None
            self.session = Session(PostgresStorage.create(pg_url, cwd="/p", session_id=self.sid))
        else:
            self.session = Session(SqliteStorage.create(tmp / "s.db", cwd="/p", session_id="s"))
        self.ids: list[str] = []

    def pick(self, k: int) -> str | None:
        return self.ids[k % len(self.ids)] if self.ids else None

    def apply(self, op) -> None:
        s = self.session
        kind = op[0]
        new = None
        if kind == "user":
            new = s.append_message(U(op[1]))
        elif kind == "assistant":
            new = s.append_message(A(op[1]))
        elif kind == "thinking":
            new = s.append_thinking_level_change(op[1])
        elif kind == "model":
            new = s.append_model_change(*op[1].split("/"))
        elif kind == "tools":
            new = s.append_active_tools_change(op[1])
        elif kind == "custom":
            new = s.append_custom_entry("ext", {"n": op[1]})
        elif kind == "custom_message":
            new = s.append_custom_message_entry("note", op[1], True)
        elif kind == "label" and self.ids:
            new = s.append_label(self.pick(op[1]), op[2])
        elif kind == "name":
            new = s.append_session_name(op[1])
        elif kind == "compaction":
            tail = [U("tail")] if op[2] else None
            new = s.append_compaction("sum", self.pick(op[1]), 10, retained_tail=tail)
        elif kind == "move":
            target = None if op[1] < 0 else self.pick(op[1])
            before = len(s.get_entries())
            s.move_to(target, op[2])
            self.ids.extend(e.id for e in s.get_entries()[before:])
        elif kind == "reopen":
            self.reopen()
        if new is not None:
            self.ids.append(new)

    def reopen(self) -> None:
        storage = self.session.storage
        if isinstance(storage, MemoryStorage):  # a closed one refuses reads: seed a new one
            seeds, header = list(storage.iter_entries()), storage.header
        storage.close()
        if self.kind == "jsonl":
            self.session = Session(JsonlStorage.open(self.tmp / "s.jsonl"))
        elif self.kind == "sqlite":
            self.session = Session(SqliteStorage.open(self.tmp / "s.db", "s"))
        elif self.kind == "postgres":
            assert self.pg_url is not None
            self.session = Session(PostgresStorage.open(self.pg_url, self.sid))
        else:
            self.session = Session(MemoryStorage(seeds, header=header))

    def state(self):
        s = self.session
        log = s.get_entries()
        ordinal = {e.id: n for n, e in enumerate(log)}

        def norm(value):
            if isinstance(value, dict):
                return {
                    k: (
                        ordinal.get(v, v)
                        if k in ("id", "parentId", "targetId", "fromId", "firstKeptEntryId")
                        else norm(v)
                    )
                    for k, v in value.items()
                    if k != "timestamp"
                }
            if isinstance(value, list):
                return [norm(v) for v in value]
            return value

        c = s.build_context()
        return {
            "log": [norm(e.to_dict()) for e in log],
            "leaf": ordinal.get(s.leaf_id) if s.leaf_id else None,
            "labels": {ordinal[k]: v for k, v in s.labels().items()},
            "name": s.session_name,
            "branch": [ordinal[e.id] for e in s.get_branch()],
            "messages": norm(c.messages),
            "derived": (c.thinking_level, str(c.model), c.active_tool_names),
            "children": {ordinal[e.id]: [ordinal[k.id] for k in s.get_children(e.id)] for e in log},
        }


@settings(max_examples=examples(60), deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(sequence=ops)
def test_all_storages_agree(sequence, pg_url):
    with tempfile.TemporaryDirectory() as tmp:
        runners: list[Runner] = []
        try:
            for kind in ("memory", "jsonl", "sqlite", "postgres"):
                d = Path(tmp) / kind
                d.mkdir()
                runners.append(Runner(kind, d, pg_url))
            for op in sequence:
                for r in runners:
                    r.apply(op)
            states = [r.state() for r in runners]
            for r in runners:
                r.reopen()
            reopened = [r.state() for r in runners]
            for r in runners[2:]:  # the storages that keep a materialised state
                assert r.session.storage.verify_state() == []
        finally:  # a failing example's connections too: the shrinking runs hundreds more
            for r in runners:
                r.session.close()
    assert states[0] == states[1] == states[2] == states[3]
    assert reopened == states
