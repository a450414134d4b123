"""Kill a writer at random moments and check that nothing acknowledged is ever lost.

A writer process appends entries to a session (small and multi-MB messages, moves with branch
summaries, labels) and, after each append returns, records the new ids in an acknowledgement
file. The harness kills it with SIGKILL at a random moment, then reopens the session and checks:

- every acknowledged id is present, and the log still starts with every entry it had before
  (append-only: no line lost, none rewritten);
- no line is glued to another and nothing else is damaged (only a torn final line is allowed);
- a torn final line is set aside by the next writer, byte for byte, in a `.torn` sidecar;
- the tree is consistent: every parent exists, the leaf exists; for SQLite and PostgreSQL the
  materialised state equals a fold of the log, and SQLite's `PRAGMA integrity_check` passes.

With `foreign=True` (JSONL), a second process appends whole lines the way Pi does — `O_APPEND`
writes, no lock — while our writer runs and is killed: its lines land during torn-tail repairs
and failing appends, and every one it acknowledged must survive (a line glued onto a torn
fragment is read back by salvage).

For PostgreSQL the "path" is `URL#SESSION_ID`; the killed writer's advisory lock goes when the
server notices its connection closed, so the next writer waits for it briefly.

Used by tests/storage/test_crash.py (a few dozen kills) and scripts/crashtest.py (a thousand or more).
"""

from __future__ import annotations

import os
import random
import signal
import sqlite3
import subprocess
import sys
import time
from collections.abc import Callable
from dataclasses import dataclass, field
from pathlib import Path

from sessiontree.model.errors import SessionError
from sessiontree.session import Session
from sessiontree.storage.jsonl import JsonlStorage
from sessiontree.storage.postgres import PostgresStorage
from sessiontree.storage.sqlite import SqliteStorage

SESSION_ID = "crash-test"


def _open_postgres_writer(address: str) -> Session:
    url, _, sid = address.partition("#")
    deadline = time.monotonic() + 15
    while True:
        try:
            return Session(PostgresStorage.open(url, sid))
        except SessionError as exc:
            if exc.code == "not_found":
                return Session(PostgresStorage.create(url, cwd="/crash", session_id=sid))
            if exc.code != "locked" or time.monotonic() > deadline:
                raise
            time.sleep(0.05)  # the previous writer was just killed: its lock goes with its connection


def _open_writer(backend: str, path: Path | str) -> Session:
    if backend == "postgres":
        return _open_postgres_writer(str(path))
    path = Path(path)
    if backend == "jsonl":
        if path.exists():
            return Session(JsonlStorage.open(path))
        return Session(JsonlStorage.create(path, cwd="/crash", session_id=SESSION_ID))
    if path.exists():
        try:
            return Session(SqliteStorage.open(path, SESSION_ID))
        except SessionError as exc:
            if exc.code != "not_found":
                raise
    return Session(SqliteStorage.create(path, cwd="/crash", session_id=SESSION_ID))


def writer(
    backend: str, path: Path | str, ack_path: Path, seed: int, ready: Callable[[], None] | None = None
) -> None:
    """Append until killed; acknowledge each append after it returned."""
    rng = random.Random(seed)
    session = _open_writer(backend, path)
    ack = os.open(ack_path, os.O_WRONLY | os.O_APPEND | os.O_CREAT, 0o600)
    if ready is not None:
        ready()
    n = 0
    while True:
        n += 1
        before = session.entry_count()
        ids = session.tree.ids
        roll = rng.random()
        if roll < 0.12 and ids:
            summary = f"left branch {n}" if rng.random() < 0.5 else None
            session.move_to(ids[rng.randrange(len(ids))], summary)
        elif roll < 0.15 and ids:
            session.append_label(ids[rng.randrange(len(ids))], f"label {n}")
        elif roll < 0.40:
            size = rng.choice([256 << 10, 2 << 20, 8 << 20])  # big tool outputs: torn writes happen here
            session.append_message({"role": "toolResult", "toolName": "bash", "content": "x" * size, "n": n})
        else:
            session.append_message({"role": "user", "content": f"message {n}", "n": n})
        os.write(ack, (" ".join(session.tree.ids[before:]) + "\n").encode())


