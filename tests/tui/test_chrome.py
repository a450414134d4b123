"""The app's chrome: footer and help at small sizes, resize, follow counter, upgrade, palette."""

from __future__ import annotations

import itertools
import json
import os
import shutil
import subprocess
import sys
from pathlib import Path

import pytest
from rich.cells import cell_len
from textual._compositor import Compositor
from textual.color import Color
from textual.widgets import Footer, Input
from textual.widgets._header import HeaderTitle

from harness.pilot import cursor_id, make_app, screen_lines, settle, status, until
from helpers import PI_FIXTURES, A, U
from sessiontree import create_session, open_session
from sessiontree.outline import Filter
from sessiontree.tui.app import SessionTreeApp
from sessiontree.tui.help import HelpScreen
from sessiontree.tui.launch import build_app, launch
from sessiontree.tui.tree_view import SessionTreeView

pytestmark = pytest.mark.usefixtures("utc")


def footer_keys(app) -> list[str]:
    return [
        key for key, active in app.screen.active_bindings.items() if active.binding.show and active.enabled
    ]


@pytest.mark.parametrize(
    ("width", "started"),
    [(80, 80), (160, 160), (80, 160), (160, 80)],  # started at another width: a resize
)
async def test_help_and_quit_lead_the_footer_and_no_label_covers_another(demo, width, started):
    app = make_app(demo)
    async with app.run_test(size=(started, 24)) as pilot:
        await settle(app, pilot)
        if started != width:
            await pilot.resize_terminal(width, 24)
            await settle(app, pilot)
        footer = app.screen.query_one("Footer")
        labels = list(footer.query("FooterKey"))
        assert [w.key for w in labels[:2]] == ["question_mark", "q"]
        # the palette's label docks at the right end: at 80 columns it covered "Preview"
        assert any(w.key == "ctrl+p" for w in labels) == (width >= 90)
        spans = sorted((w.region.x, w.region.right) for w in labels)
        assert all(x >= 0 and right <= width for x, right in spans)
        assert all(a_right <= b_x for (_, a_right), (b_x, _) in itertools.pairwise(spans))


async def test_the_header_shows_the_leaf_and_the_size_at_80_columns(demo):
    app = make_app(demo)
    async with app.run_test(size=(80, 24)) as pilot:
        await settle(app, pilot)
        top = screen_lines(app)[0]
        assert "Fix flaky date parsing in weather-cli — leaf 3a7c55c4 · 46 entries" in top
        # The preview's title drops its hint for `v` rather than cut it.
        title = str(app.browser.query_one("#preview-title").render())
        assert title == "context · up to 3a7c55c4"
        await pilot.press("p", "e")  # a longer mode's name, and "expanded": too long for the pane
        await settle(app, pilot)
        title = str(app.browser.query_one("#preview-title").render())
        assert title.startswith("as sent to the model · up to 3a7c55c4 · expanded")
        shown = screen_lines(app)[1].rstrip()
        assert shown.endswith("…") and shown.split("▊")[-1].strip()[:-1] in title  # cut, and says so
        await pilot.press("p", "p", "e")
        await pilot.resize_terminal(160, 50)
        await settle(app, pilot)
        title = str(app.browser.query_one("#preview-title").render())
        assert title == "context · up to 3a7c55c4 · v: entry"
        # from the left, right after the icon: centred, it moved as its length changed
        assert screen_lines(app)[0].startswith(" ├ Fix flaky date parsing in weather-cli — leaf")


async def test_a_long_session_name_is_cut_to_leave_the_leaf_in_the_header(demo):
    """After `r` gave a long name, the header at 80 columns showed the name and nothing else:
    the name is cut to leave room for the leaf and the size, and given more room when wider."""
    app = make_app(demo)
    async with app.run_test(size=(80, 24)) as pilot:
        await settle(app, pilot)
        name = "A much longer name for this session, given with r to tell it apart from the others"
        await pilot.press("r", "ctrl+a", "ctrl+k", *name, "enter")
        await settle(app, pilot)
        assert app.session.session_name == name
        top, leaf = screen_lines(app)[0], app.session.leaf_id  # the name's entry is the leaf now
        assert f"… — leaf {leaf} · 47 entries" in top and name[:30] in top
        await pilot.resize_terminal(200, 30)
        await settle(app, pilot)
        assert f"{name} — leaf {leaf} · 47 entries" in screen_lines(app)[0]


@pytest.mark.parametrize("width", [80, 160])
async def test_a_name_in_wide_characters_is_cut_by_its_columns(demo, width):
    """A name was cut at a count of characters: in wide characters, twice the columns, and the
    leaf and counts went off the header; at 160 columns a long name hid the file name, which
    fits beside the 48 columns a name keeps (QA)."""
    name = "日本語のテキスト、全角文字でツリーの整列を確認します。絵文字も🎉とても長い名前です" * 2
    with open_session(demo) as session:
        session.append_session_name(name)
    app = make_app(demo)
    async with app.run_test(size=(width, 24)) as pilot:
        await settle(app, pilot)
        top = screen_lines(app)[0]
        assert cell_len(top) == width
        assert f"… — leaf {app.session.leaf_id} · 47 entries" in top
        if width == 160:
            assert top.rstrip().endswith("· demo.jsonl")


async def test_the_state_in_the_header_is_not_cut_for_the_name_at_80_columns(demo):
    """With a filter, a search and entries arrived unseen, the header at 80 columns kept 40
    columns of the name and cut "7 matches · +2 new" and "follow paused" off (QA)."""
    app = make_app(demo)
    async with app.run_test(size=(80, 24)) as pilot:
        await settle(app, pilot)
        await pilot.press("2", "slash", *"UTC", "enter")
        await settle(app, pilot)
        await pilot.press("g")
        leaf = app.session.leaf_id
        with open(demo, "ab") as f:
            for k, parent in enumerate([leaf, "feed0001"], 1):
                entry = {
                    "type": "message",
                    "id": f"feed000{k}",
                    "parentId": parent,
                    "timestamp": "2026-03-14T10:00:00Z",
                }
                message = {"role": "user", "content": f"arrived {k}", "timestamp": 1}
                f.write(json.dumps({**entry, "message": message}).encode() + b"\n")
        for _ in range(50):
            await pilot.pause(0.1)
            if "+2 new" in app.browser.sub_title:
                break
        await settle(app, pilot)
        top = screen_lines(app)[0]  # the name cut shorter
        assert top.startswith(" ├ Fix flaky date") and "… — leaf " in top, top
        assert "· filter no-tools · 7 matches · +2 new" in top, top
        await pilot.press("F")  # follow paused
        await settle(app, pilot)
        top = screen_lines(app)[0]  # no room for 16 columns of the name: the state alone
        assert cell_len(top) == 80
        assert top.startswith(" ├ leaf feed0002 · filter no-tools · 7 matches · +2 new · follow paused"), top


