"""SQLite against damaged files, tampered rows, other programs' databases and other writers.
Each test is one way the database can differ from what the storage last wrote."""

from __future__ import annotations

import json
import os
import shutil
import sqlite3
import subprocess
import sys
from pathlib import Path

import pytest

from helpers import A, U, as_nobody
from sessiontree import Session, SessionError, SqliteStorage, open_session
from sessiontree.model.entries import entry_from_dict


def build(db: Path, sid: str = "s1", n: int = 200) -> dict[str, str]:
    """A session of `n` messages (plus a label, a name and a compaction), closed cleanly."""
    s = Session(SqliteStorage.create(db, cwd="/p", session_id=sid))
    ids = {}
    for k in range(n):
        ids[f"m{k}"] = s.append_message(U(f"message {k} " + "x" * 300) if k % 2 else A(f"reply {k}"))
    s.append_label(ids["m1"], "start")
    s.append_session_name("named")
    s.append_compaction("summary", ids[f"m{n - 4}"], 1000)
    ids["last"] = s.append_message(U("after the compaction"))
    s.close()
    return ids


def run_cli(*args: str) -> subprocess.CompletedProcess[str]:
    return subprocess.run([sys.executable, "-m", "sessiontree", *args], capture_output=True, text=True)


# --- a database damaged in its data pages ------------------------------------------------------


def _entries_leaf_pages(db: Path) -> list[int]:
    with sqlite3.connect(db) as conn:
        return [
            r[0]
            for r in conn.execute(
                "SELECT pageno FROM dbstat WHERE name = 'entries' AND pagetype = 'leaf' ORDER BY pageno"
            )
        ]


def _smash_page(db: Path, pageno: int) -> None:
    with sqlite3.connect(db) as conn:
        page_size = conn.execute("PRAGMA page_size").fetchone()[0]
    assert pageno > 1  # page 1 holds the file header and the schema: not what this is about
    with open(db, "r+b") as f:
        f.seek((pageno - 1) * page_size)
        f.write(b"\xa5" * page_size)


