"""From command-line arguments to a running browser."""

from __future__ import annotations

import os
import shutil
import signal
import sys
import tempfile
from importlib import resources
from pathlib import Path

from ..opening import (
    DEFAULT_SESSIONS_DIR,
    Address,
    Progress,
    list_sessions,
    open_or_read_only,
    open_session,
    parse_address,
)
from ..session import Session
from .settings import default_settings_path

# Below this size a session opens before the app starts (as fast as drawing a loading screen);
# above it the app paints first and indexes behind a progress bar.
LOADING_MIN = 4 << 20


DEMO_NAME = "demo.jsonl"


def demo_copy() -> Path:
    """A private copy of the bundled demo session, so moves can be tried safely."""
    directory = Path(tempfile.mkdtemp(prefix="sessiontree-demo-"))
    target = directory / DEMO_NAME
    with resources.as_file(resources.files("sessiontree.demo") / "demo.jsonl") as source:
        shutil.copyfile(source, target)
    target.chmod(0o600)
    return target


def forget_demo(directory: Path) -> list[Path]:
    """Remove the private demo copy and what is kept beside it under its name; what the user
    made from it there (a fork, an export) stays, and is returned. The directory goes when
    nothing else is in it."""
    made = sorted(p for p in directory.iterdir() if not p.name.startswith(DEMO_NAME))
    if not made:
        shutil.rmtree(directory, ignore_errors=True)
        return []
    for ours in directory.glob(f"{DEMO_NAME}*"):
        if ours.is_dir():
            shutil.rmtree(ours, ignore_errors=True)
        else:
            ours.unlink(missing_ok=True)
    return made


def open_for_browsing(
    path: str | Path, *, read_only: bool, progress: Progress | None = None
) -> tuple[Session, str | None]:
    """Open writable when possible; a session locked by another writer opens read-only, with a
    note saying why. The writer lock is taken for each write only: a teammate browsing a
    session kept the owner's agent and imports out until they quit, and an agent built on the
    library was refused a file the app had open (QA).
    The UTF-8 check of message text is left for after the first paint (`SessionTreeApp` runs it
    in a worker; writes wait for it anyway)."""
    if read_only:
        return open_session(path, read_only=True, verify="later", progress=progress), None
    session = open_or_read_only(path, verify="later", progress=progress, lock="write")
    return session, session.read_only_reason


def build_app(
    path: str | None,
    *,
    read_only: bool = False,
    summarizer: str | None = None,
    follow: bool = True,
    pick: bool = False,
    only: bool = False,
):
    """The app for `sessiontree PATH`. `only`: the session given is the only one it shows (a
    page `serve` serves: `o` listed the files beside it, and Pi's sessions beside the demo, to
    whoever reached the page); a directory or a database without `#ID` still lists its own.
    With `read_only` too, the page writes no file at all (`SessionTreeApp.writes_nothing`)."""
    from .app import Opening, SessionTreeApp

    def opener(chosen: Path) -> Session:
        return open_for_browsing(chosen, read_only=read_only)[0]

    note = None
    if pick or (path is not None and Path(path).is_dir()):
        directory = Path(path) if path else DEFAULT_SESSIONS_DIR
        return SessionTreeApp(None, summarizer=summarizer, follow=follow, picker_dir=directory, opener=opener)
    demo_dir = None
    if path is None:
        copy = demo_copy()
        demo_dir, path = copy.parent, str(copy)
        note = "This is a private copy of the bundled demo session: moves are safe to try."
    target = path
    address = parse_address(target)
    database = Address(address.kind, address.location) if address.kind != "jsonl" else None

    def address_opener(text: str) -> tuple[Session, str | None]:
        return open_for_browsing(text, read_only=read_only)

    remote = address.kind == "postgres"  # a server may take seconds to answer
    if database is not None and address.session_id is None:
        # which one: the database's sessions to choose from (it said "add #SESSION_ID"); a
        # server's are listed once the app has painted, a file's here (one session opens at once)
        listing = None if remote else list_sessions(database)
        if listing is None or len(listing) > 1:
            return SessionTreeApp(
                None,
                summarizer=summarizer,
                follow=follow,
                database=database,
                database_sessions=listing,
                address_opener=address_opener,
            )
    if not remote and _size(target) < LOADING_MIN:  # opens faster than a loading screen would paint
        session, locked_note = open_for_browsing(target, read_only=read_only)
        # From the demo, `o` lists the user's own sessions (Pi's folder); on a machine without
        # Pi, the demo's folder, where its forks and exports go (the current directory, a
        # checkout of this project, held none).
        others = None
        if demo_dir is not None:
            others = DEFAULT_SESSIONS_DIR if DEFAULT_SESSIONS_DIR.is_dir() else demo_dir
        app = SessionTreeApp(
            session,
            summarizer=summarizer,
            follow=follow,
            note=locked_note or note,
            opener=opener,
            picker_dir=others,
            database=database,
            address_opener=address_opener,
        )
        app.demo_dir = demo_dir
        app.only_session = only
        app.writes_nothing = only and read_only
        return app

    def open_it(progress: Progress) -> tuple[Session, str | None]:
        return open_for_browsing(target, read_only=read_only, progress=progress)

    # The app paints first and opens the session behind a progress bar (tui/loading.py).
    opening = Opening(address.display() if remote else Path(path).name, open_it)
    app = SessionTreeApp(
        None,
        summarizer=summarizer,
        follow=follow,
        note=note,
        opener=opener,
        opening=opening,
        database=database,
        address_opener=address_opener,
    )
    app.demo_dir = demo_dir
    app.only_session = only
    app.writes_nothing = only and read_only
    return app