async def test_an_unnamed_session_is_named_in_the_header_as_the_picker_lists_it(tmp_path):
    """The picker lists an unnamed session by its first user message; the header said
    "(unnamed session)" for the same file, which read as another one."""
    from sessiontree.catalog import describe

    path = tmp_path / "old.jsonl"
    shutil.copyfile(PI_FIXTURES / "large-session.jsonl", path)
    title = describe(path).title
    assert title == "/mode"  # its first user message
    app = make_app(path)
    async with app.run_test(size=(160, 30)) as pilot:
        await settle(app, pilot)
        top = screen_lines(app)[0]
        assert f" {title} — leaf " in top and "(unnamed session)" not in top


async def test_the_filter_is_named_in_the_header_and_the_footer_is_not_rebuilt(tmp_path, monkeypatch):
    """Each `f` changes the header's line only: a footer label that named the filter made
    Textual's Footer rebuild all its keys on every press."""
    session = create_session("/w", path=tmp_path / "s.jsonl")
    for k in range(3):
        session.append_message(U(f"question {k}"))
        session.append_message(A(f"answer {k}"))
    leaf = session.leaf_id
    session.close()
    rebuilt = []
    recompose = Footer.recompose

    async def counted_recompose(self) -> None:
        rebuilt.append(self)
        await recompose(self)

    monkeypatch.setattr(Footer, "recompose", counted_recompose)
    app = make_app(tmp_path / "s.jsonl")
    async with app.run_test(size=(80, 24)) as pilot:
        await settle(app, pilot)
        for _ in range(50):  # the start's own rebuilds, late on a loaded machine (CI), are over
            rebuilt.clear()
            await pilot.pause(0.05)
            if not rebuilt:
                break
        for flt in [*list(Filter)[1:], Filter.DEFAULT]:  # the cycle ends back at the default
            await pilot.press("f")
            await settle(app, pilot)
            title = app.browser.sub_title
            if flt is Filter.DEFAULT:
                assert title.startswith(f"leaf {leaf} · 6 entries")
            else:
                assert title.startswith(f"leaf {leaf} · filter {flt.value} · 6 entries")
            # labeled-only shows nothing here (no labels), and the status line says what to do
            empty = flt is Filter.LABELED
            assert (len(app.browser.query_one(SessionTreeView).outline) == 0) == empty
            said = status(app)
            if empty:
                assert said.endswith(": 1 shows the default one")
            else:  # how many rows it left, in place of "nothing shown", which would now mislead
                rows = len(app.browser.query_one(SessionTreeView).outline)
                assert said == f"Filter: {flt.value} · {rows} rows shown", said
        assert not rebuilt


@pytest.mark.parametrize("read_only", [False, True])
async def test_moving_and_filtering_redraw_without_laying_the_screen_out(tmp_path, monkeypatch, read_only):
    """A layout redraws every widget on the screen. Cursor moves and filter changes alter the
    tree's rows, the preview, the preview's title and the header's line, none of which changes
    a widget's size; only a scrollbar that appears or goes needs one (not here: the tree and
    the preview overflow throughout). Read-only, the banner says the same thing throughout:
    it was set again (a layout) on every filter change."""
    session = create_session("/w", path=tmp_path / "s.jsonl")
    for k in range(150):
        session.append_message(U(f"question {k}"))
        session.append_message(A(f"answer {k}"))
    session.close()  # the app writes: it takes the lock
    layouts = []
    reflow = Compositor.reflow

    def counted_reflow(self, *args, **kwargs):
        layouts.append(args)
        return reflow(self, *args, **kwargs)

    monkeypatch.setattr(Compositor, "reflow", counted_reflow)
    app = make_app(tmp_path / "s.jsonl", read_only=read_only)
    async with app.run_test(size=(80, 24)) as pilot:
        await settle(app, pilot)
        layouts.clear()
        for key in ("up", "up", "pageup", "down", "2", "3", "5", "up", "1"):
            await pilot.press(key)
            await settle(app, pilot)
            # what changed reached the screen all the same
            lines = screen_lines(app)
            name = {"2": "no-tools", "3": "user-only", "5": "all"}.get(key)
            if name:
                assert f"filter {name}" in lines[0]
            assert f"context · up to {cursor_id(app)}" in "".join(lines[1:3])
        assert "filter" not in screen_lines(app)[0]
        assert ("READ-ONLY: opened with --read-only; nothing is written" in screen_lines(app)[1]) is read_only
        assert not layouts


async def test_the_read_only_banner_takes_one_row_at_any_width(demo):
    """At 60 columns and fewer the banner of --read-only took two of the tree's rows (QA)."""
    app = make_app(demo, read_only=True)
    async with app.run_test(size=(80, 24)) as pilot:
        await settle(app, pilot)
        for width, said in (
            (80, "READ-ONLY: opened with --read-only; nothing is written to the session"),
            (60, "READ-ONLY (--read-only): nothing is written"),
            (30, "READ-ONLY (--read-only)"),
        ):
            await pilot.resize_terminal(width, 24)
            await settle(app, pilot)
            lines = screen_lines(app)
            assert lines[1].strip() == said and "READ-ONLY" not in lines[2], width


