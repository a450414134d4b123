"""Session text must never be parsed as Textual markup. Widgets (`Label`, `Static`, buttons,
options) and `notify` parse their string arguments as markup unless told otherwise; this test
reads the browser's source and fails when a call passes them anything but a literal string, a
`Text` (or `plain(...)`) object, or `markup=False`. A new f-string into a widget is caught here
before a message like "see [/tmp/build]" can crash the app or `[@click=app.quit]` can act."""

from __future__ import annotations

import ast
from pathlib import Path

import sessiontree.tui

TUI = Path(sessiontree.tui.__file__).parent
MARKUP_TAKERS = {"Label", "Static", "Button", "RadioButton", "Option", "Checkbox", "Link"}
MARKUP_METHODS = {"notify", "update"}
# `format_title`: Textual's App.format_title builds `Content(title)`, which parses no markup
SAFE_WRAPPERS = {"Text", "plain", "Table", "Syntax", "Markdown", "format_title"}


def _name(node: ast.expr) -> str:
    if isinstance(node, ast.Name):
        return node.id
    if isinstance(node, ast.Attribute):
        return node.attr
    return ""


def _unsafe_calls(source: str) -> list[tuple[int, str]]:
    found = []
    for node in ast.walk(ast.parse(source)):
        if not isinstance(node, ast.Call) or not node.args:
            continue
        name = _name(node.func)
        if name not in MARKUP_TAKERS and name not in MARKUP_METHODS:
            continue
        if name == "update" and not (
            isinstance(node.func, ast.Attribute) and "query" in ast.unparse(node.func)
        ):
            continue  # `.update` of sets, dicts and caches; widget updates go through query_one(...)
        if any(
            k.arg == "markup" and isinstance(k.value, ast.Constant) and k.value.value is False
            for k in node.keywords
        ):
            continue
        first = node.args[0]
        if isinstance(first, ast.Constant):
            continue  # our own literal text
        if isinstance(first, ast.Call) and _name(first.func) in SAFE_WRAPPERS:
            continue
        found.append((node.lineno, ast.unparse(node)[:100]))
    return found


def test_no_widget_or_notification_parses_data_as_markup():
    problems = []
    for path in sorted(TUI.glob("*.py")):
        for line, call in _unsafe_calls(path.read_text(encoding="utf-8")):
            problems.append(f"{path.name}:{line}: {call}")
    assert not problems, "markup built from data:\n" + "\n".join(problems)


def test_the_check_catches_an_f_string_into_a_widget():
    assert _unsafe_calls('Label(f"Move to {entry_id}")')
    assert _unsafe_calls('self.notify(f"{exc}")')
    assert _unsafe_calls('self.query_one("#s", Static).update(f"Draft failed: {message}")')
    assert not _unsafe_calls('Label(plain(f"Move to {entry_id}"))')
    assert not _unsafe_calls('self.notify(f"{exc}", markup=False)')
