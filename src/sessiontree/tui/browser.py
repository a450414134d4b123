"""The browser screen for one session: the tree of the whole append log on the left, what the
model would see on the right, the search box and the footer.

Its bindings live on this screen, not on the app, so that a screen pushed over it (the picker, a
dialog) never passes keys to a session the user cannot see.
"""

from __future__ import annotations

import gc
from collections.abc import Mapping

from textual import events, on, work
from textual.app import ComposeResult
from textual.binding import Binding, BindingsMap
from textual.containers import Horizontal, Vertical
from textual.css.query import NoMatches
from textual.widgets import Footer, Static

from ..archive import set_archived
from ..display import counted
from ..model.errors import SessionError
from ..outline import Filter
from ..session import Session
from . import deliver
from .branching import BranchingMixin
from .follow import FollowMixin
from .header import SessionHeader
from .keymap import TYPING_KEYS
from .modals import ConfirmScreen, TextPrompt
from .moves import MovesMixin
from .notices import StatusLine, confirm, withdraw
from .preview import COLLAPSED, EXPANDED, PreviewView, Scope
from .preview_pane import PreviewPane
from .search import SearchMixin
from .search_box import SearchBox
from .tree_view import SessionTreeView, nothing_shown

PALETTE_IN_FOOTER_MIN = 90  # columns from which the footer also shows `^p palette`

# Each hint in the wordings the status line picks from, longest first (`StatusLine`), with
# the keys in effect put in (`BrowserScreen._hint`): a remapped key was named by its default.
STATUS_HINT = (
    "{move} moves the leaf here (nothing is deleted) · {back} moves it back · {help} every key",
    "{move} moves the leaf here · {back} moves it back · {help} every key",
    "{move} moves the leaf · {back} back · {help} keys",
)
READ_ONLY_HINT = (
    "Read-only: browse, find ({search}) and preview; {help} lists the keys in effect",
    "Read-only: browse, find ({search}), preview; {help} keys",
    "Read-only · {help} keys",
)
HINT_KEYS = {"move": "enter", "back": "b", "help": "question_mark", "search": "slash"}  # binding id → default

WRITES = {"move", "move_with_summary", "leaf_back", "label", "rename", "archive"}
# What the status line says while the preview has the keys (Tab); within 78 columns
PREVIEW_FOCUSED = "Keys scroll the preview (↑↓ PgUp PgDn Home End) · Tab: back to the tree"


def _filter_bindings() -> list[Binding]:
    """`f` cycles the filter and `1`-`5` choose one directly, as Pi's /tree does. The header
    names a filter other than the default; the footer's label stays put, as changing it makes
    Textual's Footer rebuild all its keys (about half the time from the key to its frame)."""
    names = ", ".join(flt.value for flt in Filter)
    cycle = Binding("f", "cycle_filter", "Filter", tooltip=f"cycle the filter: {names}", id="filter")
    direct = [
        Binding(str(n), f"set_filter('{flt.value}')", f"filter: {flt.value}", show=False, id=f"filter-{n}")
        for n, flt in enumerate(Filter, 1)
    ]
    return [cycle, *direct]