async def test_help_scrolls_and_shows_the_keys_in_effect_at_80x24(demo):
    app = make_app(demo)
    async with app.run_test(size=(80, 24)) as pilot:
        await pilot.press("question_mark")
        await pilot.pause()
        assert isinstance(app.screen, HelpScreen)
        body = app.screen.query_one("#help-body")
        assert body.virtual_size.height > body.size.height  # more than fits: it scrolls
        # The body ends inside the dialog: rows clipped below its edge were skipped by PgDn.
        assert body.region.bottom <= app.screen.query_one("#help-dialog").content_region.bottom
        await pilot.press("pagedown")
        await pilot.pause()
        assert body.scroll_y == body.scrollable_content_region.height  # one visible page
        text = "\n".join(str(s.render()) for s in app.screen.query(".help-section"))
        assert "Session" in text and "Tree" in text and "Everywhere" in text
        await pilot.press("escape")
        assert not isinstance(app.screen, HelpScreen)


def remapped(demo, tmp_path, keys_toml: str):
    """The app on `demo` with `keys_toml` as the user's keys.toml."""
    keys = tmp_path / "keys.toml"
    keys.write_text(keys_toml)
    return make_app(demo, keymap_path=keys)


async def test_a_remapped_key_works_and_help_shows_it(demo, tmp_path):
    app = remapped(demo, tmp_path, '[keys]\nsearch = "ctrl+k"\nmove = "enter,w"\nnonsense = 5\n')
    async with app.run_test(size=(120, 40)) as pilot:
        await settle(app, pilot)
        assert any("keys.nonsense" in str(n.message) for n in app._notifications)
        await pilot.press("ctrl+k")
        assert app.browser.query_one("#search").display
        await pilot.press("escape")
        await pilot.press("question_mark")
        await pilot.pause()
        rows = HelpScreen.for_screen(app.screen_stack[-2]).sections
        found = [keys for _, section in rows for keys, what in section if what.startswith("Find: words")]
        assert found and found[0] == "^k"


async def test_the_tree_moves_and_the_filter_key_can_be_remapped(demo, tmp_path):
    """The tree's moves and `f` had no id, so keys.toml could not remap them (QA)."""
    app = remapped(demo, tmp_path, '[keys]\ntop = "ctrl+t"\nfilter = "f2"\n')
    async with app.run_test(size=(120, 40), notifications=True) as pilot:
        await settle(app, pilot)
        assert not app._notifications, [
            str(n.message) for n in app._notifications
        ]  # every id known, no clash
        tree = app.browser.query_one(SessionTreeView)
        assert tree.cursor_row > 0
        await pilot.press("ctrl+t")
        assert tree.cursor_row == 0
        await pilot.press("f2")
        await settle(app, pilot)
        assert tree.filter is not Filter.DEFAULT


async def test_a_key_remapped_to_a_letter_is_not_offered_in_the_find_bar(demo, tmp_path):
    """With `move = "enter,l"` the find bar's footer listed `l Move`, where `l` types an l
    (QA; `w` here, `l` being the child's key now)."""
    app = remapped(demo, tmp_path, '[keys]\nmove = "enter,w"\n')
    async with app.run_test(size=(160, 40)) as pilot:
        await settle(app, pilot)
        leaf = app.browser.session.leaf_id
        await pilot.press("slash", "w")
        await settle(app, pilot)
        assert app.browser.query_one("#search", Input).value == "w"
        assert app.browser.session.leaf_id == leaf
        shown = [(w.key, w.description) for w in app.screen.query_one("Footer").query("FooterKey")]
        assert ("w", "Move") not in shown and ("enter", "Find") in shown


async def test_a_clashing_or_unknown_remap_is_refused_with_a_warning(demo, tmp_path):
    """`quit = "j"` left `q` dead and `j` still moving down, and help listed both; a misspelt
    id did nothing. Both were taken without a word (QA)."""
    keys = tmp_path / "keys.toml"
    keys.write_text('[keys]\nquit = "j"\nnonexistent = "x"\nback = "B"\n')
    app = make_app(demo, keymap_path=keys)
    async with app.run_test(size=(120, 40), notifications=True) as pilot:
        await settle(app, pilot)
        said = [str(n.message) for n in app._notifications]
        assert len(said) == 1  # one toast: at 80x24 a third pushed the first out of sight (QA)
        problems = said[0].split("\n")
        assert any(
            m.startswith("• keys.nonexistent: no binding has this id; the ids: active_leaf, archive,")
            for m in problems
        )
        assert '• keys.quit = "j": Down has that key; Quit stays on q' in problems
        rows = HelpScreen.for_screen(app.screen).sections
        quits = [keys for _, section in rows for keys, what in section if what == "Quit"]
        assert quits == ["q"]
        # help says them too, its toast gone: it covered help's right half (QA)
        await pilot.press("question_mark")
        await settle(app, pilot)
        assert isinstance(app.screen, HelpScreen) and not app._notifications
        shown = "\n".join(screen_lines(app))
        assert "Left out of keys.toml" in shown and 'keys.quit = "j": Down has that key' in shown
        await pilot.press("escape")
        await settle(app, pilot)
        tree = app.browser.query_one(SessionTreeView)
        await pilot.press("B")  # the remap that clashes with nothing is applied
        await settle(app, pilot)
        assert status(app).startswith("Back: leaf is"), status(app)
        await pilot.press("g", "j")
        assert tree.cursor_row == 1 and app.is_running
        await pilot.press("q")
    assert not app.is_running


async def test_resize_keeps_the_cursor_in_view(demo):
    app = make_app(demo)
    async with app.run_test(size=(160, 50)) as pilot:
        await settle(app, pilot)
        tree = app.browser.query_one(SessionTreeView)
        await pilot.resize_terminal(80, 12)
        await settle(app, pilot)
        top = int(tree.scroll_offset.y)
        assert top <= tree.cursor_row < top + tree.size.height


