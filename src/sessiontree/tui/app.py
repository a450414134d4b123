"""The browser application: one `BrowserScreen` per open session, the session picker, and the
keys that work everywhere (help, quit).

The app talks only to `Session` (through the screens) and to the opener it is given. Reads that
may be slow on big sessions (context previews, search) run in thread workers; writes (moves,
labels, names) happen on the UI thread, where they take about a millisecond.
"""

from __future__ import annotations

import asyncio
import os
import sys
import threading
import time
from collections.abc import Callable, Iterable
from dataclasses import dataclass
from functools import partial
from pathlib import Path
from typing import TYPE_CHECKING, Any

from textual import events, on
from textual.app import App, SystemCommand
from textual.await_complete import AwaitComplete
from textual.binding import Binding
from textual.dom import DOMNode
from textual.screen import Screen

from ..display import label_text
from ..model.errors import SessionError
from ..opening import Address, is_one_of, list_sessions, open_or_read_only, upgrade_session
from ..outline import Filter
from ..session import Session
from .browser import BrowserScreen
from .collector import CHECK_EVERY, IdleCollector
from .input_gate import InputGate
from .inputs import KeysAfterClosing
from .keymap import checked_keymap, load_keymap
from .loading import LoadingScreen
from .modals import SummaryPrompt
from .palette import TypedPalette
from .settings import load_settings, save_setting
from .tree_view import SessionTreeView

if TYPE_CHECKING:
    from textual.theme import Theme

    from .database_picker import DatabasePickerScreen

# Seconds a thread holding the interpreter lock runs before one waiting for it gets it (Python's
# default: 5 ms), while the app runs. A frame goes to the terminal from Textual's writer thread;
# with the preview's worker planning beside it, the frame waited one or two default slices (up to
# 15 ms after it was drawn, in tmux). One millisecond bounds that wait, at the cost of more
# switches between busy threads.
SWITCH_INTERVAL = 0.001
RESUME_COLLECTION = 0.02  # seconds after an input's frame is drawn that collections resume
# Seconds after an input's frame is drawn that the tree reads the pages around the screen
# (`SessionTreeView.read_ahead`), once the preview's first screen is usually up, and between
# its steps: page keys half a second apart came before the idle work's turn (`_between_keys`,
# after `collector.QUIET`), and each decoded and drew a whole page in its frame.
READ_AHEAD_AFTER = 0.15
READ_AHEAD_GAP = 0.01

# The picker and help screens load on first use: a session given on the command line paints
# without importing them (the picker's catalog and search add ~30 ms to every start).


class _Abandoned(Exception):
    """Raised from the progress callback to stop an open the user quit."""


TYPE_AHEAD_PAUSE = 0.03  # seconds between keys replayed after an open (64 at most: 2 s)


@dataclass(frozen=True, slots=True)
class Opening:
    """A session to open once the app has painted: `open(progress)` returns the session and a
    note to show (why it is read-only, say); `label` names it on the loading screen."""

    label: str
    open: Callable[[Callable[[int, int], None]], tuple[Session, str | None]]


