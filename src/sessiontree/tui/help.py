"""`?`: the keys in effect on the screen below, read from its live bindings (so a remapped key
shows as remapped), laid out by Rich for whatever width the dialog gets, and scrollable."""

from __future__ import annotations

from collections.abc import Sequence

from rich.table import Table
from rich.text import Text
from textual.actions import parse
from textual.app import ComposeResult
from textual.binding import Binding
from textual.containers import Vertical, VerticalScroll
from textual.dom import DOMNode
from textual.screen import ModalScreen, Screen
from textual.widget import Widget
from textual.widgets import Label, Static

Section = tuple[str, list[tuple[str, str]]]
SIDEWAYS = {"scroll_left", "scroll_right", "page_left", "page_right"}  # horizontal scrolling
# Keys every Textual screen inherits, said for this app: listed first under the screen's own
# keys, "Focus Next" and "Copy selected text" were the first thing a newcomer read in help.
GENERIC = {
    "app.focus_next": "Focus the next pane or field",  # (the browser: the tree, the preview)
    "app.focus_previous": "Focus the previous pane",
    "screen.copy_text": "Copy the text selected with the mouse",
}


def _disabled(node: DOMNode, action: str) -> bool:
    """The node (or the app or screen the action names) says the action is off now: the
    picker's Esc clears a search, goes back or quits, one at a time; writes are off while a
    session is read-only. The footer leaves such bindings out; so does help."""
    namespace, name, parameters = parse(action)
    target = {"app": node.app, "screen": node.screen}.get(namespace, node)
    return target.check_action(name, parameters) is False


def binding_rows(node: DOMNode, generic: list[tuple[str, str]] | None = None) -> list[tuple[str, str]]:
    """(keys, what they do) for the bindings of one node in effect now, keys of the same action
    merged; with `generic`, the `GENERIC` ones go there instead, said as `GENERIC` says."""
    rows: dict[str, list[str]] = {}
    generic_rows: dict[str, list[str]] = {}
    app = node.app
    bindings_map = node._bindings.copy()
    if app._keymap:  # remapped keys, as the screen's binding chain applies them
        bindings_map.apply_keymap(app._keymap)
    sideways = isinstance(node, Widget) and not node.allow_horizontal_scroll
    for bindings in bindings_map.key_to_bindings.values():
        for binding in bindings:
            what = binding.tooltip or binding.description
            if not what:  # Textual's own undescribed keys (ctrl+c's "help_quit" notice)
                continue
            if sideways and binding.action in SIDEWAYS:  # inherited, and nothing to scroll
                continue
            if _disabled(node, binding.action):
                continue
            what = what[:1].upper() + what[1:]
            key = app.get_key_display(binding)
            if generic is not None and binding.action in GENERIC:
                what = GENERIC[binding.action]
                keys = generic_rows.setdefault(what, [])
            else:
                keys = rows.setdefault(what, [])
            if key not in keys:
                keys.append(key)
    if generic is not None:
        generic += [(" ".join(keys), what) for what, keys in generic_rows.items()]
    return [(" ".join(keys), what) for what, keys in rows.items()]


def sections_for(screen: Screen) -> list[Section]:
    """The help sections of a screen: its own keys, then those of its widgets that have any."""
    sections: list[Section] = []
    generic: list[tuple[str, str]] = []
    own = binding_rows(screen, generic)
    if own:
        sections.append((getattr(screen, "HELP_TITLE", "This screen"), own))
    seen: set[type] = set()
    for widget in screen.query("*"):
        kind = type(widget)
        if kind in seen or not kind.__dict__.get("BINDINGS") or not getattr(kind, "HELP_TITLE", None):
            continue
        seen.add(kind)
        sections.append((kind.HELP_TITLE, binding_rows(widget)))  # type: ignore[attr-defined]
    everywhere = binding_rows(screen.app) + generic
    app = screen.app
    if app.ENABLE_COMMAND_PALETTE:  # bound by Textual outside BINDINGS, or in them too
        key = app.get_key_display(Binding(app.COMMAND_PALETTE_BINDING, "command_palette"))
        everywhere = [row for row in everywhere if row[0] != key]
        everywhere.append((key, "Command palette: every action by name, and Theme (light ones too)"))
    # The app's keys the screen lists already (? and q in the browser's first section)
    listed = {keys for _, rows in sections for keys, _ in rows}
    sections.append(("Everywhere", [row for row in everywhere if row[0] not in listed]))
    legend = getattr(screen, "HELP_LEGEND", None)
    if legend:
        sections.append(
            ("What the rows show", [(mark, what[:1].upper() + what[1:]) for mark, what in legend])
        )
    return sections


class HelpScreen(ModalScreen[None]):
    BINDINGS = [Binding("escape,q,question_mark", "close", "Close")]

    def __init__(self, sections: list[Section], notes: str = "", problems: Sequence[str] = ()) -> None:
        super().__init__()
        self.sections = sections
        self.notes = notes
        self.problems = problems  # what keys.toml asked that was left out (`SessionTreeApp.key_problems`)

    @classmethod
    def for_screen(cls, screen: Screen, problems: Sequence[str] = ()) -> HelpScreen:
        return cls(sections_for(screen), getattr(screen, "HELP_NOTES", ""), problems)

    def compose(self) -> ComposeResult:
        with Vertical(classes="dialog wide-dialog", id="help-dialog"):
            yield Static("Keys in effect (Esc closes; ↑ ↓ PgUp PgDn scroll)", classes="dialog-title")  # wraps
            with VerticalScroll(id="help-body"):
                # Said here too: their toast, up for seconds after the start, covered help's
                # right half, where a reader goes to see which keys are in effect (QA).
                if self.problems:
                    yield Label(Text("Left out of keys.toml", style="bold underline"), classes="help-section")
                    said = "\n".join(f"• {problem}" for problem in self.problems)
                    yield Static(Text(said), classes="dialog-help", markup=False)
                for title, rows in self.sections:
                    table = Table.grid(padding=(0, 2), expand=True)
                    table.add_column(style="bold", no_wrap=True, min_width=8)
                    table.add_column(ratio=1)
                    for keys, what in rows:
                        table.add_row(Text(keys), Text(what))
                    yield Label(Text(title, style="bold underline"), classes="help-section")
                    yield Static(table, classes="help-table", markup=False)
                if self.notes:
                    yield Static(Text(self.notes), classes="dialog-help")

    def on_mount(self) -> None:
        self.query_one("#help-body").focus()

    def action_close(self) -> None:
        self.dismiss(None)