async def test_follow_counts_new_entries_quietly_until_the_cursor_reaches_the_leaf(demo):
    app = make_app(demo, read_only=True)  # the agent (another process) is the writer
    async with app.run_test(size=(120, 40)) as pilot:
        await settle(app, pilot)
        await pilot.press("g")  # away from the leaf
        writer = subprocess.run(
            [sys.executable, "-c", WRITE_TWO, str(demo)], capture_output=True, text=True, timeout=30
        )
        assert writer.returncode == 0, writer.stderr
        for _ in range(40):
            await pilot.pause(0.1)
            if "+2 new" in app.browser.sub_title:
                break
        assert "+2 new" in app.browser.sub_title
        assert not app._notifications or not any("arrived" in str(n.message) for n in app._notifications)
        await pilot.press("a")  # to the leaf: caught up
        await settle(app, pilot)
        assert "new" not in app.browser.sub_title
        await pilot.press("F")
        assert "follow paused" in app.browser.sub_title


async def test_the_header_redraws_its_line_not_the_whole_screen(demo):
    """A new title or subtitle (after every write and followed append) reaches the terminal as
    the header's own line: Textual lays out and redraws a whole screen whose title repaints it
    (25-30 ms at 160×50 on a big session)."""
    app = make_app(demo)
    async with app.run_test(size=(120, 30)) as pilot:
        await settle(app, pilot)
        updates: list[str] = []
        display = app._display  # what Textual hands the terminal: the only place to see it
        app._display = lambda screen, update: updates.append(type(update).__name__) or display(screen, update)
        app.browser.follow = False
        app.browser._update_header()
        await settle(app, pilot)
        assert "follow paused" in str(app.screen.query_one(HeaderTitle).render())
        assert updates and "LayoutUpdate" not in updates, updates


WRITE_TWO = """
import sys
from sessiontree import create_session, open_session
from sessiontree.outline import Filter
with open_session(sys.argv[1]) as s:
    s.append_message({"role": "user", "content": "one", "timestamp": 1})
    s.append_message({"role": "user", "content": "two", "timestamp": 1})
"""


async def test_an_old_format_file_upgrades_from_the_app(tmp_path):
    """At 80 columns too: the banner's end says how to leave read-only mode, so it is whole."""
    path = tmp_path / "old.jsonl"
    shutil.copyfile(PI_FIXTURES / "large-session.jsonl", path)
    app = make_app(path)
    async with app.run_test(size=(80, 24)) as pilot:
        await settle(app, pilot)
        banner = app.browser.query_one("#banner")
        assert app.session.read_only and "U upgrades it (a backup is kept)." in str(banner.render())
        assert len(banner.render().wrap(banner.content_region.width)) <= banner.content_region.height == 2
        assert not app._notifications  # the banner says why; no toast repeats it over the tree
        await pilot.press("U")
        await pilot.pause()
        await pilot.press("y")
        await settle(app, pilot)
        assert not app.session.read_only and app.session.format_version == 3
        assert (tmp_path / "old.jsonl.bak").exists()
        # the backup named, not its whole path: it wrapped mid-word in the toast (QA)
        said = [n.message for n in app._notifications]
        assert "Upgraded; the original is kept next to it as old.jsonl.bak" in said, said
        leaf = app.session.leaf_id
    with open_session(path, read_only=True) as again:
        assert again.format_version == 3 and again.leaf_id == leaf


async def test_an_old_format_file_with_a_torn_last_line_upgrades_too(tmp_path):
    """`U` then `y` said "Not upgraded … cannot upgrade a damaged file": an old format is
    read-only, and the torn line is set aside only by a write, so the file could never be
    written (QA). It upgrades without that line; the backup keeps it, and the toast says so."""
    path = tmp_path / "old.jsonl"
    path.write_bytes((PI_FIXTURES / "large-session.jsonl").read_bytes()[:-40])
    app = make_app(path)
    async with app.run_test(size=(120, 30)) as pilot:
        await settle(app, pilot)
        await pilot.press("U")
        await pilot.pause()
        await pilot.press("y")
        await settle(app, pilot)
        assert not app.session.read_only and app.session.format_version == 3
        said = [str(n.message) for n in app._notifications]
        kept = "Upgraded; the original is kept next to it as old.jsonl.bak"
        assert f"{kept} (with its incomplete last line, left out of the upgraded file)" in said, said


async def test_an_old_format_file_the_user_cannot_write_is_not_offered_an_upgrade(tmp_path, monkeypatch):
    """The banner offered U for a file of another user's, and U said no only after its dialog
    (QA, as an unprivileged user: these tests run as root, whom the permissions do not stop,
    so the answer of `os.access` is the other user's here)."""
    path = tmp_path / "old.jsonl"
    shutil.copyfile(PI_FIXTURES / "large-session.jsonl", path)
    real_access = os.access
    monkeypatch.setattr(os, "access", lambda p, mode: False if str(p) == str(path) else real_access(p, mode))
    before = path.read_bytes()
    app = make_app(path)
    async with app.run_test(size=(80, 24)) as pilot:
        await settle(app, pilot)
        text = str(app.browser.query_one("#banner").render())
        assert "U upgrades" not in text and "the file is not writable by you" in text
        assert "it cannot be upgraded here" in text
        await pilot.press("U")
        await pilot.pause()
        assert app.screen is app.browser  # no dialog
        assert status(app) == "Not upgraded: the file is not writable by you"
    assert path.read_bytes() == before and not (tmp_path / "old.jsonl.bak").exists()


async def test_an_old_format_file_without_write_bits_is_not_offered_an_upgrade(tmp_path):
    """chmod 444: the banner offered U, which said the permissions refused it only after its
    dialog (QA; as root, whom the mode does not stop, the storage takes it as the owner's wish)."""
    path = tmp_path / "old.jsonl"
    shutil.copyfile(PI_FIXTURES / "large-session.jsonl", path)
    path.chmod(0o444)
    app = make_app(path)
    async with app.run_test(size=(120, 24)) as pilot:
        await settle(app, pilot)
        text = str(app.browser.query_one("#banner").render())
        assert "U upgrades" not in text and "chmod u+w allows writing" in text
        assert "Upgrade" not in screen_lines(app)[-1]  # the footer offered it all the same
        await pilot.press("U")
        await pilot.pause()
        assert app.screen is app.browser  # no dialog
        assert status(app).startswith("Not upgraded: the file's permissions make it read-only")
    assert not (tmp_path / "old.jsonl.bak").exists()