class SessionTreeApp(App[None]):
    """`sessiontree FILE` (or a directory: the picker first)."""

    CSS_PATH = "app.tcss"  # next to this module; Textual resolves it relative to the class
    TITLE = "sessiontree"
    # Classes every screen gets by its size (`app.tcss`): narrow, a dialog's minimum width ran
    # past the terminal's right edge and the preview beside the tree had 20 columns (it goes
    # below under 72), and under 20 rows a dialog's padding hid its keys line.
    HORIZONTAL_BREAKPOINTS = [(0, "-narrow"), (72, "-roomy")]
    VERTICAL_BREAKPOINTS = [(0, "-low"), (20, "-tall")]

    # Bindings of the app come first in the footer: help and quit stay visible at any width.
    BINDINGS = [
        Binding("question_mark", "help", "Help", id="help"),
        Binding("q", "quit", "Quit", id="quit"),
    ]
    key_problems: tuple[str, ...] = ()  # what keys.toml asked that was left out, said at the start
    only_session = False  # the session given is the only one shown: `o` is off (`build_app`)
    # `serve --read-only`: no file is written on the server, forks and exports included (they
    # went next to the served session, made by whoever reached the page)
    writes_nothing = False

    def __init__(
        self,
        session: Session | None,
        *,
        summarizer: str | None = None,
        follow: bool = True,
        picker_dir: Path | None = None,
        note: str | None = None,
        opener: Callable[[Path], Session] | None = None,
        keymap_path: Path | None = None,
        opening: Opening | None = None,
        database: Address | None = None,
        database_sessions: list[dict[str, Any]] | None = None,
        address_opener: Callable[[str], tuple[Session, str | None]] | None = None,
    ) -> None:
        """`opening`: a session to open after the first paint, behind a progress bar (what
        `sessiontree FILE` does, so a large file never leaves the terminal blank). `database`:
        the database the session is in (`o` lists its sessions); with no session and no
        opening, its sessions are listed first to choose from (`database_sessions`, when the
        launcher has already listed them)."""
        super().__init__()
        self.database = database
        self._database_sessions = database_sessions
        # address -> (session, a note to show): how a session chosen in `database` is opened
        self.address_opener = address_opener or (lambda text: (open_or_read_only(text, lock="write"), None))
        self._first_session = session
        self._opening = opening
        # An open that cannot be stopped (connecting to a server that does not answer) is still
        # running: the process leaves without waiting for it (`launch`), nothing being open yet.
        self.still_opening = False
        # Why the session given could not be opened (the loading screen says it): the process
        # then ends as a command that cannot open its file does, saying it, with status 2.
        self.open_failed: SessionError | None = None
        self._quitting = threading.Event()
        self.summarizer = summarizer
        self.follow = follow
        self.picker_dir = picker_dir
        self.note = note
        # Path -> Session, for a picked session and a reopened (upgraded) one.
        self.opener: Callable[[Path], Session] = opener or (
            lambda path: open_or_read_only(path, lock="write")
        )
        self.keymap_path = keymap_path
        # Where the theme chosen is remembered (`tui/settings.py`); None: not remembered
        self.settings_path: Path | None = None
        self._theme_saved: str | None = None  # the theme the settings file holds
        self.demo_dir: Path | None = None  # set by the launcher for the bundled demo
        # Write keys still waiting for the file check when the app was made to leave without
        # them (`q q`, a signal), as the status line named them: `launch` says them in the shell.
        self.unwritten: list[str] = []
        self.collector = IdleCollector()  # full garbage-collection passes between keys
        self.input_gate = InputGate()  # the preview's worker waits while an input is handled
        self._switch_interval = sys.getswitchinterval()  # given back when the app ends
        # Keys scroll at once, as in the tree: Textual's smooth scroll kept the preview, help and
        # dialogs moving for 0.7-1.0 s after PgUp or End, ~30 frames each. A user who set
        # Textual's own TEXTUAL_ANIMATIONS keeps what they chose.
        if "TEXTUAL_ANIMATIONS" not in os.environ:
            self.animation_level = "none"

    @property
    def browser(self) -> BrowserScreen | None:
        """The browser screen of the open session (None while only the picker is open)."""
        for screen in reversed(self.screen_stack):
            if isinstance(screen, BrowserScreen):
                return screen
        return None

    @property
    def session(self) -> Session | None:
        browser = self.browser
        return browser.session if browser is not None else self._first_session

    def on_unmount(self) -> None:
        self._quitting.set()  # an open still running stops at its next progress report
        sys.setswitchinterval(self._switch_interval)
        self.collector.resume()

    def _remappable(self) -> list[Binding]:
        """The bindings a keymap is checked against: the app's (Textual's own `ctrl+q` and the
        command palette's key among them), Esc, the browser's and its tree's, whose keys a
        remapped browser key would clash with."""
        palette = Binding(self.COMMAND_PALETTE_BINDING, "command_palette", "Commands")
        # Esc closes the find bar and every dialog: `back = "escape"` wrote a move when Esc
        # reached the screen instead of closing the find bar (QA).
        closer = Binding("escape", "close", "Esc (it closes the find bar and dialogs)")
        classes = (type(self), App, BrowserScreen, SessionTreeView)
        return [palette, closer, *(b for cls in classes for b in cls.BINDINGS if isinstance(b, Binding))]

    def on_mount(self) -> None:
        sys.setswitchinterval(SWITCH_INTERVAL)
        self.set_interval(CHECK_EVERY, self._between_keys, name="between keys")
        keymap, problems = load_keymap(self.keymap_path)
        if keymap:
            keymap, clashes = checked_keymap(keymap, self._remappable())
            problems += clashes
        if keymap:
            self.set_keymap(keymap)
        self.key_problems = tuple(problems)  # help lists them too
        problems += self._remembered_theme()
        if problems:  # one toast: at 80x24 a third pushed the first out of sight
            said = "\n".join(f"• {problem}" for problem in problems) if len(problems) > 1 else problems[0]
            self.notify(
                said, title="Key bindings", severity="warning", markup=False, timeout=6 + 4 * len(problems)
            )
        session, self._first_session = self._first_session, None
        if self._opening is not None:
            self.push_screen(LoadingScreen(self._opening.label))
            self._open_in_background(self._opening)
            return
        if session is None and self.database is not None:
            sessions, self._database_sessions = self._database_sessions, None
            self._pick_in_database(sessions)
            return
        if session is None:
            self._pick(self.picker_dir or Path.cwd(), can_go_back=False)
            return
        self._show(session, self.note)

    def get_css_variables(self) -> dict[str, str]:
        """The theme's variables and the tints of `app.tcss`'s diff lines and leaf row: a muted
        tint of the text's colour, which the ANSI themes cannot mix, so there it was the text's
        very colour (green on green, unreadable on any palette; QA); none there."""
        variables = super().get_css_variables()
        ansi = self.current_theme.ansi
        for name, tint in (
            ("diff-added-background", "success-muted"),
            ("diff-removed-background", "error-muted"),
            ("leaf-row-background", "success-muted"),
        ):
            variables[name] = "ansi_default" if ansi else variables[tint]
        return variables

    def _remembered_theme(self) -> list[str]:
        """Apply the theme chosen in an earlier run, then remember each one chosen from now on;
        the problems to report (an unreadable settings file, a theme no longer there)."""
        path = self.settings_path
        if path is None:
            return []
        settings, problem = load_settings(path)
        problems = [problem] if problem else []
        name = settings.get("theme")
        if isinstance(name, str) and name in self.available_themes:
            self.theme = name
            self._theme_saved = name  # not written again when applied, only when changed
        elif name is not None:
            problems.append(f"{path}: no theme is called {name!r}; using {self.theme!r}")
        self.theme_changed_signal.subscribe(self, self._remember_theme)
        return problems

    def _remember_theme(self, theme: Theme) -> None:
        path = self.settings_path
        if path is None or theme.name == self._theme_saved:
            return
        try:
            save_setting(path, "theme", theme.name)
            self._theme_saved = theme.name
        except OSError as exc:  # said once: the theme still changes, only not for the next run
            self.settings_path = None
            self.notify(
                f"The theme will not be remembered: {exc.filename or path}: {exc.strerror or exc}",
                title="Settings",
                severity="warning",
                markup=False,
            )

    def _open_in_background(self, opening: Opening) -> None:
        """Open the session off the UI thread, moving the progress bar at most 20 times a
        second; quitting meanwhile stops the indexing at its next progress report. A daemon
        thread rather than a Textual worker: asyncio waits for its executor's threads when the
        app ends, and `q` while connecting to a server that does not answer waited out the
        connection's timeout (10 s) on a blank terminal."""
        screen = self.screen
        quit_ = self._quitting
        shown = 0.0

        def progress(done: int, total: int) -> None:
            nonlocal shown
            if quit_.is_set():
                raise _Abandoned
            now = time.monotonic()
            if now - shown >= 0.05 and isinstance(screen, LoadingScreen):
                shown = now
                self._from_thread(screen.advance, done, total)

        def run() -> None:
            try:
                session, note = opening.open(progress)
            except _Abandoned:
                return
            except SessionError as exc:
                self.open_failed = exc
                if isinstance(screen, LoadingScreen):
                    self._from_thread(screen.failed, str(exc))
                return
            finally:
                self.still_opening = False
            if quit_.is_set() or not self._from_thread(self._opened, session, note):
                session.close()

        self.still_opening = True
        threading.Thread(target=run, name="sessiontree open", daemon=True).start()

    def _from_thread(self, callback: Callable[..., object], *args: object) -> bool:
        """`call_from_thread`, False once the app has stopped (nothing runs it any more)."""
        if self._quitting.is_set():
            return False
        try:
            self.call_from_thread(callback, *args)
        except RuntimeError:  # the app ended meanwhile
            return False
        return True

    def _opened(self, session: Session, note: str | None) -> None:
        if self._exit:  # quit while the last bytes were read
            session.close()
            return
        loading = self.screen
        shown = self.switch_screen(
            BrowserScreen(session, summarizer=self.summarizer, follow=self.follow, note=note or self.note)
        )
        if isinstance(loading, LoadingScreen) and loading.typed:
            self.call_next(self._type_ahead, shown, loading.typed)

    async def _type_ahead(self, shown: AwaitComplete, typed: list[events.Key]) -> None:
        """The keys typed while the session opened, in order, once the browser is mounted; one
        at a time, each given the time to be handled (a prompt it opens to mount) before the
        next: posted at once, an Enter was handled in the search box before the words typed
        ahead of it (QA)."""
        await shown
        for key in typed:
            self.post_message(key)
            await asyncio.sleep(TYPE_AHEAD_PAUSE)

    def _show(self, session: Session, note: str | None = None) -> None:
        """The browser over `session`, in place of the current browser if there is one; `note`
        (from opening) goes on its status line."""
        screen = BrowserScreen(session, summarizer=self.summarizer, follow=self.follow, note=note)
        if self.browser is None:
            self.push_screen(screen)
        else:
            self.switch_screen(screen)  # the old browser unmounts and closes its session

    def _pick(self, directory: Path, *, can_go_back: bool, search_again: bool = False) -> None:
        from .picker import PickerScreen

        session = self.session
        current = Path(session.files[0]) if session is not None and session.files else None
        self.push_screen(
            PickerScreen(directory, can_go_back=can_go_back, search_again=search_again, current=current),
            partial(self._picked, directory),
        )

    async def _picked(self, directory: Path, path: Path | None) -> None:
        if path is None:
            if self.browser is None:
                self.exit()
            return
        browser = self.browser
        if browser is not None and is_one_of(path, browser.session.files):
            if browser.session.locked_out:
                self._reopen_for_writing(lambda: self.opener(path), path.name)
                return
            if browser.session.read_only:
                # Read-only since it was replaced, truncated or damaged under the app: the banner
                # says "reopen it", and choosing it went back to the stale view (QA).
                self._reopen(path)
                return
            # The session open already: back to it as it is (opened again, it was read-only,
            # as a second writer is)
            self.notify(f"{path.name} is the session open here", markup=False, timeout=4)
            return
        try:
            session = self.opener(path)
        except SessionError as exc:
            self.notify(str(exc), severity="error", markup=False)
            # the list it was chosen from, searched as it was (QA: the search was gone)
            self._pick(directory, can_go_back=browser is not None, search_again=True)
            return
        if session is not None:
            # an earlier pick's error ("not a readable session file") stayed over this session (QA)
            self.clear_notifications()
            self._show(session)

    def _open_again(self, open_it: Callable[[], Session | None]) -> Session | None:
        """The session open here, opened anew; None after saying why it could not be."""
        try:
            return open_it()
        except SessionError as exc:
            self.notify(str(exc), severity="error", markup=False)
            return None

    def _reopen(self, path: Path) -> None:
        """The session open here, chosen again after it turned read-only under the app: what
        the file holds now, read afresh (read-only again if it is damaged: the banner says).
        A session that was writing still holds its writer lock: opened beside it, the file
        came back read-only for "another process" (this one), and only a second try wrote
        (QA). So the old one lets go first, once the file is known to open."""
        session = self._open_again(lambda: self.opener(path))
        browser = self.browser
        if session is None or browser is None:
            return
        if session.locked_out and not browser.session.locked_out:  # the lock is the old session's
            browser.session.close()
            again = self._open_again(lambda: self.opener(path))
            if again is not None:
                session.close()
                session = again
        self._show(session)
        self.notify(f"{path.name} opened again", markup=False, timeout=4)

    def _reopen_for_writing(self, open_it: Callable[[], Session | None], name: str) -> None:
        """The session open here read-only because another writer held its lock, chosen again:
        that writer may have quit since (the banner went on naming its pid, and choosing the
        session went back to the read-only one)."""
        session = self._open_again(open_it)
        if session is None:
            return
        if session.read_only:
            reason = session.read_only_reason or "read-only"
            session.close()
            self.notify(f"Still read-only: {reason}", markup=False, timeout=6)
            return
        self._show(session)
        self.notify(f"{name} is open for writing now", markup=False, timeout=4)

    def open_path(self, path: Path) -> None:
        """Open another session in place of the current one (a fork just made, say)."""
        try:
            session = self.opener(path)
        except SessionError as exc:
            self.notify(f"{exc}", title="Cannot open", severity="error", markup=False)
            return
        self._show(session)

    def upgrade_and_reopen(self, location: str) -> None:
        browser = self.browser
        if browser is None:
            return
        browser.session.close()  # the upgrade takes the file's lock
        notes: list[str] = []
        try:
            backup = upgrade_session(location, notes)
        except SessionError as exc:
            self.notify(f"{exc}", title="Not upgraded", severity="error", markup=False)
            backup = None
        try:
            session = self.opener(Path(location))
        except SessionError as exc:
            self.notify(f"{exc}", title="Cannot reopen", severity="error", markup=False)
            return
        if session is not None:
            self._show(session)
            if backup:
                # named, not its whole path: the path wrapped mid-word in the toast at 80x24 (QA)
                kept = Path(backup).name
                said = f"Upgraded; the original is kept next to it as {kept}"
                if notes:  # the incomplete last line left out: the backup keeps it
                    said += " (with its incomplete last line, left out of the upgraded file)"
                self.notify(said, markup=False, timeout=8)

    def action_command_palette(self) -> None:
        """The palette lists the browser's commands: over a dialog it offered Textual's own
        (Keys, Maximize) and found no "fork" or "export" (QA). It says so instead."""
        from textual.command import CommandPalette
        from textual.screen import ModalScreen

        if isinstance(self.screen, ModalScreen) and not isinstance(self.screen, CommandPalette):
            self.notify("Close this dialog first (Esc): the palette lists the browser's commands", timeout=4)
            return
        if self.use_command_palette and not any(isinstance(s, CommandPalette) for s in self.screen_stack):
            self.push_screen(TypedPalette(id="--command-palette"))

    def get_system_commands(self, screen: Screen) -> Iterable[SystemCommand]:
        """The browser's actions in the command palette (Ctrl+P), with labels to jump to.
        Of Textual's own, "Keys" is this app's help (Textual's panel did not close with Esc and
        listed keys the tree does not have) and "Screenshot" is left out (it failed where
        ~/Downloads does not exist; QA)."""
        for command in super().get_system_commands(screen):
            if command.title == "Keys":
                yield SystemCommand("Keys", "every key, and what it does here (?)", self.action_help)
            elif command.title == "Quit":  # the one command without its key (QA)
                yield SystemCommand("Quit", "leave sessiontree (q)", command.callback)
            elif command.title != "Screenshot":
                yield command
        if not isinstance(screen, BrowserScreen):
            return
        for flt in Filter:
            yield SystemCommand(
                f"Filter: {flt.value}",
                "show these entries in the tree",
                partial(screen.action_set_filter, flt.value),
            )
        tree = screen.query_one(SessionTreeView)
        export_html: Callable[[], None] = partial(screen.export_here, "html")
        export_md: Callable[[], None] = partial(screen.export_here, "md")
        # The writes as their keys are: off on a read-only session (`check_action` says so).
        writes = [
            ("Move the leaf here", "Pi's rules; nothing is deleted (⏎)", "move"),
            ("Move the leaf here with a branch summary…", "(s)", "move_with_summary"),
            ("Back to the previous leaf", "(b)", "leaf_back"),
            ("Label this entry…", "set or clear a label (m)", "label"),
            ("Rename the session…", "(r)", "rename"),
            ("Archive / unarchive the branch below", "(A)", "archive"),
        ]
        commands: list[tuple[str, str, Callable[[], object]]] = [
            (title, help_text, getattr(screen, f"action_{action}"))
            for title, help_text, action in writes
            if screen.check_action(action, ()) is not False
        ]
        commands += [
            ("Preview: context / as sent / raw JSON", "the next mode (p)", screen.action_preview_mode),
            ("Preview: this entry / the context up to it", "(v)", screen.action_preview_scope),
            ("Preview: expand / collapse long entries", "(e)", screen.action_expand),
            ("Go to the parent entry", "(h)", tree.action_parent),
            ("Go to the next fork", "(])", partial(tree.action_fork, 1)),
            ("Go to the previous fork", "([)", partial(tree.action_fork, -1)),
            ("Fold / unfold below this entry", "(space)", tree.action_fold),
            ("Find / search…", "entries by words (/)", screen.action_search),
            ("Filter by search…", "narrow the tree to matching entries (&)", screen.action_search_filter),
            ("Go to the active leaf", "jump the cursor to the leaf (a)", tree.action_jump_active),
            ("Go to entry id…", "jump the cursor to an entry by its id", screen.action_go_to_id),
            ("Toggle the tokens column", "context size per row (t)", tree.action_toggle_sizes),
            ("Fold / unfold side branches", "every side branch to one row (z)", tree.action_fold_sides),
            ("Navigation history", "every recorded leaf move (H)", screen.action_history),
            ("Open another session…", "the session picker (o)", self.action_open_other),
            ("Pause / resume live follow", "(F)", screen.action_toggle_follow),
            ("Copy…", "entry text, tool call with result, context as sent, id (c)", screen.action_copy),
            ("Fork a new session here…", "root → this entry in a new file (X)", screen.action_fork),
            ("Compare with a marked entry", "mark, move, compare contexts (d)", screen.action_compare),
            (
                "Export as HTML",
                "root → this entry, next to the session file",
                export_html,
            ),
            (
                "Export as Markdown",
                "root → this entry, next to the session file",
                export_md,
            ),
        ]
        if screen.session.format_version < 3:
            commands.append(("Upgrade to v3…", "rewrite this old-format file (U)", screen.action_upgrade))
        for title, help_text, callback in commands:
            yield SystemCommand(title, help_text, callback)
        for target, label in sorted(screen.session.labels().items(), key=lambda kv: kv[1]):
            position = screen.session.tree.pos.get(target)
            if position is not None:
                said = f"At {target}, labelled {label_text(label)}"
                yield SystemCommand(
                    f"Go to label: {label_text(label)}",
                    f"entry {target}",
                    partial(screen.reveal, position, said),
                )

    @on(events.DeliveryFailed)
    def _on_delivery_failed(self, event: events.DeliveryComplete) -> None:  # Textual's annotation
        """Textual's own handler says only "Failed to save screenshot": say why (a missing or
        unwritable directory, a full disk)."""
        if event.name == "screenshot":
            reason = getattr(event, "exception", "unknown reason")
            self.notify(f"Screenshot not saved: {reason}", severity="error", markup=False)

    def _between_keys(self) -> None:
        """Work kept out of the keys' way, one piece per tick while input is quiet: a full
        garbage-collection pass when one is due, else one step of what the browser prepares
        ahead of its keys."""
        if self.collector.tick() or not self.collector.quiet():
            return
        browser = self.browser
        if browser is not None and browser.is_mounted:
            browser.prepare()

    async def on_event(self, event: events.Event) -> None:
        # Keys typed after `q` in the same burst (a paste, a fast typist) arrive while the app
        # closes; a screen they open would mount into a closing app and crash it.
        if self._exit and isinstance(event, events.Key):
            return
        if isinstance(event, (events.Key, events.MouseEvent)):
            self.collector.touched()
        if isinstance(event, (events.Key, events.MouseDown, events.MouseScrollDown, events.MouseScrollUp)):
            self.input_gate.close()  # not on mouse moves: a mouse resting on the app sends many
            self.collector.hold()
            self.call_after_refresh(self._input_handled)
        if isinstance(event, events.Key) and event.key == "ctrl+j" and not self._keymap_takes("ctrl+j"):
            # Enter typed before the app had the terminal (within its first half second) was
            # turned into a line feed by the terminal, not yet in raw mode (ICRNL): Ctrl+J,
            # which nothing took, so Enter was lost there (QA). A line feed is Enter here, as it
            # is to a shell (readline's C-j), unless keys.toml gives Ctrl+J a binding.
            event = events.Key("enter", "\r")
        # (a key bubbling back up from the palette is no new key)
        if isinstance(event, events.Key) and not event.is_forwarded and isinstance(self.screen, TypedPalette):
            if self.screen.keep(event):  # after an Enter, until the palette has closed
                return
            if event.key == "enter":
                self.screen.hold()
        if isinstance(event, events.Key) and await self._tree_key(event):
            return
        await super().on_event(event)

    @on(KeysAfterClosing.CloseDone)
    def _close_done(self, message: KeysAfterClosing.CloseDone) -> None:
        message.box.close_done()

    def _keymap_takes(self, key: str) -> bool:
        """Whether the user's keys.toml binds `key`."""
        return any(key in (k.strip() for k in keys.split(",")) for keys in self._keymap.values())

    async def _tree_key(self, event: events.Key) -> bool:
        """A key for the tree, run here as it arrives: whether a binding took it. Textual runs
        a priority binding (`/`, `m`, `r`, `:`, which must open their box before the keys typed
        next arrive) here, but passes other keys to the tree's own queue, to come back up to
        the app's bindings: `Up m` labelled the entry the cursor was on before the Up (QA), and
        keys typed in the first second on a big file went to a prompt opened over the wrong
        entry. In one queue, keys act in the order typed. A key some widget handles itself
        (`key_escape`) or no binding takes goes Textual's way."""
        focused = self.focused
        if event.is_forwarded or not isinstance(focused, SessionTreeView) or self._exit:
            return False
        node: DOMNode | None = focused
        while node is not None:
            if hasattr(node, f"key_{event.name}"):
                return False
            node = node.parent
        return await self._check_bindings(event.key, priority=True) or await self._check_bindings(event.key)

    def _input_handled(self) -> None:
        """An input's frame is drawn: workers may go on, and garbage collection once Textual's
        writer thread has written the frame (a pass would hold the interpreter lock it needs)."""
        self.input_gate.release()
        if self.input_gate.is_open:
            self.set_timer(RESUME_COLLECTION, self._resume_collection)
            self.set_timer(READ_AHEAD_AFTER, self._read_ahead)

    def _read_ahead(self) -> None:
        """One step of the tree's read-ahead, then the next one soon, until it is done or an
        input comes (whose frame starts it again)."""
        browser = self.browser
        if (
            self.input_gate.is_open
            and time.monotonic() - self.collector.last_input >= READ_AHEAD_AFTER
            and browser is not None
            and browser.is_mounted
            and browser.read_ahead()
        ):
            self.set_timer(READ_AHEAD_GAP, self._read_ahead)

    def _resume_collection(self) -> None:
        if self.input_gate.is_open:  # else the input handled next resumes it
            self.collector.resume(animating=getattr(self, "_realtime_animation_count", 0) > 0)

    def _pick_in_database(self, sessions: list[dict[str, Any]] | None = None) -> None:
        """The sessions of `database` to choose from (`database_picker.py`), listed off the UI
        thread unless given (`o` on a PostgreSQL session froze the app for the connect); with
        no session open behind the list Esc does not leave it (q quits), and a database of one
        session opens it."""
        from .database_picker import DatabasePickerScreen

        database = self.database
        assert database is not None

        def chosen(session_id: str | None) -> None:
            if session_id is None:
                if self.browser is None:
                    self.exit()
                return
            address = str(Address(database.kind, database.location, session_id))
            browser = self.browser
            if browser is not None and session_id == browser.session.session_id:
                if browser.session.locked_out or browser.session.read_only:
                    # as the file picker does: the writer the banner names may have quit (it
                    # went on naming a pid that was gone, and this went back to the stale view)
                    self._reopen_for_writing(lambda: self.address_opener(address)[0], session_id)
                    return
                # opened again it would be read-only, as a second writer is
                self.notify(f"{session_id} is the session open here", markup=False, timeout=4)
                return
            try:
                session, note = self.address_opener(address)
            except SessionError as exc:
                self.notify(str(exc), severity="error", markup=False)
                self._pick_in_database()
                return
            self._show(session, note)

        here = self.session.session_id if self.session is not None else None
        screen = DatabasePickerScreen(
            database.display(),
            sessions,
            current=here,
            can_go_back=self.browser is not None,
            lister=lambda: list_sessions(database),
        )
        self.push_screen(screen, chosen)
        if sessions is None:
            self._list_in_background(database, screen)

    def _list_in_background(self, database: Address, screen: DatabasePickerScreen) -> None:
        """`list_sessions(database)` in a daemon thread (as `_open_in_background`, so that `q`
        never waits for a server that does not answer), handed to `screen` if still shown."""

        def shown() -> bool:
            return screen in self.screen_stack

        def listed(sessions: list[dict[str, Any]]) -> None:
            if not shown():
                return
            if len(sessions) == 1 and self.browser is None:  # nothing to choose between
                screen.dismiss(str(sessions[0]["id"]))
            else:
                screen.listed(sessions)

        def failed(message: str) -> None:
            if not shown():
                return
            if self.browser is None:
                screen.failed(message)  # said on the list, which q leaves (a toast died with the app)
            else:
                self.notify(message, severity="error", markup=False)
                screen.dismiss(None)

        def run() -> None:
            try:
                sessions = list_sessions(database)
            except SessionError as exc:
                self._from_thread(failed, str(exc))
                return
            finally:
                self.still_opening = False
            self._from_thread(listed, sessions)

        # with no session open, quitting meanwhile leaves without waiting (`launch`)
        self.still_opening = self.browser is None
        threading.Thread(target=run, name="sessiontree list", daemon=True).start()

    def action_open_other(self) -> None:
        if self.only_session:  # said, not a key that does nothing
            self.notify("This page shows one session: it opens no other", markup=False, timeout=4)
            return
        browser = self.browser
        # leaving closes the session: the keys waiting for the file check are written first
        opening = "Opening the list of sessions"
        if (
            browser is not None
            and browser.writes_waiting
            and browser.after_writes(self.action_open_other, opening, "o")
        ):
            return
        if self.database is not None and self.picker_dir is None:
            self._pick_in_database()  # the sessions beside it, not files
            return
        directory = self.picker_dir
        session = self.session
        if directory is None and session is not None and session.storage.location:
            directory = Path(session.storage.location).parent
        self._pick(directory or Path.cwd(), can_go_back=True)

    async def action_quit(self) -> None:
        """Quit, but not at once over a branch summary the user wrote in the move dialog: a
        first Ctrl+Q says it would be lost (as Esc there does), a second quits."""
        screen = self.screen
        if isinstance(screen, SummaryPrompt) and screen.asks_before_losing("Ctrl+Q again quits without it"):
            return
        browser = self.browser
        if (
            browser is not None
            and browser.writes_waiting
            and browser.after_writes(self.exit, "Quitting", "q")
        ):
            return
        self.leave()

    def leave(self) -> None:
        """Exit now; write keys waiting for the file check are not written (`unwritten`)."""
        if self.browser is not None:
            self.unwritten = self.browser.waiting_writes()
        self.exit()

    def action_help(self) -> None:
        from .help import HelpScreen

        if isinstance(self.screen, HelpScreen):
            return
        self.clear_notifications()  # the key bindings' toast covered it; help says them (QA)
        self.push_screen(HelpScreen.for_screen(self.screen, self.key_problems))
