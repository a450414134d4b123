"""`sessiontree` as a process in a real pseudo-terminal: what happens when the terminal goes away.

Closing the terminal's master side is what closing a terminal window, a dropped ssh connection
or `tmux kill-session` does: the kernel hangs the terminal up and sends the session leader
SIGHUP and then SIGCONT."""

from __future__ import annotations

import fcntl
import os
import pty
import select
import shutil
import signal
import struct
import sys
import termios
import time
from pathlib import Path

import pytest

FIXTURE = Path(__file__).resolve().parent.parent / "fixtures" / "pi" / "large-session.jsonl"


def start(path: Path, term: str = "xterm-256color") -> tuple[int, int]:
    pid, fd = pty.fork()
    if pid == 0:  # the child: the app, as a user starts it
        os.environ["TERM"] = term
        os.execv(sys.executable, [sys.executable, "-m", "sessiontree", str(path)])
    fcntl.ioctl(fd, termios.TIOCSWINSZ, struct.pack("HHHH", 24, 80, 0, 0))
    return pid, fd


def read_until(fd: int, text: bytes, timeout: float) -> bytes:
    seen = b""
    deadline = time.monotonic() + timeout
    while text not in seen and time.monotonic() < deadline:
        ready, _, _ = select.select([fd], [], [], 0.1)
        if ready:
            try:
                seen += os.read(fd, 65536)
            except OSError:
                break
    return seen


def exited_within(pid: int, seconds: float) -> bool:
    deadline = time.monotonic() + seconds
    while time.monotonic() < deadline:
        done, _ = os.waitpid(pid, os.WNOHANG)
        if done:
            return True
        time.sleep(0.05)
    os.kill(pid, signal.SIGKILL)
    os.waitpid(pid, 0)
    return False


@pytest.mark.parametrize("delay", [0.0, 0.05, 0.2, 0.5, 1.0])
def test_a_terminal_hung_up_while_the_app_quits_leaves_no_process_behind(tmp_path, delay):
    """`q`, then the terminal closes while the app is shutting down. The hang-up's SIGCONT used
    to restart Textual's input thread after it had been stopped: the process then spun at full
    CPU on the closed terminal and never exited."""
    path = tmp_path / FIXTURE.name
    shutil.copyfile(FIXTURE, path)
    pid, fd = start(path)
    try:
        assert b"Help" in read_until(fd, b"Help", 30), "the browser did not come up"
        time.sleep(0.3)
        os.write(fd, b"q")
        time.sleep(delay)
    finally:
        os.close(fd)  # the hang-up
    assert exited_within(pid, 15), "the app outlived its terminal"


def test_a_terminal_hung_up_while_browsing_ends_the_app(tmp_path):
    path = tmp_path / FIXTURE.name
    shutil.copyfile(FIXTURE, path)
    pid, fd = start(path)
    try:
        assert b"Help" in read_until(fd, b"Help", 30), "the browser did not come up"
    finally:
        os.close(fd)
    assert exited_within(pid, 15), "the app outlived its terminal"


def test_a_big_file_that_cannot_open_ends_as_a_small_one_does(tmp_path):
    """A file of 4 MB or more opens behind the loading screen, which says why it cannot be
    opened; quitting it then exited with status 0 and left nothing said, where a small file
    that cannot open is said on stderr with status 2 (QA)."""
    path = tmp_path / "garbage.jsonl"
    path.write_bytes(b"not a session at all\n" * 250_000)  # 5 MB: the loading screen's
    pid, fd = start(path)
    try:
        assert b"Cannot open" in read_until(fd, b"Cannot open", 30), "the loading screen said nothing"
        time.sleep(0.3)
        os.write(fd, b"q")
        said = read_until(fd, b"[invalid_session]", 15)
        deadline = time.monotonic() + 15  # the terminal stays open until it exits: no hang-up
        while not (done := os.waitpid(pid, os.WNOHANG))[0] and time.monotonic() < deadline:
            read_until(fd, b"\0", 0.05)
    finally:
        os.close(fd)
    if not done[0]:
        os.kill(pid, signal.SIGKILL)
        os.waitpid(pid, 0)
    assert done[0] == pid and os.waitstatus_to_exitcode(done[1]) == 2
    assert b"sessiontree: " in said and b"[invalid_session]" in said


def test_a_dumb_terminal_is_told_what_to_run_instead(tmp_path):
    """TERM=dumb (an editor's shell) got the full-screen app: its escape codes shown as text."""
    pid, fd = start(FIXTURE, term="dumb")
    try:
        said = read_until(fd, b"sessiontree export FILE", 15)
        assert exited_within(pid, 15)
    finally:
        os.close(fd)
    assert b"TERM=dumb" in said and b"sessiontree tree FILE" in said
    assert b"\x1b[" not in said  # not one escape code of a screen drawn


def two_sessions(tmp_path: Path) -> Path:
    folder = tmp_path / "sessions"
    folder.mkdir()
    for name in ("a.jsonl", "b.jsonl"):
        shutil.copyfile(FIXTURE, folder / name)
    return folder


def test_q_typed_before_the_picker_is_up_quits(tmp_path):
    """Keys typed in the first ~0.7 s of `sessiontree DIR` went into the search box, which had
    the focus until the list took it (QA): `q` typed at once left "q" in the box."""
    pid, fd = start(two_sessions(tmp_path))
    try:
        os.write(fd, b"q")  # before the app has started: the terminal keeps it
        assert exited_within(pid, 30), "q was not taken as the list's key"
    finally:
        os.close(fd)


def test_enter_typed_before_the_picker_is_up_opens_the_session(tmp_path):
    """Enter typed before the app has the terminal arrives as a line feed (the terminal turns
    a carriage return into one until the app sets it raw), Ctrl+J to the app: it was lost."""
    pid, fd = start(two_sessions(tmp_path))
    try:
        os.write(fd, b"\r")
        assert b"Find" in read_until(fd, b"Find", 30), "the session did not open"  # the tree's footer
        os.write(fd, b"q")
        assert exited_within(pid, 15)
    finally:
        os.close(fd)