def _size(path: str) -> int:
    """The file's size, or 0 for what is not a local file (a database address, a missing file:
    opening it says what is wrong)."""
    try:
        return os.stat(path).st_size
    except (OSError, ValueError):
        return 0


def launch(path: str | None, **options) -> int:
    app = build_app(path, **options)
    app.settings_path = default_settings_path()  # the command line's app remembers the theme

    def close(signum: int, frame: object) -> None:
        # The terminal closed (SIGHUP) or someone asked us to stop (SIGTERM): leave the way `q`
        # does, so the demo copy is removed and the session closed instead of leaking. A hang-up
        # comes with SIGCONT, on which Textual's driver resumes application mode
        # (textual/drivers/linux_driver.py, `_sigcont_application`): arriving while the app
        # quits, that starts a new input thread after the old one was stopped, which then spins
        # on the closed terminal at full CPU and keeps the process from ever exiting. With the
        # terminal gone there is nothing to resume.
        signal.signal(signal.SIGCONT, signal.SIG_DFL)
        app.leave()

    previous = {sig: signal.signal(sig, close) for sig in (signal.SIGHUP, signal.SIGTERM)}
    try:
        app.run()
    finally:
        for sig, handler in previous.items():
            signal.signal(sig, handler)
        if app.demo_dir is not None:  # the private demo copy goes away with the app
            made = forget_demo(app.demo_dir)
            if made:  # a fork or an export made from the demo: never deleted unseen
                names = ", ".join(p.name for p in made[:3]) + (", …" if len(made) > 3 else "")
                print(
                    f"sessiontree: kept what you made from the demo in {app.demo_dir}: {names}",
                    file=sys.stderr,
                )
    if app.unwritten:  # said on the status line, gone with the screen: a user who quit anyway sees it
        print(
            "sessiontree: not written (you left before the file check ended): " + "; ".join(app.unwritten),
            file=sys.stderr,
        )
    if app.still_opening:
        # `q` while connecting to a server that does not answer waited for the connection's
        # timeout (10 s) on a blank terminal: no session is open yet, nothing to close.
        sys.stdout.flush()
        sys.stderr.flush()
        os._exit(app.return_code or 0)
    if app.open_failed is not None:  # said on the screen, gone with it: said again, as a command says it
        print(f"sessiontree: {app.open_failed} [{app.open_failed.code}]", file=sys.stderr)
        return 2
    # 1 after an error Textual printed (its traceback ended the app): a wrapper script sees it
    return app.return_code or 0