async def test_palette_offers_filters_labels_and_go_to_id(demo):
    app = make_app(demo)
    async with app.run_test(size=(120, 40)) as pilot:
        await settle(app, pilot)
        titles = [c.title for c in app.get_system_commands(app.screen)]
        assert "Filter: no-tools" in titles and "Go to entry id…" in titles
        assert any(t.startswith("Go to label: diagnosis") for t in titles)
        command = next(c for c in app.get_system_commands(app.screen) if c.title == "Go to label: diagnosis")
        command.callback()
        await settle(app, pilot)
        assert app.session.get_label(cursor_id(app)) == "diagnosis"
        app.browser.action_go_to_id()
        await pilot.pause()
        await pilot.press(*"3a7c157", "enter")  # a label entry: hidden by the default filter
        await settle(app, pilot)
        assert cursor_id(app) == "3a7c1571"


async def test_the_palette_has_every_action_of_the_keys(demo):
    """Rename, archive, move, back, label and the preview's keys were missing: "rename" found
    nothing, where the README says the palette has every action (QA). A read-only session
    leaves out the writes, as its keys are off."""
    keys = ["⏎", "s", "b", "m", "r", "A", "p", "v", "e", "h", "]", "[", "space"]
    keys += ["/", "&", "a", "t", "z", "H", "o", "F", "c", "X", "d"]
    app = make_app(demo)
    async with app.run_test(size=(120, 40)) as pilot:
        await settle(app, pilot)
        helps = [c.help for c in app.get_system_commands(app.screen)]
        for key in keys:
            assert any(h.endswith(f"({key})") for h in helps), key
        await pilot.press("ctrl+p")
        await pilot.pause(0.3)
        await pilot.press(*"rename the", "enter")
        await settle(app, pilot)
        await pilot.press("ctrl+u", *"From the palette", "enter")
        await settle(app, pilot)
        assert app.browser.title == "From the palette"
    app = make_app(demo, read_only=True)
    async with app.run_test(size=(120, 40)) as pilot:
        await settle(app, pilot)
        titles = [c.title for c in app.get_system_commands(app.screen)]
        assert "Go to the next fork" in titles
        assert not any(t.startswith(("Move", "Rename", "Label")) for t in titles)


def test_user_message_helper_is_pi_shaped():
    assert U("x")["role"] == "user"


@pytest.mark.parametrize("size", [(80, 24), (160, 50)])
async def test_warnings_stay_over_the_preview_clear_of_the_tree_rows(demo, size):
    """At 80 columns a toast half the screen wide covered the tree rows' ends, where the
    "← active" marker is drawn. Confirmations now go to the status line; warnings stay toasts."""
    from textual.widgets._toast import Toast

    with demo.open("ab") as f:
        f.write(b'{"type":"message","id":"torn"')  # a torn last line: a warning at open
    app = make_app(demo)
    async with app.run_test(size=size, notifications=True) as pilot:  # drawn, as in a terminal
        tree = app.browser.query_one(SessionTreeView)
        await settle(app, pilot)
        toasts = list(app.screen.query(Toast))
        assert [n.title for n in app._notifications] == ["Incomplete last line"] and toasts
        for toast in toasts:
            assert toast.region.width > 0 and toast.region.x >= tree.region.right, toast.region


async def test_confirmations_replace_each_other_on_the_status_line_and_lay_nothing_out(demo, monkeypatch):
    """Enter, `b` and `z` stacked three toasts over the preview at 80x24, and each toast laid the
    screen out when it came and went (`tui/notices.py`). The status line keeps its size: the
    last confirmation replaces the one before, and saying it only repaints that line."""
    from textual.widgets._toast import Toast

    from sessiontree.tui.notices import StatusLine

    layouts: list[str] = []
    refresh = StatusLine.refresh

    def spied_refresh(self, *regions, **kw):
        if kw.get("layout"):
            layouts.append(self.message)
        return refresh(self, *regions, **kw)

    monkeypatch.setattr(StatusLine, "refresh", spied_refresh)
    app = make_app(demo)
    async with app.run_test(size=(80, 24), notifications=True) as pilot:
        await settle(app, pilot)
        line = app.browser.query_one(StatusLine)
        region = line.region
        assert region.height == 1 and region.width == 80
        layouts.clear()  # from mounting the screen
        await pilot.press("up", "enter")
        await settle(app, pilot)
        moved = status(app)
        assert moved.startswith("Leaf moved to ") and moved in screen_lines(app)[-2]
        await pilot.press("b")
        await settle(app, pilot)
        assert status(app).startswith("Back: leaf is ")
        await pilot.press("z")
        await settle(app, pilot)
        assert status(app).startswith("Folded ") and status(app) in screen_lines(app)[-2]
        assert moved not in "\n".join(screen_lines(app))  # replaced, not stacked
        assert not app._notifications and not app.screen.query(Toast)
        assert line.region == region and not layouts


HINTS = (
    "Enter moves the leaf here (nothing is deleted) · b moves it back · ? every key",
    "Enter moves the leaf here · b moves it back · ? every key",
    "⏎ moves the leaf · b back · ? keys",
)


@pytest.mark.parametrize(("size", "wording"), [((80, 24), 0), ((60, 18), 1), ((40, 12), 2)])
async def test_the_hint_is_worded_to_fit_the_row(demo, size, wording):
    """At 60 columns it read "… (nothing is deleted) · b goes b…" (QA); a narrower terminal gets
    a shorter wording whole, and a resize picks again."""
    app = make_app(demo)
    async with app.run_test(size=(80, 24)) as pilot:
        await settle(app, pilot)
        await pilot.resize_terminal(*size)
        await settle(app, pilot)
        assert screen_lines(app)[-2].strip() == HINTS[wording]


async def test_the_hint_names_the_keys_in_effect(demo, tmp_path):
    """With `back = "x"` and `fork = "b"` in keys.toml the hint still said "b moves it back",
    and `b` asked to fork (QA); likewise "?" with help on F1."""
    app = remapped(demo, tmp_path, '[keys]\nback = "x"\nfork = "b"\nhelp = "f1"\nmove = "w,enter"\n')
    async with app.run_test(size=(80, 24)) as pilot:
        await settle(app, pilot)
        assert (
            screen_lines(app)[-2].strip()
            == "w moves the leaf here (nothing is deleted) · x moves it back · f1 every key"
        )