@pytest.mark.parametrize("command", ["check", "tree", "context"])
def test_damaged_data_page_is_one_line_error_not_a_traceback(tmp_path, command):
    db = tmp_path / "db.sqlite"
    build(db)
    assert not Path(f"{db}-wal").exists()  # everything is in the main file
    pages = _entries_leaf_pages(db)
    assert len(pages) > 4
    _smash_page(db, pages[len(pages) // 2])

    result = run_cli(command, f"{db}#s1")
    assert result.returncode != 0
    assert "Traceback" not in result.stderr, result.stderr
    if command == "check":  # damage is what `check` reports, as its other findings: on stdout
        assert result.returncode == 1 and result.stderr == ""
        said, verdict = result.stdout.strip().splitlines()
        assert said.startswith(f"{db}#s1: error: the database is damaged (") and verdict == "damaged"
        assert said.endswith("[damaged_database]")
        return
    lines = result.stderr.strip().splitlines()
    assert len(lines) == 1, result.stderr
    assert str(db) in lines[0] and "damaged" in lines[0] and "[storage]" in lines[0]


def test_check_finds_damage_no_read_meets(tmp_path):
    """An index page of no use to reading the session: `check` still finds it, in one line."""
    db = tmp_path / "db.sqlite"
    build(db)
    pages = _pages_of(db, "entries_by_parent")
    _smash_page(db, pages[len(pages) // 2])
    assert run_cli("context", f"{db}#s1").returncode == 0
    result = run_cli("check", f"{db}#s1")
    assert result.returncode == 1 and result.stderr == ""
    lines = result.stdout.strip().splitlines()
    assert len(lines) == 2 and "the database is damaged" in lines[0], result.stdout


def _pages_of(db: Path, name: str) -> list[int]:
    with sqlite3.connect(db) as conn:
        return [r[0] for r in conn.execute("SELECT pageno FROM dbstat WHERE name = ?", (name,))]


@pytest.mark.parametrize(
    "damaged",
    [
        "entries",
        "active_branch",
        "session_state",
        "sessions",
        "entries_by_session",
        "entries_by_parent",
        "sqlite_autoindex_entries_1",
    ],
)
def test_damage_anywhere_gives_session_errors_only(tmp_path, damaged):
    """Whatever page is damaged, every read either works or raises SessionError(storage)."""
    db = tmp_path / "db.sqlite"
    build(db)
    pages = _pages_of(db, damaged)
    assert pages
    _smash_page(db, pages[len(pages) // 2])

    def reads(storage: SqliteStorage) -> list:
        session = Session(storage)
        return [
            lambda: storage.index,
            lambda: list(storage.iter_entries()),
            storage.active_branch,
            storage.verify_state,
            lambda: storage.get_entry("nope"),
            storage.refresh,
            session.build_context,
            lambda: session.check(decode=True),
            lambda: [storage.load_entry(i) for i in range(len(storage.index))],
        ]

    failures = 0
    for attempt in (
        lambda: SqliteStorage.list_sessions(db),
        lambda: SqliteStorage.open(db, "s1", read_only=True),
        lambda: SqliteStorage.open(db, "s1"),
    ):
        try:
            opened = attempt()
        except SessionError as exc:
            assert exc.code == "storage" and exc.path == str(db), exc
            failures += 1
            continue
        if not isinstance(opened, SqliteStorage):
            continue
        with opened:
            for read in reads(opened):
                try:
                    read()
                except SessionError as exc:
                    assert exc.code in ("storage", "invalid_entry"), exc
                    failures += 1
    assert failures  # the damage was met somewhere


# --- check compares the denormalised columns with the entries' data ----------------------------


@pytest.mark.parametrize(
    ("statement", "words"),
    [
        ("UPDATE entries SET parent_id = NULL WHERE id = :m5", ["parent_id", "{m5}"]),
        ("UPDATE entries SET type = 'custom' WHERE id = :m6", ["type", "{m6}"]),
        ("UPDATE entries SET role = 'user' WHERE id = :m6", ["role", "{m6}"]),
        ("UPDATE entries SET label = 'other' WHERE type = 'label'", ["label"]),
        ("UPDATE entries SET target_id = :m2 WHERE type = 'label'", ["target_id"]),
        ("UPDATE entries SET name = 'renamed' WHERE type = 'session_info'", ["name"]),
        ("UPDATE entries SET first_kept = :m0 WHERE type = 'compaction'", ["first_kept"]),
        ("UPDATE entries SET has_tail = 1 WHERE type = 'compaction'", ["has_tail"]),
        ("UPDATE entries SET timestamp = 'then' WHERE id = :m3", ["timestamp", "{m3}"]),
        ("UPDATE session_state SET last_seq = last_seq - 1", ["log position"]),
        ("UPDATE session_state SET entry_count = 7", ["entry count"]),
        ("UPDATE session_state SET leaf_id = :m2", ["leaf"]),
        ("UPDATE session_state SET latest_compaction_id = NULL", ["latest compaction"]),
        ("DELETE FROM active_branch WHERE pos = 0", ["active branch"]),
    ],
)
def test_check_reports_tampered_columns(tmp_path, statement, words):
    db = tmp_path / "db.sqlite"
    ids = build(db, n=20)
    with sqlite3.connect(db) as conn:
        conn.execute(statement, ids)
    with open_session(f"{db}#s1", read_only=True) as session:
        problems = [d for d in session.check(decode=True) if d.severity == "error"]
    assert problems, statement
    text = "\n".join(d.message for d in problems)
    for word in words:
        assert word.format(**ids) in text, text
    result = run_cli("check", f"{db}#s1")
    assert result.returncode == 1 and "Traceback" not in result.stderr
    assert result.stdout.strip().endswith("damaged")


def test_check_reports_undecodable_entry_data(tmp_path):
    db = tmp_path / "db.sqlite"
    ids = build(db, n=10)
    with sqlite3.connect(db) as conn:
        conn.execute("UPDATE entries SET data = X'7b226e6f' WHERE id = ?", (ids["m4"],))
    result = run_cli("check", f"{db}#s1")
    assert result.returncode == 1, result.stderr
    assert "Traceback" not in result.stderr
    assert ids["m4"] in result.stdout and "not valid JSON" in result.stdout


def test_untampered_database_checks_clean(tmp_path):
    db = tmp_path / "db.sqlite"
    build(db, n=20)
    with open_session(f"{db}#s1", read_only=True) as session:
        assert session.check(decode=True) == []


# --- a read-only open never writes --------------------------------------------------------------


def _snapshot(db: Path) -> tuple[bytes, int, list[str]]:
    return db.read_bytes(), db.stat().st_mtime_ns, sorted(os.listdir(db.parent))


def test_read_only_open_of_a_rollback_journal_database_writes_nothing(tmp_path):
    db = tmp_path / "db.sqlite"
    ids = build(db, n=20)
    with sqlite3.connect(db) as conn:  # another program keeps its database in rollback mode
        assert conn.execute("PRAGMA journal_mode=DELETE").fetchone()[0] == "delete"
    before = _snapshot(db)

    storage = SqliteStorage.open(db, "s1", read_only=True)
    with Session(storage) as session:
        assert session.leaf_id == ids["last"]
        session.build_context()
        assert len(session.tree) == 24
        assert session.check(decode=True) == []
        assert storage._conn.execute("PRAGMA journal_mode").fetchone()[0] == "delete"
    assert SqliteStorage.list_sessions(db)[0]["id"] == "s1"
    for command in ("check", "tree", "context"):
        assert run_cli(command, f"{db}#s1").returncode == 0
    assert run_cli("tree", str(db)).returncode == 0  # picks the newest session: list_sessions

    assert _snapshot(db) == before
    with sqlite3.connect(f"file:{db}?mode=ro", uri=True) as conn:
        assert conn.execute("PRAGMA journal_mode").fetchone()[0] == "delete"


def test_read_only_open_of_a_read_only_file(tmp_path):
    db = tmp_path / "db.sqlite"
    ids = build(db, n=5)
    with sqlite3.connect(db) as conn:
        conn.execute("PRAGMA journal_mode=DELETE")
    db.chmod(0o444)
    try:
        with open_session(f"{db}#s1", read_only=True) as session:
            assert session.leaf_id == ids["last"]
    finally:
        db.chmod(0o600)


def test_read_only_open_of_a_path_a_uri_would_misread(tmp_path):
    folder = tmp_path / "a?b=c%20d #e"
    folder.mkdir()
    db = folder / "db.sqlite"
    ids = build(db, n=5)
    with SqliteStorage.open(db, "s1", read_only=True) as storage:
        assert storage.leaf_id == ids["last"]
    assert [s["id"] for s in SqliteStorage.list_sessions(db)] == ["s1"]


# --- another writer between our read and our write ----------------------------------------------


def _foreign_append(db: Path, sid: str, text: str) -> str:
    """Append a user message at the leaf the way a correct writer does, from a connection of
    its own (another program, or a writer that could not take our lock)."""
    conn = sqlite3.connect(db, isolation_level=None)
    try:
        conn.execute("BEGIN IMMEDIATE")
        leaf, count = conn.execute(
            "SELECT leaf_id, entry_count FROM session_state WHERE session_id = ?", (sid,)
        ).fetchone()
        eid = f"f{count:07x}"
        data = {
            "type": "message",
            "id": eid,
            "parentId": leaf,
            "timestamp": "2025-01-01T00:00:00.000Z",
            "message": {"role": "user", "content": text, "timestamp": 1},
        }
        seq = conn.execute(
            "INSERT INTO entries (session_id, id, parent_id, type, timestamp, role, data)"
            " VALUES (?, ?, ?, 'message', ?, 'user', ?)",
            (sid, eid, leaf, data["timestamp"], json.dumps(data).encode()),
        ).lastrowid
        (pos,) = conn.execute("SELECT COUNT(*) FROM active_branch WHERE session_id = ?", (sid,)).fetchone()
        conn.execute("INSERT INTO active_branch VALUES (?, ?, ?)", (sid, pos, eid))
        conn.execute(
            "UPDATE session_state SET leaf_id = ?, entry_count = entry_count + 1, last_seq = ?"
            " WHERE session_id = ?",
            (eid, seq, sid),
        )
        conn.execute("COMMIT")
    finally:
        conn.close()
    return eid


def test_a_write_on_a_stale_log_is_refused_and_catches_up(tmp_path):
    db = tmp_path / "db.sqlite"
    session = Session(SqliteStorage.create(db, cwd="/p", session_id="s1"))
    first = session.append_message(U("one"))
    storage = session.storage
    refresh = storage.refresh
    foreign: list[str] = []

    def refresh_then_someone_writes() -> int:
        n = refresh()
        if not foreign:  # after our read, before our write
            foreign.append(_foreign_append(db, "s1", "from elsewhere"))
        return n

    storage.refresh = refresh_then_someone_writes  # type: ignore[method-assign]
    with pytest.raises(SessionError) as err:
        session.append_message(U("two"))
    assert err.value.code == "storage" and "another writer" in str(err.value)
    # nothing of ours was written, and memory caught up with the other writer
    assert session.leaf_id == foreign[0] and session.entry_count() == 2
    mine = session.append_message(U("two, again"))
    assert session.get_entry(mine).parent_id == foreign[0]
    assert storage.verify_state() == []
    session.close()
    with open_session(f"{db}#s1", read_only=True) as again:
        assert again.check(decode=True) == []
        assert [e.id for e in again.get_branch()] == [first, foreign[0], mine]


def test_a_raw_append_on_a_stale_storage_is_refused(tmp_path):
    """The check is in the storage, not only in `Session`: a caller that skips `refresh`."""
    db = tmp_path / "db.sqlite"
    session = Session(SqliteStorage.create(db, cwd="/p", session_id="s1"))
    session.append_message(U("one"))
    stale_leaf = session.leaf_id
    other = _foreign_append(db, "s1", "from elsewhere")
    entry = session._make("message", {"message": U("mine")}, stale_leaf)
    with pytest.raises(SessionError) as err:
        session.storage.append([entry])
    assert "another writer" in str(err.value)
    assert session.leaf_id == other
    assert session.storage.verify_state() == []
    session.close()


def test_a_database_whose_creator_died_before_the_schema_version_holds_no_sessions(tmp_path):
    """A writer killed between creating the tables and recording their version leaves a
    database without sessions: opening a session in it says `not_found` (as for a database that
    does not exist yet), which the next writer then completes."""
    path = tmp_path / "s.sqlite"
    SqliteStorage.create(path, cwd="/p", session_id="x").close()
    with sqlite3.connect(path) as conn:
        conn.execute("DELETE FROM schema_version")
    with pytest.raises(SessionError) as err:
        SqliteStorage.open(path, "x", read_only=True)
    assert err.value.code == "not_found"


@pytest.mark.parametrize("left", ["an empty file", "an empty WAL database", "half a schema"])
def test_a_database_whose_creator_died_before_its_schema_holds_no_sessions(tmp_path, left):
    """A creator killed after the file exists but before its schema committed (the crash test's
    random kills found this window): opening says `not_found`, the next creator completes it,
    and a foreign database (tables of its own) is still refused."""
    path = tmp_path / "s.sqlite"
    path.touch()
    if left != "an empty file":
        with sqlite3.connect(path) as conn:
            conn.execute("PRAGMA journal_mode=WAL")
            if left == "half a schema":  # what a creator before the one-transaction schema left
                conn.execute("CREATE TABLE schema_version (version INTEGER NOT NULL)")
    for read_only in (True, False):
        with pytest.raises(SessionError) as err:
            SqliteStorage.open(path, "x", read_only=read_only)
        assert err.value.code == "not_found"
    session = Session(SqliteStorage.create(path, cwd="/p", session_id="x"))
    session.append_message(U("hello"))
    session.close()
    assert len(Session(SqliteStorage.open(path, "x", read_only=True)).get_entries()) == 1
    foreign = tmp_path / "foreign.sqlite"
    with sqlite3.connect(foreign) as conn:
        conn.execute("CREATE TABLE notes (text TEXT)")
    with pytest.raises(SessionError) as err:
        SqliteStorage.open(foreign, "x", read_only=True)
    assert err.value.code == "storage"


def test_the_schema_is_created_in_one_transaction(tmp_path, monkeypatch):
    """A creation that fails after some tables (here a statement that cannot run; for a user, a
    kill or a full disk) leaves no tables behind, never half a schema."""
    from sessiontree.storage.sqlite import connection

    monkeypatch.setattr(connection, "SCHEMA", connection.SCHEMA + "\nCREATE TABLE entries (x);")
    path = tmp_path / "s.sqlite"
    with pytest.raises(SessionError):
        SqliteStorage.create(path, cwd="/p", session_id="x")
    with sqlite3.connect(path) as conn:
        assert conn.execute("SELECT COUNT(*) FROM sqlite_master").fetchone()[0] == 0


def test_half_a_character_in_a_label_or_name_is_refused_with_a_reason(tmp_path):
    """A lone surrogate in a label or a session name (which the JSONL storage keeps as an
    escape) raised a bare UnicodeEncodeError from sqlite3; a cwd with one (a directory whose
    name is not UTF-8) could not even create the session."""
    db = tmp_path / "s.sqlite"
    with Session(SqliteStorage.create(db, cwd="/work/d\udcff", session_id="s")) as s:
        first = s.append_message(U("hi"))
        t = "2026-01-01T00:00:00.000Z"
        for data, what in (
            ({"type": "label", "targetId": first, "label": "cut \ud83d"}, "label"),
            ({"type": "session_info", "name": "name \udcff"}, "name"),
        ):
            entry = entry_from_dict({**data, "id": "0dd00000", "parentId": first, "timestamp": t})
            with pytest.raises(SessionError, match=f"has a {what} with a lone surrogate") as info:
                s.storage.append([entry])  # as an import writes them (`Session` refuses them first)
            assert info.value.code == "invalid_entry"
        with pytest.raises(SessionError, match="not valid text: half a character") as info:
            s.append_label(first, "cut \ud83d")
        assert info.value.code == "invalid_argument"
        s.append_label(first, "whole \U0001f600")
        assert s.check() == [] and s.entry_count() == 2
    with open_session(f"{db}#s") as s:
        assert s.storage.header.cwd == "/work/d\udcff" and s.get_label(first) == "whole \U0001f600"
        assert s.check() == []


@pytest.mark.parametrize("how", ["replaced", "deleted"])
def test_a_database_replaced_or_deleted_under_a_writer_is_not_written(tmp_path, how):
    """The JSONL storage refused to write to a file replaced or deleted while open; SQLite went
    on, said "Leaf moved", and wrote through its -wal file, which is read over the database
    moved into place (its commits lost, and `check` found nothing wrong), or into the deleted
    file (lost at exit). Nothing reaches the -wal now."""
    db, other = tmp_path / "s.sqlite", tmp_path / "other.sqlite"
    build(db, n=6)
    shutil.copy(db, other)  # closed and checkpointed: the file alone is the database
    wal = Path(f"{db}-wal")
    with Session(SqliteStorage.open(db, "s1")) as writer:
        if how == "replaced":
            with Session(SqliteStorage.open(other, "s1")) as elsewhere:
                elsewhere.append_message(U("committed in the file moved into place"))
            os.replace(other, db)
            frames = wal.read_bytes()
        else:
            for name in writer.storage.files:
                Path(name).unlink(missing_ok=True)
        for attempt in (lambda: writer.append_message(U("lost")), writer.refresh):
            with pytest.raises(SessionError, match=f"the database file was {how}"):
                attempt()
        if how == "replaced":  # set aside, not read into the database now there (below)
            assert not wal.exists() and Path(f"{wal}.replaced").read_bytes() == frames
        else:
            assert not db.exists() and not wal.exists()


@pytest.mark.parametrize("old", ["moved away", "replaced"])
def test_the_log_of_a_database_replaced_while_open_is_not_read_into_the_new_one(tmp_path, old):
    """A backup moved over a database the app had open for writing: the old database's -wal,
    left at the name (SQLite neither checkpoints nor deletes the log of a file that moved),
    was read into the backup by the next program to open it: its entries on top of the
    backup's, and with more written, a "malformed" database (QA). The log is moved away from
    the name: next to the old database when it still has a name (its commits follow it),
    else aside with its bytes."""
    db, backup = tmp_path / "s.sqlite", tmp_path / "backup.sqlite"
    build(db, n=6)
    shutil.copy(db, backup)  # closed and checkpointed: the file alone is the database
    with open_session(f"{backup}#s1", read_only=True) as before:
        kept = [e.id for e in before.get_entries()]
    writer = Session(SqliteStorage.open(db, "s1"))
    added = [writer.append_message(U(f"after the backup {k}")) for k in range(50)]
    writer.append_label(added[-1], "LBL")
    if old == "moved away":
        os.rename(db, tmp_path / "old.sqlite")
    shutil.copy(backup, tmp_path / "new")
    os.replace(tmp_path / "new", db)
    with pytest.raises(SessionError, match="the database file was replaced"):
        writer.refresh()
    (said,) = [d.message for d in writer.diagnostics if d.code == "log_set_aside"]
    assert "its write-ahead log is now " in writer.read_only_reason  # the app's banner says where
    assert writer.get_entry(added[-1]).id == added[-1]  # the old database still reads as it was
    writer.close()
    with open_session(f"{db}#s1") as now:
        assert [e.id for e in now.get_entries()] == kept and now.check() == []
    assert run_cli("check", str(db)).returncode == 0
    if old == "moved away":
        assert "old.sqlite-wal" in said
        with open_session(f"{tmp_path / 'old.sqlite'}#s1") as moved:
            assert moved.entry_count() == len(kept) + 51 and moved.get_label(added[-1]) == "LBL"
    else:
        assert f"{db}-wal.replaced" in said and Path(f"{db}-wal.replaced").stat().st_size > 0


@pytest.mark.parametrize("read_only", [False, True])
def test_a_database_the_user_may_only_read_opens_read_only(tmp_path, read_only):
    """Another user's database (0644 or 0444, in a directory one may not write): every open
    failed with "attempt to write a readonly database" (SQLite's WAL needs a -shm file it
    could not create), and a writable open of `move` ended in a PermissionError traceback."""
    if os.geteuid() != 0:
        pytest.skip("needs root to act as another user")
    shared = tmp_path / "shared"
    shared.mkdir()
    db = shared / "team.sqlite"
    ids = build(db, n=20)
    db.chmod(0o444)
    for directory in (shared, tmp_path, *tmp_path.parents):  # pytest's directories are private
        if directory == Path("/tmp"):
            break
        directory.chmod(0o755)
    assert not (shared / "team.sqlite-shm").exists()

    def work() -> str:
        with open_session(f"{db}#s1", read_only=read_only) as s:
            messages = s.build_context().messages
            return f"{s.read_only}|{s.read_only_reason}|{len(messages)}|{s.leaf_id}"

    answer = as_nobody(work)
    ro, reason, count, leaf = answer.split("|")
    assert ro == "True" and int(count) > 0 and leaf == ids["last"], answer
    assert "this user cannot create the file SQLite shares with its writers" in reason
    assert not (shared / "team.sqlite-shm").exists()  # nothing written next to it


def test_a_database_the_user_may_not_write_opens_read_only_saying_why(tmp_path):
    if os.geteuid() != 0:
        pytest.skip("needs root to act as another user")
    db = tmp_path / "team.sqlite"
    build(db, n=20)
    db.chmod(0o444)
    for directory in (tmp_path, *tmp_path.parents):
        if directory == Path("/tmp"):
            break
        directory.chmod(0o777)  # the directory is writable: SQLite may make its -shm there

    def work() -> str:
        with open_session(f"{db}#s1") as s:
            return f"{s.read_only}|{s.read_only_reason}"

    answer = as_nobody(work)
    assert answer == "True|the database is not writable by you, so it is open read-only", answer


def test_a_database_without_a_write_bit_opens_read_only_even_for_root(tmp_path):
    """Mode 0444 refused a JSONL session's writes as the owner's wish, but root wrote labels,
    moves and imports into a database of that mode (QA)."""
    db = tmp_path / "team.sqlite"
    build(db, n=5)
    db.chmod(0o444)
    before = db.read_bytes()
    with open_session(f"{db}#s1") as s:
        assert s.read_only and "permissions make it read-only (chmod u+w" in (s.read_only_reason or "")
        with pytest.raises(SessionError) as refused:
            s.append_message(U("not written"))
        assert refused.value.code == "read_only"
    assert db.read_bytes() == before
    db.chmod(0o644)
    with open_session(f"{db}#s1") as s:
        assert not s.read_only


def test_a_foreign_sqlite_database_is_named_so(tmp_path):
    db = tmp_path / "other.sqlite"
    with sqlite3.connect(db) as conn:
        conn.execute("CREATE TABLE notes (x)")
    with pytest.raises(SessionError, match="a SQLite database, but not one of sessiontree's"):
        open_session(f"{db}#s1")


OTHER_WRITER = """
import sys
from sessiontree import Session, SqliteStorage
storage = SqliteStorage.create(sys.argv[1], cwd="/other")
Session(storage).append_message({"role": "user", "content": "other", "timestamp": 1})
storage.close()
"""


@pytest.mark.parametrize("probe", ["refused writer", "writer watch", "another writer closed"])
def test_nothing_in_this_process_drops_sqlites_locks_on_the_database(tmp_path, probe):
    """Closing any descriptor of a file drops every POSIX lock the process holds on it, SQLite's
    own among them: a second writer refused in the same process (its lock's descriptor closed),
    a look at whether the writer had quit, another session's writer closed, and another process
    took itself for the database's last user, checkpointed and removed the write-ahead log;
    the writer's next appends were acknowledged and lost (QA)."""
    from sessiontree import open_or_read_only

    db = tmp_path / "team.sqlite"
    writer = Session(SqliteStorage.create(db, cwd="/p"))
    written = [writer.append_message(U("a"))]
    if probe == "refused writer":
        viewer = open_or_read_only(f"{db}#{writer.session_id}")
        assert viewer.locked_out
    elif probe == "another writer closed":  # of another session: its lock's descriptor went
        other = Session(SqliteStorage.create(db, cwd="/q"))
        other.append_message(U("b"))
        viewer = Session(SqliteStorage.open(db, writer.session_id, read_only=True))
        other.close()
    else:
        viewer = Session(SqliteStorage.open(db, writer.session_id, read_only=True))
        assert viewer.writer_elsewhere()
    subprocess.run([sys.executable, "-c", OTHER_WRITER, str(db)], check=True, timeout=60)
    written += [writer.append_message(U(f"w{k}")) for k in range(3)]
    writer.close()
    viewer.close()
    with sqlite3.connect(db) as conn:
        rows = conn.execute("SELECT COUNT(*) FROM entries WHERE session_id = ?", (writer.session_id,))
        assert rows.fetchone()[0] == len(written)
    with open_session(f"{db}#{writer.session_id}", read_only=True) as again:
        assert [e.id for e in again.get_entries()] == written


def test_only_damage_is_told_to_recover_and_a_session_file_is_named(tmp_path, monkeypatch):
    """Told of damage, `sqlite3 .recover` was told of a database another program held locked
    too (QA); a Pi session file named `.sqlite` was "not a database" and no more."""
    db = tmp_path / "locked.sqlite"
    with Session(SqliteStorage.create(db, cwd="/p", session_id="s")) as s:
        s.append_message(U("hi"))
    monkeypatch.setattr("sessiontree.storage.sqlite.connection.BUSY_MS", 50)  # not 5 s a try
    holder = sqlite3.connect(db, isolation_level=None)
    holder.execute("PRAGMA journal_mode=DELETE")
    holder.execute("BEGIN EXCLUSIVE")
    try:
        with pytest.raises(SessionError) as err:
            SqliteStorage.open(db, "s", read_only=True).close()
        assert err.value.detail.endswith(
            "the database is locked by another program (database is locked); try again once it lets go"
        )
    finally:
        holder.rollback()
        holder.close()
    damaged = tmp_path / "damaged.sqlite"
    damaged.write_bytes(db.read_bytes()[:100] + b"\x55" * 8000)
    with pytest.raises(SessionError) as err:
        SqliteStorage.open(damaged, "s").close()
    assert f"`sqlite3 {damaged} .recover | sqlite3 NEW.sqlite` copies what is readable" in err.value.detail
