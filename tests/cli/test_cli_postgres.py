"""The command line against a real PostgreSQL server: addresses, `import`, and bad input —
every mistake is one line on stderr and exit status 2, never a traceback."""

from __future__ import annotations

import shutil
import socket
import subprocess
import sys

import pytest

from helpers import PI_FIXTURES, U
from sessiontree import PostgresStorage, Session


def run(*args: str) -> subprocess.CompletedProcess[str]:
    return subprocess.run(
        [sys.executable, "-m", "sessiontree", *args], capture_output=True, text=True, timeout=120
    )


def one_line_error(done: subprocess.CompletedProcess[str], *words: str) -> str:
    assert done.returncode == 2, done.stderr
    assert "Traceback" not in done.stderr and done.stdout == ""
    lines = done.stderr.strip().splitlines()
    assert len(lines) == 1, done.stderr
    for word in words:
        assert word in lines[0], lines[0]
    return lines[0]


def closed_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]  # nothing listens once the socket is closed


def test_commands_take_postgres_addresses(pg_database):
    with Session(PostgresStorage.create(pg_database, cwd="/p", session_id="cli-1")) as s:
        u1 = s.append_message(U("hello from postgres"))
        s.append_message(U("second"))
    context = run("context", f"{pg_database}#cli-1")
    assert context.returncode == 0 and "hello from postgres" in context.stdout
    moved = run("move", f"{pg_database}#cli-1", u1)
    assert moved.returncode == 0 and u1 in moved.stdout
    check = run("check", f"{pg_database}#cli-1")
    assert check.returncode == 0 and "3 entries" in check.stdout
    password = pg_database.split(":")[2].split("@")[0]
    assert password not in check.stdout


def test_bad_input_is_one_line_and_exit_2(pg_url, pg_database):
    base, _, _db = pg_url.rpartition("/")
    user_part = base.split("@")[0]
    unreachable = f"postgresql://sessiontree:x@127.0.0.1:{closed_port()}/db#s"
    one_line_error(run("context", unreachable), "cannot reach the server", "Connection refused")
    wrong_password = f"{user_part.rsplit(':', 1)[0]}:wrong@{base.split('@')[1]}/sessiontree_test#s"
    line = one_line_error(run("context", wrong_password), "refused the login", "password authentication")
    assert "wrong" not in line  # the password is never echoed
    one_line_error(run("context", f"{base}/no_such_database#s"), "no_such_database", "does not exist")
    with Session(PostgresStorage.create(pg_database, cwd="/p", session_id="known")) as s:
        s.append_message(U("x"))
    one_line_error(
        run("context", f"{pg_database}#unknown"),
        "no session 'unknown' in the database (the last active: known)",
    )
    assert run("context", f"{pg_database}#KN").returncode == 0  # the start of its id, either case
    one_line_error(run("tree", pg_database), "add #SESSION_ID", "known")
    one_line_error(run("context", "postgresql://[broken"), "not a usable PostgreSQL URL")
    one_line_error(run("import", str(PI_FIXTURES), "--to", unreachable.split("#")[0]), "cannot reach")
    one_line_error(run("import", str(PI_FIXTURES), "--to", f"{pg_database}#known"), "leave out #SESSION_ID")
    one_line_error(run("import", "no-such-dir", "--to", pg_database), "no such file or directory")
    one_line_error(run("import", str(PI_FIXTURES), "--to", "notes.txt"), "SQLite database")


def test_import_into_postgres_then_again(tmp_path, pg_database):
    sources = tmp_path / "sessions" / "--work--"
    sources.mkdir(parents=True)
    for name in ("large-session.jsonl", "before-compaction.jsonl"):
        shutil.copy(PI_FIXTURES / name, sources / name)
    first = run("import", str(tmp_path / "sessions"), "--to", pg_database)
    assert first.returncode == 0, first.stderr
    assert first.stdout.count("(new session)") == 2
    assert "2 new; 2,020 entries added" in first.stderr and "entries/s" in first.stderr
    second = run("import", str(tmp_path / "sessions"), "--to", pg_database)
    assert second.returncode == 0 and second.stdout.count("unchanged") == 2
    (sources / "large-session.jsonl").write_bytes(
        (sources / "large-session.jsonl").read_bytes().replace(b'"/mode"', b'"/edited"', 1)
    )
    third = run("import", str(tmp_path / "sessions"), "--to", pg_database)
    assert third.returncode == 1
    assert "large-session.jsonl: refused:" in third.stderr and "Traceback" not in third.stderr


@pytest.mark.parametrize("where", ["sqlite", "postgres"])
def test_import_reports_damage_with_file_and_line(tmp_path, where, request):
    target = str(tmp_path / "s.sqlite") if where == "sqlite" else request.getfixturevalue("pg_database")
    damaged = tmp_path / "damaged.jsonl"
    lines = (PI_FIXTURES / "large-session.jsonl").read_bytes().splitlines(keepends=True)
    lines[5] = b"{not json\n"
    damaged.write_bytes(b"".join(lines))
    done = run("import", str(damaged), "--to", target)
    assert done.returncode == 1 and "Traceback" not in done.stderr
    assert f"{damaged}:6: skipped, the line is not valid JSON" in done.stderr
    assert "1 line skipped" in done.stderr
    assert f"imported {len(lines) - 2:,} entries" in done.stdout