def foreign_writer(path: Path, ack_path: Path, seed: int) -> None:
    """Append root entries with plain `O_APPEND` writes and no lock, as Pi does, until killed;
    acknowledge each after its write returned."""
    rng = random.Random(seed)
    fd = os.open(path, os.O_WRONLY | os.O_APPEND)
    ack = os.open(ack_path, os.O_WRONLY | os.O_APPEND | os.O_CREAT, 0o600)
    os.write(1, b"r")  # started: a round's kill waits for this (a loaded machine killed it first)
    n = 0
    while True:
        n += 1
        eid = f"pi{seed:x}x{n}"
        line = (
            f'{{"type":"message","id":"{eid}","parentId":null,"timestamp":"2026-01-01T00:00:00.000Z",'
            f'"message":{{"role":"user","content":"from another writer {n}","timestamp":1}}}}\n'
        )
        os.write(fd, line.encode())
        os.write(ack, (eid + "\n").encode())
        time.sleep(rng.uniform(0.0, 0.02))


def foreign_main() -> None:
    """Entry point of the foreign writer's subprocess: argv = path ack_path seed."""
    foreign_writer(Path(sys.argv[1]), Path(sys.argv[2]), int(sys.argv[3]))


def _harness_env() -> dict[str, str]:
    """The environment of a writer subprocess: `harness` lives in tests/, not in the package."""
    tests_dir = str(Path(__file__).resolve().parents[1])
    path = os.environ.get("PYTHONPATH")
    return {**os.environ, "PYTHONPATH": tests_dir + (os.pathsep + path if path else "")}


def writer_main() -> None:
    """Entry point of a writer subprocess: argv = backend path ack_path seed."""
    backend, ack, seed = sys.argv[1], Path(sys.argv[3]), int(sys.argv[4])
    path = sys.argv[2] if backend == "postgres" else Path(sys.argv[2])  # a URL is no path

    def ready() -> None:
        sys.stdout.write("ready\n")
        sys.stdout.flush()

    writer(backend, path, ack, seed, ready)


@dataclass
class Report:
    backend: str
    kills: int = 0
    acknowledged: int = 0
    entries: int = 0
    torn_tails: int = 0
    set_aside: int = 0
    continued: int = 0  # torn fragments the foreign writer's next line completed (salvaged)
    lost: int = 0
    epochs: int = 0
    problems: list[str] = field(default_factory=list)
    seconds: float = 0.0

    def summary(self) -> str:
        return (
            f"{self.backend}: {self.kills} kills in {self.seconds:.0f} s, {self.acknowledged} acknowledged"
            f" appends, {self.entries} entries at the end, {self.torn_tails} torn tails found and"
            f" {self.set_aside} set aside, {self.continued} continued by the other writer,"
            f" {self.lost} lost, {len(self.problems)} problems"
            f" ({self.epochs + 1} session files)"
        )


