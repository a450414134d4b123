"""`sessiontree.importing` on Pi's real fixture files, into SQLite and into PostgreSQL: ids kept,
idempotent, incremental, diverged files refused, damaged lines skipped and reported."""

from __future__ import annotations

import json
import shutil
import time
from pathlib import Path

import pytest

from helpers import PI_FIXTURES, A, U, texts
from sessiontree import JsonlStorage, Session, open_session
from sessiontree.importing import Target, find_sources, import_file, import_sessions
from sessiontree.model.entries import entry_from_dict
from sessiontree.opening import create_session, list_sessions, upgrade_session
from sessiontree.storage.scan import LONE_SURROGATE


@pytest.fixture(params=["sqlite", "postgres"])
def target(request: pytest.FixtureRequest, tmp_path: Path) -> str:
    if request.param == "postgres":
        return request.getfixturevalue("pg_database")
    return str(tmp_path / "sessions.sqlite")


def address(target: str, session_id: str) -> str:
    return f"{target}#{session_id}"


def v3_copy(tmp_path: Path, name: str = "large-session.jsonl") -> Path:
    """A v3 file with Pi's real messages: a fixture upgraded (ids fixed from then on), then a
    branch, a summary and a label added, as the browser would."""
    path = tmp_path / name
    shutil.copy(PI_FIXTURES / name, path)
    upgrade_session(path)
    with open_session(path) as s:
        entries = s.get_entries()
        s.move_to(entries[len(entries) // 2].id, "tried another way")
        s.append_message(U("a new direction"))
        s.append_label(entries[3].id, "checkpoint")
    return path


def lines_of(path: Path) -> list[bytes]:
    return path.read_bytes().splitlines(keepends=True)


def test_fixture_files_keep_their_session_and_entry_ids(tmp_path, target):
    v3 = v3_copy(tmp_path)
    results = import_sessions([v3, PI_FIXTURES / "before-compaction.jsonl"], target)
    assert [r.status for r in results] == ["new", "new"]
    assert all(not r.problems for r in results)
    with open_session(v3, read_only=True) as source:
        sid = source.session_id
        assert results[0].session_id == sid and results[0].added == source.entry_count()
        with open_session(address(target, sid), read_only=True) as imported:
            assert [e.to_dict() for e in imported.get_entries()] == [
                e.to_dict() for e in source.get_entries()
            ]
            assert imported.leaf_id == source.leaf_id and imported.labels() == source.labels()
            assert imported.build_context().messages == source.build_context().messages
            assert imported.storage.verify_state() == []
    # v1 entries have no ids: the import names them the same way every time
    v1_id = results[1].session_id or ""
    with (
        open_session(PI_FIXTURES / "before-compaction.jsonl", read_only=True) as v1,
        open_session(address(target, v1_id), read_only=True) as imported,
    ):
        assert imported.entry_count() == v1.entry_count()
        assert imported.build_context().messages == v1.build_context().messages
        first = [e.id for e in imported.get_entries()]
    again = tmp_path / "again.sqlite"
    import_file(PI_FIXTURES / "before-compaction.jsonl", str(again))
    with open_session(address(str(again), results[1].session_id or ""), read_only=True) as other:
        assert [e.id for e in other.get_entries()] == first


def test_importing_again_changes_nothing(tmp_path, target):
    v3_copy(tmp_path)
    first = import_sessions([tmp_path], target)
    second = import_sessions([tmp_path], target)
    assert [r.status for r in second] == ["unchanged"]
    assert second[0].added == 0 and second[0].total == first[0].total


@pytest.mark.parametrize("fixture", ["large-session.jsonl", "before-compaction.jsonl"])
def test_a_file_that_grew_appends_only_the_new_entries(tmp_path, target, fixture):
    full = v3_copy(tmp_path, fixture) if fixture == "large-session.jsonl" else PI_FIXTURES / fixture
    lines = lines_of(full)
    growing = tmp_path / "growing.jsonl"
    growing.write_bytes(b"".join(lines[: len(lines) // 3]))
    first = import_file(growing, target)
    assert first.status == "new" and first.added == len(lines) // 3 - 1
    growing.write_bytes(b"".join(lines[: 2 * len(lines) // 3]))
    second = import_file(growing, target)
    assert second.status == "appended" and second.added == 2 * len(lines) // 3 - len(lines) // 3
    growing.write_bytes(b"".join(lines))
    third = import_file(growing, target)
    assert third.status == "appended" and third.total == len(lines) - 1
    with (
        open_session(full, read_only=True) as source,
        open_session(address(target, third.session_id or ""), read_only=True) as imported,
    ):
        assert imported.build_context().messages == source.build_context().messages
        assert imported.leaf_id is not None and imported.storage.verify_state() == []
        if fixture == "large-session.jsonl":  # v3: the very same entries
            assert [e.to_dict() for e in imported.get_entries()] == [
                e.to_dict() for e in source.get_entries()
            ]


def test_a_file_that_diverged_is_refused_and_nothing_is_written(tmp_path, target):
    v3 = v3_copy(tmp_path)
    imported = import_file(v3, target)
    lines = lines_of(v3)
    edited = lines[:]
    edited[40] = edited[40].replace(b'"timestamp":"', b'"timestamp":"1', 1)
    v3.write_bytes(b"".join([*edited, *lines[-3:]]))  # edited in the middle, and longer
    refused = import_file(v3, target)
    assert refused.status == "refused" and refused.added == 0
    said = refused.message or ""
    # the same id with other content: said so, not "entry X is not what was imported (entry X)"
    entry_id = json.loads(lines[40])["id"]
    assert f"line 41: entry {entry_id!r} is not the one imported with that id (#40)" in said
    assert "another file with the same session id was imported first" in said  # the other cause (QA)
    assert refused.total == imported.total
    v3.write_bytes(b"".join(lines[:100]))  # shorter than what was imported
    shorter = import_file(v3, target)
    assert shorter.status == "refused" and "only 99" in (shorter.message or "")


def test_a_database_given_as_a_source_is_named_so(tmp_path):
    """`import db.sqlite --to other.sqlite` said "the first line is not valid JSON" (QA)."""
    db = tmp_path / "db.sqlite"
    import_file(v3_copy(tmp_path), str(db))
    before = db.read_bytes()
    for target in (db, tmp_path / "other.sqlite"):
        result = import_file(db, str(target))
        assert result.status == "failed" and result.added == 0
        assert result.message == "is a SQLite database; import reads Pi's session files (.jsonl)"
    assert db.read_bytes() == before


def test_moves_made_in_the_database_do_not_stop_the_next_import(tmp_path, target):
    """Enter on the imported copy (a move, a summary, a label written in the database) made
    every later import of the file refused: "the target's session has 201 entries, but the
    file gives only 200", then, once the file grew, "entry X is not what was imported there"
    (QA). The database's own entries stay where they are; the file's new ones are appended."""
    full = v3_copy(tmp_path)
    lines = lines_of(full)
    growing = tmp_path / "growing.jsonl"
    growing.write_bytes(b"".join(lines[:60]))
    first = import_file(growing, target)
    where = address(target, first.session_id or "")
    with open_session(where) as copy:  # what the app does on the imported copy
        entries = copy.get_entries()
        copy.move_to(entries[20].id, "looked at an older answer")
        copy.append_label(entries[5].id, "read later")
        copy.move_to(entries[-1].id)
        ours = copy.entry_count() - len(entries)
    again = import_file(growing, target)
    assert again.status == "unchanged" and again.total == 59 + ours
    growing.write_bytes(b"".join(lines))
    grown = import_file(growing, target)
    assert grown.status == "appended" and grown.added == len(lines) - 60
    assert import_file(growing, target).status == "unchanged"
    with (
        open_session(full, read_only=True) as source,
        open_session(where, read_only=True) as imported,
    ):
        assert imported.leaf_id == source.leaf_id  # the file's newest entries continue it
        assert imported.build_context().messages == source.build_context().messages
        assert imported.get_label(entries[5].id) == "read later" and imported.storage.verify_state() == []
    # the file's own label entry changed: said of that entry, not of the one after it (QA)
    k = next(k for k, raw in enumerate(lines) if b'"type":"label"' in raw)
    changed = lines[k].replace(b'"label":"', b'"label":"renamed ', 1)
    growing.write_bytes(b"".join([*lines[:k], changed, *lines[k + 1 :]]))
    refused = import_file(growing, target)
    said = f"line {k + 1}: entry {json.loads(lines[k])['id']!r} is not the one imported"
    assert refused.status == "refused" and said in (refused.message or ""), refused.message
    growing.write_bytes(b"".join(lines))
    # a message of the database's own is not passed over: the copy and the file diverged
    with open_session(where) as copy:
        copy.append_message(U("typed into the copy"))
    growing.write_bytes(b"".join([*lines, lines[-1].replace(b'"id":"', b'"id":"x', 1)]))
    assert import_file(growing, target).status == "refused"


def test_damaged_lines_are_reported_and_skipped(tmp_path, target):
    v3 = v3_copy(tmp_path)
    lines = lines_of(v3)
    lines[10] = b'{"type":"message","id":"broken",' + b"\n"  # cut short
    lines[20] = b"\xff\xfe not even text\n"
    lines.append(b'{"type":"message","id":"torn","parentId":null,"timest')  # still being written
    v3.write_bytes(b"".join(lines))
    result = import_file(v3, target)
    assert result.status == "new"
    by_line = {p.line: p for p in result.problems}
    assert by_line[11].kind == "skipped" and "not valid JSON" in by_line[11].message
    assert by_line[21].kind == "skipped"
    assert by_line[12].kind == "rooted" and "imported as a root" in by_line[12].message
    assert by_line[len(lines)].kind == "pending"
    assert str(by_line[11]).startswith(f"{v3}:11: ")
    skipped = sum(p.kind == "skipped" for p in result.problems)
    assert result.added == len(lines) - 2 - skipped  # header and torn line aside
    again = import_file(v3, target)  # the same damage gives the same sequence: nothing new
    assert again.status == "unchanged" and again.added == 0
    lines[-1] = lines[-1] + b'amp":"2026-01-01T00:00:00.000Z","message":{"role":"user","content":"x"}}\n'
    v3.write_bytes(b"".join(lines))
    completed = import_file(v3, target)
    assert completed.status == "appended" and completed.added == 1


def test_a_label_or_name_with_half_a_character_keeps_the_tree(tmp_path, target):
    """A label or a session name holding a lone surrogate (half of an emoji cut in two), which
    a JSONL file holds as an escape, ended the import into SQLite in a traceback, leaving an
    empty session. SQLite's text cannot hold it: the half becomes U+FFFD, said per line, and
    the entries after it keep their parents (a label is on the path, Pi's way)."""
    path = tmp_path / "halves.jsonl"
    with Session(JsonlStorage.create(path, cwd="/work/d\udcff")) as s:  # a directory not in UTF-8
        first = s.append_message(U("hi"))
        # as another program may write them: `Session` refuses such text from its callers
        label, name = "1abe1000", "0a3e0000"
        t = "2026-01-01T00:00:00.000Z"
        s.storage.append(
            [
                entry_from_dict({"type": "label", "id": label, "parentId": first, "timestamp": t,
                                 "targetId": first, "label": "cut \ud83d"}),
                entry_from_dict({"type": "session_info", "id": name, "parentId": label, "timestamp": t,
                                 "name": "name \udcff"}),
            ]
        )  # fmt: skip
        after = s.append_message(U("after"))
    result = import_file(path, target)
    assert result.status == "new" and result.added == 4, result.message
    kinds = {p.line: (p.kind, p.message) for p in result.problems}
    in_sqlite = not target.startswith("postgresql")
    if in_sqlite:  # PostgreSQL keeps free text as JSON: nothing to mend there
        assert kinds == {
            3: (
                "mended",
                f"entry {label!r}: its label has half of a character (a lone surrogate), written as U+FFFD",
            ),
            4: (
                "mended",
                f"entry {name!r}: its name has half of a character (a lone surrogate), written as U+FFFD",
            ),
        }
    with open_session(address(target, result.session_id)) as imported:
        assert [e.id for e in imported.get_entries()] == [first, label, name, after]
        assert imported.get_entry(after).parent_id == name and imported.check() == []
        written = "cut \ud83d"
        assert imported.get_label(first) == (LONE_SURROGATE.sub("\ufffd", written) if in_sqlite else written)
        assert imported.storage.header.cwd == "/work/d\udcff"  # the header keeps it exactly
    assert import_file(path, target).status == "unchanged"


def test_sources_and_targets():
    assert find_sources([PI_FIXTURES]) == sorted(PI_FIXTURES.glob("*.jsonl"))
    assert Target("x.sqlite").kind == "sqlite" and Target("postgresql://h/db").kind == "postgres"
    for bad in ("notes.txt", "postgresql://h/db#some-id"):
        with pytest.raises(Exception) as err:
            Target(bad)
        assert getattr(err.value, "code", None) == "invalid_argument"


def test_a_session_being_written_is_imported_while_it_grows(tmp_path, target):
    path = tmp_path / "live.jsonl"
    with create_session("/p", path=path) as live:  # the writer keeps its lock throughout
        live.append_message(U("one"))
        assert import_file(path, target).status == "new"
        live.append_message(A("two"))
        result = import_file(path, target)
        assert result.status == "appended" and result.added == 1


def test_an_imported_session_keeps_its_header(tmp_path, target):
    """SQLite made the imported session a new header: dated by the import (every session of a
    directory imported at once listed as created that minute, "newest first" in import order)
    (QA). PostgreSQL kept it; both do now."""
    v3 = v3_copy(tmp_path)
    with open_session(v3, read_only=True) as source:
        header = source.header.to_dict()
    done = import_file(v3, target)
    with open_session(address(target, done.session_id or ""), read_only=True) as imported:
        assert imported.header.to_dict() == header
    listed = {s["id"]: s for s in list_sessions(target)}
    assert str(listed[header["id"]]["created_at"]) == header["timestamp"]


def test_the_last_active_session_is_listed_first(tmp_path, target):
    """Sessions were listed by creation: one worked on today sank under every session started
    after it. The list (the database picker's, and the ids an unknown id suggests) is by the
    time of each session's last user or assistant message, as Pi's list and the file picker
    order sessions: a label or a move, looking at an old session, does not bring it first."""
    for sid in ("s-old", "s-mid", "s-new"):
        with create_session("/p", path=address(target, sid)) as s:
            s.append_message(U(f"start {sid}"))
        time.sleep(0.01)  # timestamps are to the millisecond
    assert [x["id"] for x in list_sessions(target)] == ["s-new", "s-mid", "s-old"]
    with open_session(address(target, "s-old")) as s:
        s.append_message(A("back to it"))
        last = s.get_entries()[-1].timestamp
    listed = list_sessions(target)
    assert [x["id"] for x in listed] == ["s-old", "s-new", "s-mid"]
    assert listed[0]["last_active"] == last and listed[0]["created_at"] < last
    time.sleep(0.01)
    with open_session(address(target, "s-mid")) as s:
        s.append_label(s.leaf_id, "looked at")
        s.move_to(None)
    assert [x["id"] for x in list_sessions(target)] == ["s-old", "s-new", "s-mid"]


def _raw_session(path: Path, sid: str, entries: list[dict]) -> Path:
    """A file written line by line, in the order given (not as a writer would order it)."""
    header = {
        "type": "session",
        "version": 3,
        "id": sid,
        "timestamp": "2026-02-01T00:00:00.000Z",
        "cwd": "/p",
    }
    stamp = {"timestamp": "2026-02-01T00:00:01.000Z"}
    path.write_text("".join(json.dumps(x) + "\n" for x in [header, *({**stamp, **e} for e in entries)]))
    return path


def _message(eid: str, parent: str | None, message: dict) -> dict:
    return {"type": "message", "id": eid, "parentId": parent, "message": message}


def test_an_entry_written_before_its_parent_is_imported_under_it(tmp_path, target):
    """The file is read with a child written above its parent under that parent, as Pi reads
    it; the import cut it loose as a root ("hangs off p9, which is not in the import"), and
    the database's context lost the turns above it (QA)."""
    path = _raw_session(
        tmp_path / "odd.jsonl",
        "odd-1",
        [
            _message("u1", None, U("first")),
            _message("c2", "p9", A("the child")),
            _message("p9", "u1", U("the parent, written late")),
            {"type": "leaf", "id": "l1", "parentId": "c2", "targetId": "c2"},
        ],
    )
    done = import_file(path, target)
    assert not done.problems, done.problems
    with open_session(path, read_only=True) as file, open_session(address(target, "odd-1")) as kept:
        assert kept.get_entry("c2").parent_id == "p9"
        assert texts(kept.build_context().messages) == texts(file.build_context().messages)
    assert import_file(path, target).status == "unchanged"  # the same order the next time


def test_an_id_used_twice_keeps_the_later_entry_as_the_file_is_read(tmp_path, target):
    """The file is read with the later of two entries of one id (Pi's index keeps the last);
    the import kept the first, and the database's context said another answer (QA)."""
    path = _raw_session(
        tmp_path / "dup.jsonl",
        "dup-1",
        [
            _message("u1", None, U("first")),
            _message("a1", "u1", A("answer one")),
            _message("a1", "u1", A("answer two")),
            _message("u2", "a1", U("after")),
        ],
    )
    done = import_file(path, target)
    assert [(p.line, p.kind) for p in done.problems] == [(3, "skipped")]
    assert "is used again further down, and the later entry wins" in done.problems[0].message
    with open_session(path, read_only=True) as file, open_session(address(target, "dup-1")) as kept:
        assert texts(kept.build_context().messages) == texts(file.build_context().messages)
        assert texts(kept.build_context().messages) == ["first", "answer two", "after"]


def test_sessions_are_listed_by_the_instant_of_their_last_entry(tmp_path, target):
    """Sorted as text, 13:00+05:00 (08:00 UTC) came before 10:00Z (QA)."""
    for sid, stamp in (("east", "2026-03-01T13:00:00+05:00"), ("west", "2026-03-01T10:00:00.000Z")):
        entry = {**_message(f"{sid}-1", None, U(sid)), "timestamp": stamp}
        import_file(_raw_session(tmp_path / f"{sid}.jsonl", sid, [entry]), target)
    assert [s["id"] for s in list_sessions(target)] == ["west", "east"]


def test_the_list_gives_as_much_of_the_first_message_as_the_file_picker(tmp_path, target):
    """The database's list gave 200 characters of the first message, the file picker 2,000:
    a word further on was found in one list and not in the other (QA)."""
    text = "word " * 100 + "needle"
    import_file(_raw_session(tmp_path / "long.jsonl", "long-1", [_message("u1", None, U(text))]), target)
    (listed,) = list_sessions(target)
    assert listed["first_message"].endswith("needle")


def test_entries_held_back_for_their_parents_leave_the_files_leaf(tmp_path, target):
    """Held back until its parent came, a child went in after the file's last line: the
    database's leaf, its last entry, was another than the file's, and a session resumed from
    the copy went on from another branch (QA). A move back to the file's leaf is written."""
    path = _raw_session(
        tmp_path / "order.jsonl",
        "order-1",
        [
            _message("a", None, U("first")),
            _message("d", "c", U("grandchild, written first")),
            _message("c", "b", A("child")),
            _message("b", "a", A("the last line")),
        ],
    )
    done = import_file(path, target)
    assert [p.kind for p in done.problems] == ["noted"]
    with open_session(path, read_only=True) as file, open_session(address(target, "order-1")) as kept:
        assert file.leaf_id == kept.leaf_id == "b"
        assert texts(kept.build_context().messages) == texts(file.build_context().messages)
    assert import_file(path, target).status == "unchanged"
    with path.open("a") as f:  # the file goes on from its leaf
        stamp = "2026-02-01T00:00:02.000Z"
        f.write(json.dumps({**_message("e", "b", U("next")), "timestamp": stamp}) + "\n")
    assert import_file(path, target).added == 1
    with open_session(path, read_only=True) as file, open_session(address(target, "order-1")) as kept:
        assert file.leaf_id == kept.leaf_id == "e"
        assert texts(kept.build_context().messages) == texts(file.build_context().messages)


def test_a_loop_of_parents_is_cut_once_as_the_file_is_read(tmp_path, target):
    """An entry whose parent is its own descendant: the file is read with the loop cut above
    it. The import cut it there too, and also cut loose the child of that descendant, which was
    given before its parent: the database's context lost 22 messages (QA)."""
    chain = [_message("m0", None, U("q0"))]
    for k in range(1, 50):
        chain.append(_message(f"m{k}", f"m{k - 1}", (A if k % 2 else U)(f"t{k}")))
    chain[10] = {**chain[10], "parentId": "m40"}  # m10 hangs under its own descendant
    path = _raw_session(tmp_path / "loop.jsonl", "loop-1", chain)
    done = import_file(path, target)
    assert [(p.line, p.kind) for p in done.problems] == [(12, "rooted")]
    assert "make a loop" in done.problems[0].message
    with open_session(path, read_only=True) as file, open_session(address(target, "loop-1")) as kept:
        for leaf in ("m49", "m40", "m9"):
            assert texts(kept.build_context(at=leaf).messages) == texts(file.build_context(at=leaf).messages)
        assert len(kept.build_context(at="m49").messages) == 40  # m10 .. m49


def test_a_write_failing_after_some_batches_says_what_went_in(tmp_path, monkeypatch):
    """On a full disk the import said "nothing was added" and "created empty" when 24 entries
    had gone in: its first batches were committed (QA)."""
    from sessiontree import importing
    from sessiontree.model.errors import SessionError
    from sessiontree.storage.sqlite import SqliteStorage

    chain = [_message("m0", None, U("q0"))]
    chain += [_message(f"m{k}", f"m{k - 1}", U(f"t{k}")) for k in range(1, 30)]
    path = _raw_session(tmp_path / "s.jsonl", "full-1", chain)
    monkeypatch.setattr(importing, "BATCH", 10)
    real = SqliteStorage.append
    calls = []

    def fails_third(self, entries):
        calls.append(len(entries))
        if len(calls) == 3:
            raise SessionError("storage", "commit failed, nothing was added: database or disk is full")
        return real(self, entries)

    monkeypatch.setattr(SqliteStorage, "append", fails_third)
    done = import_file(path, tmp_path / "db.sqlite")
    assert done.status == "failed" and done.added == 20
    assert "nothing was added" not in done.message and "created empty" not in done.message
    assert "20 entries went in before it: importing again adds the rest" in done.message
    monkeypatch.setattr(SqliteStorage, "append", real)
    again = import_file(path, tmp_path / "db.sqlite")
    assert again.added == 10 and again.total == 30


def test_a_line_read_with_replacement_characters_is_imported_and_said_so(tmp_path, target):
    """Bytes that are not UTF-8 are read as U+FFFD, and the entry imported; the import called
    the line skipped (QA). An entry naming itself as parent was said to hang off one below it."""
    path = _raw_session(
        tmp_path / "u8.jsonl",
        "u8-1",
        [_message("u1", None, U("BAD")), _message("a1", "u1", A("ok")), _message("me", "me", U("self"))],
    )
    path.write_bytes(path.read_bytes().replace(b'"BAD"', b'"B\xc3D"'))
    done = import_file(path, target)
    said = {p.line: (p.kind, p.message) for p in done.problems}
    assert said[2][0] == "noted" and "not valid UTF-8 text (read with U+FFFD" in said[2][1]
    assert said[4] == ("rooted", "entry 'me' names itself as parent; imported as a root")
    with open_session(address(target, "u8-1")) as kept:
        assert texts(kept.build_context(at="a1").messages) == ["B\ufffdD", "ok"]
