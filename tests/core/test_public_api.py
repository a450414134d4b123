"""The package's public names: each one `__all__` lists loads, and `dir()` (what `help()` and
completion read) shows them although they load lazily."""

from __future__ import annotations

import subprocess
import sys

import sessiontree


def test_every_public_name_loads_and_is_listed():
    listed = set(dir(sessiontree))
    for name in sessiontree.__all__:
        assert name in listed, name
        assert getattr(sessiontree, name) is not None
    # the types public methods return are importable by name (a caller annotating them)
    assert {"LeafMove", "ContextStream", "Address", "list_sessions", "upgrade_session"} <= set(
        sessiontree.__all__
    )


def test_an_entry_is_narrowed_by_the_types_the_package_exports():
    """`get_entries()` gives `Entry`s; the subclasses to narrow one by were in
    `sessiontree.model.entries` alone, and `e.type == "message"` does not narrow (QA)."""
    from sessiontree import Entry, LabelEntry, MemoryStorage, MessageEntry, Session

    with Session(MemoryStorage(cwd="/p")) as s:
        first = s.append_message({"role": "user", "content": "hi"})
        s.append_label(first, "start")
        entries: list[Entry] = s.get_entries()
    assert [type(e) for e in entries] == [MessageEntry, LabelEntry]
    assert isinstance(entries[0], MessageEntry) and entries[0].message["content"] == "hi"


def test_help_shows_the_api_without_loading_the_app():
    code = (
        "import pydoc, sys, sessiontree; text = pydoc.render_doc(sessiontree);"
        "print('open_session' in text, 'Session' in dir(sessiontree), 'textual' in sys.modules)"
    )
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, check=True).stdout
    assert out.split() == ["True", "True", "False"]