class Harness:
    max_bytes = 96 << 20

    def __init__(
        self,
        backend: str,
        workdir: Path,
        seed: int = 0,
        spawn: str = "subprocess",
        url: str | None = None,
        foreign: bool = False,
    ) -> None:
        self.backend = backend
        self.foreign = foreign and backend == "jsonl"
        self.foreign_ack = workdir / "foreign-acknowledged.txt"
        self.workdir = workdir
        self.path = workdir / ("session.jsonl" if backend == "jsonl" else "sessions.sqlite")
        self.address = f"{url}#crash-{os.getpid()}-{seed}-{time.time_ns()}" if url else None
        self.ack = workdir / "acknowledged.txt"
        self.rng = random.Random(seed)
        self.spawn = spawn
        self.report = Report(backend)
        self._previous: list[str] = []
        self._pending_fragment: bytes | None = None
        self._acked_before = 0  # acknowledged appends of earlier session files

    # --- one round ----------------------------------------------------------------------------

    def round(self) -> None:
        if self.address is None and self.path.exists() and self.path.stat().st_size > self.max_bytes:
            self._new_epoch()
        seed = self.rng.randrange(1 << 30)
        patient = self.rng.random() < 0.85  # usually kill while appending, sometimes while opening
        other = self._start_foreign(seed) if self.foreign and self.path.exists() else None
        if self.spawn == "fork":
            read_end, write_end = os.pipe()
            pid = self._fork(seed, write_end)
            os.close(write_end)
            if patient:
                os.read(read_end, 1)  # the writer has opened the session (and repaired it)
                time.sleep(self.rng.uniform(0.0, 0.03))
            else:
                time.sleep(self.rng.uniform(0.0, 0.02))
            os.close(read_end)
            os.kill(pid, signal.SIGKILL)
            os.waitpid(pid, 0)
        else:
            proc = subprocess.Popen(
                [
                    sys.executable,
                    "-c",
                    "from harness.crashtest import writer_main; writer_main()",
                    self.backend,
                    self.address or str(self.path),
                    str(self.ack),
                    str(seed),
                ],
                stdout=subprocess.PIPE,
                stderr=subprocess.DEVNULL,
                text=True,
                env=_harness_env(),
            )
            if patient:
                proc.stdout.readline()
                time.sleep(self.rng.uniform(0.0, 0.06))
            else:
                time.sleep(self.rng.uniform(0.05, 0.25))
            proc.send_signal(signal.SIGKILL)
            proc.wait()
            proc.stdout.close()
        if other is not None:
            other.send_signal(signal.SIGKILL)
            other.wait()
            if other.stdout is not None:
                other.stdout.close()
        self.report.kills += 1
        self.verify()

    def _start_foreign(self, seed: int) -> subprocess.Popen[bytes]:
        """The lock-free writer, once it has begun: its interpreter's start took longer than a
        round on a loaded machine, and no round had a line of it (a flaky test)."""
        proc = subprocess.Popen(
            [
                sys.executable,
                "-c",
                "from harness.crashtest import foreign_main; foreign_main()",
                str(self.path),
                str(self.foreign_ack),
                str(seed),
            ],
            stdout=subprocess.PIPE,
            stderr=subprocess.DEVNULL,
            env=_harness_env(),
        )
        assert proc.stdout is not None
        proc.stdout.read(1)
        return proc

    def _fork(self, seed: int, ready_fd: int) -> int:
        pid = os.fork()
        if pid == 0:  # pragma: no cover - the child never returns
            try:
                writer(
                    self.backend, self.address or self.path, self.ack, seed, lambda: os.write(ready_fd, b"r")
                )
            finally:
                os._exit(0)
        return pid

    def _new_epoch(self) -> None:
        """Start a fresh session once the file is big (keeps a 1000-kill run on a modest disk)."""
        self._acked_before += len(self._acknowledged())
        self._acked_before += len(self._acknowledged(self.foreign_ack))
        for p in self.workdir.iterdir():
            p.unlink()
        self._previous = []
        self._pending_fragment = None
        self.report.epochs += 1

    # --- checks -------------------------------------------------------------------------------

    def _acknowledged(self, ack: Path | None = None) -> set[str]:
        ack = ack or self.ack
        if not ack.exists():
            return set()
        text = ack.read_bytes()
        complete = text[: text.rfind(b"\n") + 1].decode()
        return {i for line in complete.splitlines() for i in line.split()}

    def verify(self) -> None:
        acked = self._acknowledged() | self._acknowledged(self.foreign_ack)
        if self.address is not None:
            self._verify_postgres(acked)
            return
        if not self.path.exists():
            return
        if self.backend == "jsonl":
            self._verify_jsonl(acked)
        else:
            self._verify_sqlite(acked)

    def _problem(self, text: str) -> None:
        self.report.problems.append(f"after kill {self.report.kills}: {text}")

    def _common(self, session: Session, acked: set[str]) -> None:
        ids = list(session.tree.ids)
        present = set(ids)
        missing = acked - present
        if missing:
            self.report.lost += len(missing)
            self._problem(f"{len(missing)} acknowledged entries missing, e.g. {sorted(missing)[:3]}")
        if ids[: len(self._previous)] != self._previous:
            self._problem("the log no longer starts with the entries it had before the kill")
        self._previous = ids
        tree = session.tree
        if any(p == -2 for p in tree.parent):
            self._problem("an entry's parent is missing")
        if session.leaf_id is not None and session.leaf_id not in present:
            self._problem("the leaf points at no entry")
        self.report.acknowledged = self._acked_before + len(acked)
        self.report.entries = len(ids)

    def _verify_jsonl(self, acked: set[str]) -> None:
        storage = JsonlStorage.open(self.path, read_only=True)
        session = Session(storage)
        try:
            for d in session.diagnostics:
                if d.severity == "error":
                    self._problem(f"damage: {d.format()}")
            fragment = storage.torn_tail()
            pending = self._pending_fragment
            if pending is not None and fragment != pending:
                # the writer that ran since the last kill repaired the tail: it must have kept
                # the fragment's exact bytes in a sidecar — unless the foreign writer completed
                # the line first (its entry glued on), which readers salvage in place
                kept = [p.read_bytes() for p in self.workdir.glob("*.torn*")]
                if any(pending in k for k in kept):
                    self.report.set_aside += 1
                elif self.foreign and pending in self.path.read_bytes():
                    self.report.continued += 1
                else:
                    self._problem("a torn fragment disappeared without being set aside")
            if fragment is not None and fragment != pending:
                self.report.torn_tails += 1
            self._pending_fragment = fragment
            self._common(session, acked)
        finally:
            session.close()

    def _verify_sqlite(self, acked: set[str]) -> None:
        try:
            session = Session(SqliteStorage.open(self.path, SESSION_ID, read_only=True))
        except SessionError as exc:
            if exc.code == "not_found":  # killed before the session row was committed
                return
            raise
        try:
            for problem in session.storage.verify_state():  # type: ignore[attr-defined]
                self._problem(f"materialised state: {problem}")
            with sqlite3.connect(self.path) as conn:
                check = conn.execute("PRAGMA integrity_check").fetchone()[0]
            if check != "ok":
                self._problem(f"integrity_check: {check}")
            self._common(session, acked)
        finally:
            session.close()

    def _verify_postgres(self, acked: set[str]) -> None:
        url, _, sid = (self.address or "").partition("#")
        try:
            session = Session(PostgresStorage.open(url, sid, read_only=True))
        except SessionError as exc:
            if exc.code == "not_found":  # killed before the session row was committed
                return
            raise
        try:
            for problem in session.storage.verify_state():
                self._problem(f"materialised state: {problem}")
            self._common(session, acked)
        finally:
            session.close()


def run(
    backend: str,
    workdir: Path,
    *,
    kills: int,
    seconds: float,
    seed: int = 0,
    spawn: str = "subprocess",
    url: str | None = None,
    foreign: bool = False,
) -> Report:
    """Up to `kills` kill/verify rounds, stopping early after `seconds`. PostgreSQL (`backend`
    "postgres") needs the database's `url`; `foreign` adds a lock-free writer (JSONL)."""
    harness = Harness(backend, workdir, seed, spawn, url, foreign)
    start = time.monotonic()
    while harness.report.kills < kills and time.monotonic() - start < seconds:
        harness.round()
    harness.report.seconds = time.monotonic() - start
    return harness.report