async def test_a_confirmation_dims_when_its_time_is_up(demo):
    """It stays, dimmed, for a user who looks down late; the next one is bright again. Before
    the first, the line holds a dim hint for a newcomer, which is no confirmation."""
    from sessiontree.tui.notices import StatusLine

    app = make_app(demo)
    async with app.run_test(size=(80, 24)) as pilot:
        await settle(app, pilot)
        line = app.browser.query_one(StatusLine)

        def dimmed() -> bool:
            """Whether the text is drawn dim (in a terminal Textual blends it into the background;
            $text-muted, a colour with an alpha that a component style does not blend, drew
            brighter than the fresh message in a 256-colour tmux)."""
            return bool(next(seg.style for seg in line.render_line(0) if seg.text.strip() and seg.style).dim)

        assert screen_lines(app)[-2].strip() == HINTS[0] and status(app) == ""
        assert dimmed()  # the hint
        # Long enough that a loaded CI machine still sees it bright after a pause (0.05 s was not).
        line.say("first", timeout=0.5)
        await pilot.pause()
        assert not dimmed()
        await until(pilot, dimmed, 5)
        assert line.message == "first" and "first" in screen_lines(app)[-2]
        line.say("second")
        await pilot.pause()
        assert not dimmed() and "second" in screen_lines(app)[-2]


async def test_on_a_narrow_terminal_the_preview_goes_below_the_tree(demo):
    """Beside the tree at 60x18 the preview had 16 columns, at 64x20 twenty and at 50x15 five, a
    word or two a row (QA): under 72 columns it takes the whole width, below the tree."""
    app = make_app(demo)
    async with app.run_test(size=(120, 30)) as pilot:
        await settle(app, pilot)
        tree, side = app.browser.query_one(SessionTreeView), app.browser.query_one("#side")
        assert side.region.x > tree.region.x and side.region.y == tree.region.y  # side by side
        for width, height in ((71, 20), (64, 20), (60, 18), (50, 15)):
            await pilot.resize_terminal(width, height)
            await settle(app, pilot)
            assert side.region.width == width and side.region.y >= tree.region.bottom
            assert tree.region.height >= 4 and side.region.height >= 4
            shown = "\n".join(screen_lines(app))
            assert "Changelog written. Ready to tag 1.4.0." in shown  # the leaf's text, whole


async def test_a_toast_leaves_the_status_line_in_sight(demo):
    """Toasts sat on the status line, over the end of what it said (QA)."""
    app = make_app(demo)
    async with app.run_test(size=(80, 24), notifications=True) as pilot:
        await settle(app, pilot)
        app.browser.notify("a warning of some length", severity="warning")
        await pilot.press("z")
        await settle(app, pilot)
        toast = app.screen.query_one("Toast")
        status_line = app.browser.query_one("#status")
        assert toast.region.bottom <= status_line.region.y
        assert any(line.startswith(" Folded") and "unfolds them" in line for line in screen_lines(app))


async def test_key_names_are_spelt_as_textual_spells_them_and_no_key_is_taken_silently(demo, tmp_path):
    """`help = "F1"` showed in the footer and never fired; `search = "ctrl+q"` showed too and
    the key quit the app (Textual's own binding); `label = "enter"` took Enter from Move
    without a word (QA)."""
    keys = tmp_path / "keys.toml"
    keys.write_text(
        '[keys]\nhelp = "F1"\nsearch = "Ctrl+K"\ncopy = "ctrl+q"\nlabel = "enter"\nrename = "f1x"\n'
        'back = "escape"\nfork = "ctrl+c"\n'
    )
    app = make_app(demo, keymap_path=keys)
    async with app.run_test(size=(80, 24), notifications=True) as pilot:
        await settle(app, pilot)
        problems = next(str(n.message) for n in app._notifications).split("\n")
        assert problems == [
            '• keys.rename = "f1x": no key is called "f1x" (key names look like "f1", "ctrl+k",'
            ' "pageup", "?"); Rename stays on r',
            '• keys.copy = "ctrl+q": Quit has that key; Copy stays on c',
            '• keys.label = "enter": Move has that key; Label stays on m',
            # Esc closes the find bar: it wrote a move from there (QA); Textual's name for
            # its Ctrl+C binding, "help_quit", meant nothing to a user (QA)
            '• keys.back = "escape": Esc (it closes the find bar and dialogs) has that key; Back stays on b',
            '• keys.fork = "ctrl+c": Copy (Textual\'s Ctrl+C) has that key; Fork stays on X',
        ]
        await pilot.press("ctrl+k")
        assert app.browser.query_one("#search").display
        await pilot.press("escape")
        await pilot.press("f1")
        await pilot.pause()
        assert isinstance(app.screen, HelpScreen)
        rows = HelpScreen.for_screen(app.screen_stack[-2]).sections
        moves = [keys for _, section in rows for keys, what in section if what.startswith("Move")]
        assert moves and moves[0].startswith("⏎")


async def test_a_title_set_while_the_header_goes_away_is_passed_over(demo):
    """A session opened as the app quit had its title set after the header's title line was
    gone: Textual's Header caught NoScreen there, not NoMatches, and the app ended in a
    traceback (seen once in a test that quits at once)."""
    from textual.widgets._header import HeaderTitle

    from sessiontree.tui.header import SessionHeader

    app = make_app(demo)
    async with app.run_test(size=(100, 30)) as pilot:
        await settle(app, pilot)
        header = app.browser.query_one(SessionHeader)
        await header.query_one(HeaderTitle).remove()
        app.browser.sub_title = "changed after the title line went"
        await pilot.pause(0.1)
        assert app.is_running and app.return_code is None


def contrast(one, other) -> float:
    """WCAG's contrast ratio of two colours (1 to 21)."""

    def luminance(color) -> float:
        r, g, b = (c / 255 for c in color.rgb)
        r, g, b = ((c / 12.92) if c <= 0.03928 else ((c + 0.055) / 1.055) ** 2.4 for c in (r, g, b))
        return 0.2126 * r + 0.7152 * g + 0.0722 * b

    high, low = sorted((luminance(one), luminance(other)), reverse=True)
    return (high + 0.05) / (low + 0.05)