class BrowserScreen(MovesMixin, SearchMixin, FollowMixin, BranchingMixin):
    HELP_TITLE = "Session"
    # What the tree's marks mean, under the keys in help: a newcomer had to guess that the bar
    # is the path the model is sent (QA).
    HELP_LEGEND = [
        ("▌", "on the active path: the entries the model is sent at the leaf"),
        ("├─ │", "a side branch (a retry, a branch left behind), one step in at its fork"),
        ("› ‹", "a user message; an assistant's answer"),
        ("↳", "a tool's result, shown as the call that made it ([read: a.py]); ✗ failed"),
        ("$", "a shell command the user ran (!cmd)"),
        ("▤ ↩", "a compaction's summary; a summary of a branch left behind"),
        ("◆ ◇", "an extension's message; an extension's entry (filter 5)"),
        ("⚑ ✎ ⇢", "a label, a session name, a leaf move (filter 5)"),
        ("◐ ◎ ≡", "thinking level, model, tools changed (filter 5)"),
        ("[text]", "the entry's label"),
        ("← active", 'the leaf: where the conversation is; "below": inside a fold or hidden'),
        ("← was active", "where the leaf was before the last move"),
        ("▸ 12 entries", "a fold (space opens it), and how long ago its last entry was"),
        ("⤷12", "twelve levels in: only the innermost guides are drawn"),
        ("3.2k +12", "with t: the context's tokens if the leaf were here, and what the entry adds"),
    ]
    # The footer lists the focused widget's bindings, then the screen's, then the app's: help
    # and quit come first here so that they are the last to be cut at narrow widths.
    BINDINGS = [
        Binding("question_mark", "app.help", "Help", id="help"),
        Binding("q", "app.quit", "Quit", id="quit"),
        Binding("enter", "move", "Move", tooltip="move the leaf here (Pi's rules)", id="move"),
        Binding(
            "s", "move_with_summary", "Move+summary", tooltip="move, with a branch summary", id="move-summary"
        ),
        *_filter_bindings(),
        # Run as Textual dispatches the key, not when the tree gets to it: the keys typed right
        # after (a fast typist, a paste) then go to the search box the action focuses, not to
        # the tree as commands (`SearchMixin._open_search`).
        Binding(
            "slash",
            "search",
            "Find",
            tooltip='find: words (all of them), "a phrase", re:regex; matches in folds are counted',
            id="search",
            priority=True,
        ),
        Binding(
            "ampersand",
            "search_filter",
            "Filter by search",
            show=False,
            tooltip="show only the entries matching words: the last find's are filled in, Enter"
            " applies them (Esc restores)",
            id="search-filter",
            priority=True,
        ),
        Binding("n", "next_match(1)", "Next match", show=False, id="next-match"),
        Binding("N", "next_match(-1)", "Previous match", show=False, id="previous-match"),
        Binding("b", "leaf_back", "Back", tooltip="back to the previous leaf", id="back"),
        # With priority as `/`, and for the same reason: the keys typed right after go to the
        # prompt these open (a burst of "r", a name and Enter cleared the session's name).
        Binding("m", "label", "Label", tooltip="set or clear a label", id="label", priority=True),
        Binding(
            "r", "rename", "Rename", show=False, tooltip="rename the session", id="rename", priority=True
        ),
        Binding("H", "history", "History", show=False, tooltip="navigation history", id="history"),
        # With priority as `/`: the id typed right after goes to the prompt (it went to the
        # tree as keys, and an Enter among them moved the leaf: QA).
        Binding(
            "colon",
            "go_to_id",
            "Go to id",
            show=False,
            tooltip="go to an entry by its id",
            id="go-to",
            priority=True,
        ),
        Binding("p", "preview_mode", "Preview", tooltip="context / as sent / raw JSON", id="preview-mode"),
        Binding("e", "expand", "Expand", show=False, tooltip="expand long entries", id="expand"),
        Binding("v", "preview_scope", "Entry", show=False, tooltip="this entry / the context", id="scope"),
        Binding("o", "open_other", "Open", show=False, tooltip="open another session", id="open"),
        Binding(
            "F", "toggle_follow", "Follow", show=False, tooltip="pause / resume live follow", id="follow"
        ),
        Binding("U", "upgrade", "Upgrade", tooltip="upgrade this old-format file to v3", id="upgrade"),
        Binding(
            "c", "copy", "Copy", show=False, tooltip="copy: text, tool call + result, context, id", id="copy"
        ),
        Binding("X", "fork", "Fork", show=False, tooltip="fork a new session file at the entry", id="fork"),
        Binding(
            "A",
            "archive",
            "Archive",
            show=False,
            tooltip="archive / unarchive the branch below",
            id="archive",
        ),
        Binding("d", "compare", "Compare", show=False, tooltip="mark / compare two contexts", id="compare"),
    ]

    def __init__(
        self, session: Session, *, summarizer: str | None = None, follow: bool = True, note: str | None = None
    ) -> None:
        super().__init__(session)
        self.summarizer = summarizer
        self.follow = follow
        self._note = note
        self._damage_told = False
        self._reason_at_open = session.read_only_reason  # the banner says it; no toast for it

    def compose(self) -> ComposeResult:
        yield SessionHeader(icon="├")
        yield Static("", id="banner", markup=False)
        with Horizontal(id="main"):
            yield SessionTreeView(self.session, id="tree")
            yield PreviewPane(self.session, id="side")
        yield StatusLine(self._hint(READ_ONLY_HINT if self.session.read_only else STATUS_HINT), id="status")
        with Vertical(id="search-bar"):
            # `/` selects the last query itself, at once (`SearchMixin._open_search`).
            yield SearchBox(id="search", select_on_focus=False)
            yield Static("", id="search-status")
        yield Footer(compact=True)

    def _hint(self, wordings: tuple[str, ...]) -> tuple[str, ...]:
        """`wordings` with the keys in effect (`keys.toml`): the first of a binding's keys, Enter
        spelt out but in the shortest wording."""
        keymap: Mapping[str, str] = self.app._keymap or {}

        def key(binding_id: str, short: bool) -> str:
            keys = keymap.get(binding_id, "")
            first = keys.split(",")[0].strip() or HINT_KEYS[binding_id]
            if first == "enter" and not short:
                return "Enter"
            return self.app.get_key_display(Binding(first, ""))

        last = len(wordings) - 1
        return tuple(
            w.format(**{binding_id: key(binding_id, k == last) for binding_id in HINT_KEYS})
            for k, w in enumerate(wordings)
        )

    def on_mount(self) -> None:
        try:
            search = self.query_one(SearchBox)
        except NoMatches:  # the app quit while this screen was being mounted: its children went
            return
        search.display = False
        self.query_one("#search-status", Static).display = False
        session = self.session
        self._update_header()
        tree = self._tree()
        tree.focus()
        tree.rebuild(keep=session.tree.leaf if session.tree.leaf >= 0 else 0)
        # Everything alive now (the widget tree, the session index) lives as long as the screen:
        # take it out of the garbage collector's full passes, which otherwise walk it every time
        # and stall scrolling for 50-200 ms on big sessions (measured in bench/run.py).
        gc.freeze()
        self.checking = True
        self.call_after_refresh(self._verify)  # after the first paint: it competes for the GIL
        if self._note and self._note != self._reason_at_open:  # the banner says the reason
            confirm(self, self._note, timeout=8)
        self._warn_of_a_torn_tail()
        self._start_following()

    def _warn_of_a_torn_tail(self) -> None:
        """An incomplete last line (a write cut short) is left out, and the first write sets it
        aside in a `.torn` file and blanks it: said at open, before any key writes."""
        session = self.session
        torn = next((d for d in session.diagnostics if d.code == "torn_tail"), None)
        if torn is not None and not session.read_only:
            self.notify(
                torn.message, title="Incomplete last line", severity="warning", markup=False, timeout=15
            )

    def prepare(self) -> bool:
        """One step of what is built ahead of the keys that need it (see `SessionTreeView.prepare`);
        False when there is nothing left, or no tree: the app's timer may tick while this
        screen's widgets are still being mounted or already torn down (at exit)."""
        try:
            tree = self._tree()
        except NoMatches:
            return False
        return tree.prepare()

    def read_ahead(self) -> bool:
        """One step of the tree's read-ahead (`SessionTreeView.read_ahead`); False when it is
        done, or there is no tree."""
        try:
            tree = self._tree()
        except NoMatches:
            return False
        return tree.read_ahead()

    def on_resize(self, event: events.Resize) -> None:
        self._update_header()  # the session's name is cut to the width
        # The palette's label docks at the footer's right end: on a narrow terminal it would
        # cover the last keys' labels. Help lists the palette either way.
        footer = self.query_one(Footer)
        show = event.size.width >= PALETTE_IN_FOOTER_MIN
        if footer.show_command_palette != show:
            footer.show_command_palette = show
            footer.refresh(recompose=True)  # the reactive alone waits for the keys to change

    # A dialog over this screen has a keys line of its own: the footer's keys, dimmed under it,
    # read as keys that work there. Hidden, not removed, so nothing behind the dialog moves.
    def on_screen_suspend(self) -> None:
        self.query_one(Footer).visible = False

    def on_screen_resume(self) -> None:
        self.query_one(Footer).visible = True

    def on_unmount(self) -> None:
        self.workers.cancel_node(self)
        self.session.close()

    @work(thread=True, exclusive=True, group="verify")
    def _verify(self) -> None:
        """The checks left for after the first paint (the UTF-8 of message text)."""
        try:
            self.session.finish_verification(elsewhere=True)
        finally:  # write keys pressed meanwhile run then (`_write_when_checked`), or say why not
            deliver(self.app, self._damage_found)
            deliver(self.app, self._checked)

    @on(SessionTreeView.Damaged)
    def _damage_found(self) -> None:
        """Damage can surface after the first paint (the deferred UTF-8 check, an entry that
        fails to decode): show the read-only banner as soon as it does, and say it once."""
        if not self.is_attached:
            return
        self._update_header()
        session = self.session
        if session.read_only:  # the write keys are off now: so is the hint for them
            # only then: the footer laid out again takes ~40 ms at 160×50, after every check
            self.refresh_bindings()
            for line in self.query(StatusLine):
                line.hint(self._hint(READ_ONLY_HINT))
        if session.read_only and not self._damage_told and session.read_only_reason != self._reason_at_open:
            self._damage_told = True
            self.notify(session.read_only_reason or "", title="Read-only", severity="warning", markup=False)

    # --- preview ------------------------------------------------------------------------------

    @on(SessionTreeView.Relaid)
    def _relaid(self) -> None:
        # `z` unfolding the only match left "matches hidden"; `:` switching to "all" left
        # "filter user-only" (QA)
        self._update_header()
        tree, pane = self._tree(), self.query_one(PreviewPane)
        target = tree.current_target()
        if target is None:
            if len(self.session.tree):  # (an empty session previews nothing anyway)
                pane.show_none("no row shown")  # the tree says why
        elif pane.target is None:  # the cursor is back on the entry it left: no Highlighted
            pane.show(target)

    @on(SessionTreeView.Highlighted)
    def _highlighted(self, event: SessionTreeView.Highlighted) -> None:
        self.query_one(PreviewPane).show(event.target, followed=event.followed)
        if self._new_entries and self._tree().at_leaf():
            self._new_entries = 0  # caught up with what arrived
            self._update_header()
        elif self._matches:  # "match 2/5" follows the cursor
            self._update_header()

    # Each says what it did on the status line, which otherwise went on saying what the key
    # before did (the line promises the last key's effect).
    def action_preview_mode(self) -> None:
        pane = self.query_one(PreviewPane)
        pane.mode = pane.mode.next()
        confirm(self, f"Preview: {pane.mode.value} (p for the next)")

    def action_preview_scope(self) -> None:
        pane = self.query_one(PreviewPane)
        pane.action_toggle_scope()
        what = "this entry alone, whole" if pane.scope is Scope.ENTRY else "the context up to this entry"
        confirm(self, f"Preview: {what} (v switches)")

    def action_expand(self) -> None:
        pane = self.query_one(PreviewPane)
        pane.expanded = not pane.expanded
        if pane.expanded:
            confirm(
                self, f"Expanded: the newest {EXPANDED.entries:,} context entries, whole (e cuts them again)"
            )
        else:
            confirm(
                self, f"Long entries cut to a few lines, the newest {COLLAPSED.entries:,} shown (e expands)"
            )

    # --- bindings state -----------------------------------------------------------------------

    def check_action(self, action: str, parameters: tuple[object, ...]) -> bool | None:
        if action in WRITES and self.session.read_only:
            return False  # hidden: the banner says why the session is read-only
        if action == "upgrade":  # hidden too where it cannot be done: the banner says why
            session = self.session
            return (
                session.format_version < 3 and session.location is not None and self.upgrade_blocked() is None
            )
        # typed into the search box, keys are characters (the footer shows its keys); with
        # priority (`/`, `m`), they acted there
        return not isinstance(self.focused, SearchBox) or not self._taken_by_box(action)

    def _taken_by_box(self, action: str) -> bool:
        """Every key of `action` is one the search box takes: a character or one of its own keys.
        Textual drops the characters from the chain before it applies keys.toml, and misses
        some (`slash`): with `move = "enter,l"` the footer listed `l Move` there (`l` types)."""
        box = self.query_one(SearchBox)
        keys = self._keyed_bindings().key_to_bindings.items()
        mine = [key for key, bindings in keys if any(b.action == action for b in bindings)]
        return bool(mine) and all(key in TYPING_KEYS or key in box._bindings.key_to_bindings for key in mine)

    def _keyed_bindings(self) -> BindingsMap:
        """The screen's bindings with the user's keys.toml applied, as Textual dispatches them."""
        bindings = self._bindings.copy()
        if self.app._keymap:
            bindings.apply_keymap(self.app._keymap)
        return bindings

    def on_descendant_focus(self, event: events.DescendantFocus) -> None:
        """Tab moved the keys to the preview with no cue but a dimmer cursor bar: the arrows
        then scrolled the preview and the tree seemed stuck (QA). Said on the status line, and
        the preview's edge and title light up (`app.tcss`, `#side:focus-within`)."""
        if isinstance(event.widget, PreviewView):
            confirm(self, PREVIEW_FOCUSED)
        elif isinstance(event.widget, SessionTreeView):
            withdraw(self, PREVIEW_FOCUSED)

    def on_key(self, event: events.Key) -> None:
        """A key whose binding is hidden (a write in a read-only session, `U` on a file in the
        current format): say why nothing happens instead of ignoring the key."""
        if not isinstance(self.focused, SessionTreeView):
            return
        bindings = self._keyed_bindings()
        actions = [b for b in bindings.key_to_bindings.get(event.key, []) if b.action in WRITES | {"upgrade"}]
        if not actions or self.check_action(actions[0].action, ()) is not False:
            return
        event.stop()
        if actions[0].action == "upgrade":
            blocked = self.upgrade_blocked() if self.session.format_version < 3 else None
            said = (
                f"Not upgraded: {blocked}"
                if blocked
                else "This file is in the current format (v3): there is nothing to upgrade"
            )
            confirm(self, said)
            return
        # One line: the banner above the tree says why (four rows of a toast at 80x24 did).
        what = actions[0].description or event.key
        confirm(self, f"Read-only: {what} would write; it is off (the banner says why)")

    def action_cycle_filter(self) -> None:
        self.action_set_filter(self._tree().filter.next().value)

    def action_set_filter(self, value: str) -> None:
        tree = self._tree()
        if tree.filter is Filter(value) and len(tree.outline):  # nothing to lay out again
            confirm(self, f"Filter: {value} already · {counted(len(tree.outline), 'row', 'rows')} shown")
            return
        tree.filter = Filter(value)
        self._refilter_matches()
        tree.rebuild()
        self._update_header()
        if not len(tree.outline):
            confirm(self, nothing_shown(tree.filter))
        else:  # the header names the filter too, but not what it left
            confirm(self, f"Filter: {value} · {counted(len(tree.outline), 'row', 'rows')} shown")

    def action_open_other(self) -> None:
        self.app.action_open_other()  # type: ignore[attr-defined]

    def action_archive(self) -> None:
        """Archive the branch below the cursor (it becomes one stub row except under "all"), or
        unarchive it; the log only grows: a `custom` record is appended either way."""
        target = self._target()
        if target is None or not self._writable():
            return
        on = target.position not in self._tree().archived

        def write() -> None:
            if not self._guard(lambda: set_archived(self.session, target.entry_id, on)):
                return
            what = "Archived" if on else "Unarchived"
            self._after_write(keep=target.position, message=f"{what} the branch below {target.entry_id}")

        self._write_when_checked(write, "Archive" if on else "Unarchive")

    def action_go_to_id(self) -> None:
        """Jump the cursor to an entry by (a prefix of) its id, switching to the "all" filter
        when the current one hides it."""
        session = self.session

        resolved: dict[str, str] = {}  # what `check` found, for `done`: a prefix scans every id

        def check(value: str) -> str | None:
            """An id that names no entry, or several, keeps the prompt open to be corrected."""
            if not value.strip():
                return None
            try:
                resolved[value] = session.resolve_id(value.strip())  # as the command line takes ids
            except SessionError as exc:
                return exc.detail
            return None

        def done(value: str | None) -> None:
            if value is None or not value.strip():
                return
            entry_id = resolved[value]  # Enter passed `check` with this very value
            self.reveal(session.tree.pos[entry_id], f"At {entry_id}")

        self.app.push_screen(
            TextPrompt("Go to entry id (or a unique prefix)", enter="goes there", check=check), done
        )

    def action_upgrade(self) -> None:
        """Rewrite an old-format (v1/v2) file as v3 — after a yes — and reopen it."""
        session = self.session
        location = session.location
        if session.format_version >= 3 or location is None:
            return
        blocked = self.upgrade_blocked()
        if blocked is not None:
            self.app.bell()
            confirm(self, f"Not upgraded: {blocked}")
            return

        def answered(yes: bool | None) -> None:
            if yes:
                self.app.upgrade_and_reopen(location)  # type: ignore[attr-defined]

        self.app.push_screen(
            ConfirmScreen(
                f"Upgrade {location} to the current format (v3)?",
                "The file is rewritten atomically and the original kept next to it as .bak;"
                " Pi reads both formats. The session then reopens, writable.",
                yes="Upgrade",
            ),
            answered,
        )