@pytest.mark.parametrize(
    "theme", ["textual-light", "textual-dark", "solarized-light", "nord", "tokyo-night", "monokai"]
)
async def test_rows_and_muted_lines_read_in_light_and_dark_themes(demo, theme):
    """In a light theme the tree's rows and the preview's meta lines were white on light grey:
    an `auto` colour ($text) taken as white by the styles the views draw with; and muted lines
    drew brighter than the text in a dark one (QA)."""
    from textual.color import Color

    from sessiontree.tui.preview import PreviewView

    app = make_app(demo)
    async with app.run_test(size=(120, 30)) as pilot:
        await settle(app, pilot)
        app.theme = theme
        await settle(app, pilot)
        for view, text, muted in (
            (app.browser.query_one(SessionTreeView), "tree--path", None),
            (app.browser.query_one(PreviewView), None, "preview--meta"),
        ):
            ground = view.background_colors[1]
            body = Color.from_rich_color(view.rich_style.color)
            if text is not None:
                assert contrast(Color.from_rich_color(view._style(text).color), ground) >= 4.5
            if muted is not None:
                shade = Color.from_rich_color(view._style(muted).color)
                assert contrast(shade, ground) >= 2
                if theme.startswith("textual-"):  # muted under the text (solarized's text is grey)
                    assert contrast(shade, ground) < contrast(body, ground)
        # coloured lines and the cursor's bar, whose text was the theme's foreground on its
        # accent (1.1:1 in solarized-light, 1.9:1 in textual-dark, QA)
        tree, preview = app.browser.query_one(SessionTreeView), app.browser.query_one(PreviewView)
        # and the lines that draw the tree's shape (1.6:1 in textual-dark, QA)
        for view, name in (
            (tree, "tree--cursor"),
            (tree, "tree--fold"),
            (tree, "tree--guide"),
            (preview, "preview--more"),
        ):
            style = view._style(name)
            ground = Color.from_rich_color(style.bgcolor) if style.bgcolor else view.background_colors[1]
            assert contrast(Color.from_rich_color(style.color), ground) >= 3, name
        # the bar on a row off the active path, whose text is dim: it was blended into the bar
        # (olive on orange, 2.5:1 in textual-dark, QA)
        off = next(r for r in range(len(tree.outline)) if not tree.outline.on_path(tree.outline.rows_pos[r]))
        tree.focus()
        tree.set_cursor(off)
        await settle(app, pilot)
        strip = tree.render_line(off - int(tree.scroll_offset.y))
        text = [s for s in strip if s.text.strip() and s.style is not None]
        assert text and not any(s.style.dim for s in text)
        for s in text:
            assert contrast(Color.from_rich_color(s.style.color), Color.from_rich_color(s.style.bgcolor)) >= 3


@pytest.mark.parametrize(
    "theme", ["ansi-dark", "ansi-light", "textual-dark", "textual-light", "solarized-light"]
)
async def test_diff_lines_and_the_leaf_row_are_not_drawn_in_their_own_colour(demo, theme):
    """In the ANSI themes an added line of a diff was green on green, a removed one red on red,
    and the leaf's mark green on the leaf row's green: a tint of a colour those themes cannot
    mix is the colour itself (QA). They are drawn on the terminal's own background there."""
    from sessiontree.tui.preview import PreviewView

    app = make_app(demo)
    async with app.run_test(size=(120, 30)) as pilot:
        await settle(app, pilot)
        app.theme = theme
        await settle(app, pilot)
        tree, preview = app.browser.query_one(SessionTreeView), app.browser.query_one(PreviewView)
        pairs = [
            (preview._style("preview--diff-added"), None),
            (preview._style("preview--diff-removed"), None),
            (tree._style("tree--leaf"), tree._style("tree--leaf-row")),
        ]
        for style, ground in pairs:
            background = (ground or style).bgcolor
            assert style.color is not None
            if theme.startswith("ansi-"):
                assert background is None or background.name == "default"
            else:  # a tint, readable under the text
                assert background is not None and background != style.color
                assert contrast(Color.from_rich_color(style.color), Color.from_rich_color(background)) >= 3


async def test_the_theme_chosen_is_remembered_for_the_next_run(demo, tmp_path):
    """Each run started with Textual's default theme, whatever was chosen the run before."""
    settings = tmp_path / "state" / "sessiontree" / "settings.json"
    app = make_app(demo)
    app.settings_path = settings
    async with app.run_test(size=(100, 30)) as pilot:
        await settle(app, pilot)
        assert app.theme == "textual-dark" and not settings.exists()
        app.theme = "nord"
        await pilot.pause()
    assert json.loads(settings.read_text()) == {"theme": "nord"}
    settings.write_text(json.dumps({"theme": "nord", "kept": [1, 2]}))  # other keys stay
    os.utime(settings, (1, 1))
    again = make_app(demo)
    again.settings_path = settings
    async with again.run_test(size=(100, 30), notifications=True) as pilot:
        await settle(again, pilot)
        assert again.theme == "nord" and not again._notifications
        assert settings.stat().st_mtime == 1  # applied, not written again (QA: every start wrote it)
        again.theme = "gruvbox"
        await pilot.pause()
    assert json.loads(settings.read_text()) == {"theme": "gruvbox", "kept": [1, 2]}
    assert [p.name for p in settings.parent.iterdir()] == ["settings.json"]  # no temporary left


@pytest.mark.parametrize(
    ("content", "said"),
    [
        ("{not json", "using the default settings"),
        ('["theme"]', "not a JSON object; using the default settings"),
        ('{"theme": "no-such-theme"}', "no theme is called 'no-such-theme'; using 'textual-dark'"),
    ],
)
async def test_a_broken_settings_file_is_reported_and_the_app_opens(demo, tmp_path, content, said):
    settings = tmp_path / "settings.json"
    settings.write_text(content)
    app = make_app(demo)
    app.settings_path = settings
    async with app.run_test(size=(100, 30), notifications=True) as pilot:
        await settle(app, pilot)
        assert app.theme == "textual-dark"
        messages = [str(n.message) for n in app._notifications]
        assert len(messages) == 1 and str(settings) in messages[0] and said in messages[0], messages


async def test_a_theme_that_cannot_be_remembered_still_applies_and_is_said_once(demo, tmp_path):
    blocker = tmp_path / "not-a-folder"
    blocker.write_text("")
    app = make_app(demo)
    app.settings_path = blocker / "settings.json"
    async with app.run_test(size=(100, 30), notifications=True) as pilot:
        await settle(app, pilot)
        for theme in ("nord", "gruvbox"):
            app.theme = theme
            await pilot.pause()
        assert app.current_theme.name == "gruvbox"
        said = [str(n.message) for n in app._notifications]
        assert len(said) == 1 and said[0].startswith("The theme will not be remembered:"), said


def test_only_the_command_line_app_remembers_the_theme(demo, monkeypatch):
    """`launch` (what `sessiontree` runs) gives the app the user's settings file; the apps the
    tests and the screenshots build keep the default theme."""
    seen = []
    monkeypatch.setattr(SessionTreeApp, "run", lambda self: seen.append(self.settings_path))
    assert build_app(str(demo)).settings_path is None
    assert launch(str(demo)) == 0
    assert seen == [Path(os.environ["XDG_STATE_HOME"]) / "sessiontree" / "settings.json"]


async def test_the_palettes_keys_command_is_this_apps_help_and_it_closes_with_esc(demo):
    """The palette's "Keys" opened Textual's keys panel, which Esc did not close (the next `q`
    quit the app) and which listed keys the tree does not have (→, Ctrl+PgUp); "Screenshot"
    failed with two toasts where ~/Downloads does not exist (QA)."""
    app = make_app(demo)
    async with app.run_test(size=(160, 50)) as pilot:
        await settle(app, pilot)
        titles = [c.title for c in app.get_system_commands(app.screen)]
        assert "Screenshot" not in titles and titles.count("Keys") == 1
        await pilot.press("ctrl+p")
        await settle(app, pilot)
        await pilot.press(*"Keys", "enter")
        await settle(app, pilot)
        assert isinstance(app.screen, HelpScreen) and not app.screen.query("HelpPanel")
        await pilot.press("escape")
        await settle(app, pilot)
        assert not isinstance(app.screen, HelpScreen) and app.is_running


async def test_a_binding_id_is_taken_with_either_separator(demo, tmp_path):
    """The ids mix Textual's spelling and ours (`next_fork`, `next-match`): a user had to guess
    which (QA). Either is taken for either."""
    app = remapped(demo, tmp_path, '[keys]\nnext-fork = "f3"\nnext_match = "f4"\n')
    async with app.run_test(size=(160, 40), notifications=True) as pilot:
        await settle(app, pilot)
        assert not app._notifications  # no "no binding has this id"
        rows = HelpScreen.for_screen(app.screen).sections
        keys_of = {what: keys for _, section in rows for keys, what in section}
        assert "f3" in keys_of["Next fork"] and "f4" in keys_of["Next match"]


async def test_notes_name_the_keys_as_remapped(demo, tmp_path):
    """With filter 5 on `0`, a find said "2 filtered out (5 shows all)", and 5 did nothing
    (QA). Notes that name a key name the user's."""
    app = remapped(demo, tmp_path, '[keys]\nfilter-5 = "0"\nfold = "o"\n')
    async with app.run_test(size=(120, 30)) as pilot:
        await settle(app, pilot)
        await pilot.press("slash", *"Asia/Tokyo", "enter")
        await settle(app, pilot)
        assert "2 filtered out (0 shows all)" in status(app)
        tree = app.browser.query_one(SessionTreeView)
        hidden = next(i for i in range(len(app.session.tree)) if not tree.filter_shows(i))
        assert tree.hidden_reason(hidden).endswith("the filter hides (0 shows it)")


async def test_tab_says_the_keys_went_to_the_preview_and_lights_its_edge(demo):
    """Tab moved the keys to the preview with no cue but a dimmer cursor bar; the arrows then
    scrolled the preview and the tree seemed stuck (QA)."""
    from sessiontree.tui.browser import PREVIEW_FOCUSED
    from sessiontree.tui.preview import PreviewView

    app = make_app(demo)
    async with app.run_test(size=(80, 24)) as pilot:
        await settle(app, pilot)
        side = app.browser.query_one("#side")
        unfocused = side.styles.border_left[1]
        hint = status(app)
        await pilot.press("tab")
        await pilot.pause()
        assert isinstance(app.focused, PreviewView)
        assert status(app) == PREVIEW_FOCUSED and PREVIEW_FOCUSED in screen_lines(app)[-2]
        assert side.styles.border_left[1] != unfocused  # the edge between tree and preview
        await pilot.press("tab")
        await pilot.pause()
        assert isinstance(app.focused, SessionTreeView)
        assert status(app) == hint and side.styles.border_left[1] == unfocused


async def test_a_filter_that_shows_nothing_previews_nothing(tmp_path):
    """Under "labeled only" in a session without labels, the preview went on showing the
    context of the entry the cursor had left (QA); the same entry comes back with the filter."""
    from harness.retries import write_retries
    from sessiontree.tui.preview import PreviewView
    from sessiontree.tui.preview_pane import PreviewPane

    path = tmp_path / "retries.jsonl"
    write_retries(path, retries=5, nested=2).close()
    app = make_app(path)
    async with app.run_test(size=(120, 30)) as pilot:
        await settle(app, pilot)
        pane = app.browser.query_one(PreviewPane)
        before = pane.target
        assert before is not None and app.browser.query_one(PreviewView).display
        await pilot.press("4")  # labeled only: no row
        await settle(app, pilot)
        title = str(app.browser.query_one("#preview-title").render())
        assert pane.target is None and title.startswith("nothing selected: ")
        assert not app.browser.query_one(PreviewView).display
        await pilot.press("1")
        await settle(app, pilot)
        assert pane.target == before and app.browser.query_one(PreviewView).display
        await until(pilot, lambda: "context · up to" in str(app.browser.query_one("#preview-title").render()))
