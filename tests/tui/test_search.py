"""Search as find and as a filter, on Pi's real session files."""

from __future__ import annotations

import json
import re
import shutil

import pytest
from textual import events
from textual.widgets import Input

from harness.pilot import cursor_id, make_app, put_cursor, rows, settle, status, until
from helpers import PI_FIXTURES, A, U
from sessiontree import JsonlStorage, Session, create_session
from sessiontree.tui.tree_view import SessionTreeView

pytestmark = pytest.mark.usefixtures("utc")


@pytest.fixture
def large(tmp_path):
    target = tmp_path / "large-session.jsonl"
    shutil.copyfile(PI_FIXTURES / "large-session.jsonl", target)
    return target


def tree(app) -> SessionTreeView:
    return app.browser.query_one(SessionTreeView)


async def search(app, pilot, key: str, text: str) -> None:
    await pilot.press(key)
    await pilot.press(*text, "enter")
    await settle(app, pilot)


async def test_filter_narrows_to_the_matches_alone_and_esc_restores(large):
    # Pi's own /tree search shows only the matches; with the ancestors that place them, this
    # chain kept every entry above its last match (694 rows for 17 matches of "CHANGELOG").
    app = make_app(large)
    async with app.run_test(size=(120, 40)) as pilot:
        await settle(app, pilot)
        full = len(tree(app).outline)
        where = cursor_id(app)
        await search(app, pilot, "ampersand", "CHANGELOG")
        outline = tree(app).outline
        shown = [outline.rows_pos[r] for r in range(len(outline))]
        # the matches the filter shows (the others are kept, for a filter that shows them)
        matches = {i for i in app.browser._matches if tree(app).filter_shows(i)}
        assert len(matches) == 17 and sorted(shown) == sorted(matches)
        assert tree(app).current_position() in matches  # the cursor lands on a match
        assert status(app).startswith("17 matches shown")
        await pilot.press("escape")
        await settle(app, pilot)
        assert len(tree(app).outline) == full and cursor_id(app) == where


async def test_the_search_filter_keeps_the_cursor_on_its_match_and_esc_leaves_nothing_stale(demo):
    app = make_app(demo)
    async with app.run_test(size=(80, 24)) as pilot:
        await search(app, pilot, "slash", "conftest")
        found = list(app.browser._matches)
        assert len(found) == 3
        first = cursor_id(app)
        assert app.session.tree.pos[first] == found[0]
        assert "match 1/3" in app.browser.sub_title
        await search(app, pilot, "ampersand", "conftest")
        assert cursor_id(app) == first  # not the last match
        assert "match 1/3" in app.browser.sub_title
        await pilot.press("escape")  # the tree comes back, the cursor where it was
        await settle(app, pilot)
        assert tree(app).restrict is None and cursor_id(app) == first
        assert status(app) == "Search filter cleared" and not app._notifications
        tree(app).set_cursor(0)
        await settle(app, pilot)
        assert "· 3 matches ·" in app.browser.sub_title
        await pilot.press("escape")  # then the highlights go
        await settle(app, pilot)
        assert not app.browser._matches and "match" not in app.browser.sub_title
        await search(app, pilot, "slash", "conftest")
        await pilot.press("3")  # user messages only: none of the three
        await settle(app, pilot)
        assert len(app.browser._matches) == 3 and not tree(app).outline.rows_of(app.browser._matches)
        assert "matches hidden" in app.browser.sub_title


async def test_the_search_filter_from_a_row_that_is_no_match_lands_on_the_nearest(demo):
    app = make_app(demo)
    async with app.run_test(size=(80, 24)) as pilot:
        await settle(app, pilot)
        here = tree(app).current_position()  # the leaf, at the end of the file
        await search(app, pilot, "ampersand", "conftest")
        found = app.browser._matches
        assert here not in found and len(found) == 3
        assert tree(app).current_position() == min(found, key=lambda i: abs(i - here))


@pytest.mark.parametrize("opener", [("slash", "/"), ("ampersand", "&")])
async def test_keys_typed_right_after_slash_go_to_the_search_box_not_the_tree(demo, opener):
    """A terminal hands a fast typist's (or a paste's) keys over in one read: all of them were
    queued to the tree before `/` opened the box, and ran there as commands (`t` the tokens
    column, `s` the summary prompt, `m` a label)."""
    app = make_app(demo)
    async with app.run_test(size=(80, 24)) as pilot:
        await settle(app, pilot)
        before = demo.read_bytes()
        burst = [opener, *((c, c) for c in "timesz"), ("slash", "/"), ("m", "m"), ("ampersand", "&")]
        for key, character in burst:
            app.post_message(events.Key(key, character))
        await pilot.pause(0.3)
        box = app.browser.query_one("#search", Input)
        assert app.focused is box and box.value == "timesz/m&"  # `/` and `&` in the box: text
        assert app.screen is app.browser and not tree(app).show_sizes  # no command ran
        await pilot.press("escape")
        assert demo.read_bytes() == before


async def test_enter_in_a_burst_searches_the_words_typed_before_it(demo):
    """`/`, a word, Enter, `n` in one read (a busy app queues a typist's keys): Enter ran when
    it reached the app, after the `n` had been typed into the box, and the search was for
    "flakyn" (QA's burst in the label prompt; the find bar's Enter is an Input binding too)."""
    app = make_app(demo)
    async with app.run_test(size=(120, 30)) as pilot:
        await settle(app, pilot)
        burst = [("slash", "/"), *((c, c) for c in "flaky"), ("enter", "\r"), ("n", "n")]
        for key, character in burst:
            app.post_message(events.Key(key, character))
        await settle(app, pilot)
        assert app.browser._query is not None and app.browser._query.source == "flaky"
        assert app.browser._matches and app.focused is tree(app)


def footer_keys(app) -> list[tuple[str, str]]:
    return [(w.key, w.description) for w in app.screen.query_one("Footer").query("FooterKey")]


async def test_the_footer_says_what_enter_and_esc_do_in_the_search_box(demo):
    """While typing, the footer showed `/ Find` alone: the only key the box did not take, and
    typing it there writes a slash. Esc in the box closes it and nothing else."""
    app = make_app(demo)
    async with app.run_test(size=(80, 24)) as pilot:
        await search(app, pilot, "slash", "conftest")
        assert len(app.browser._matches) == 3
        await pilot.press("slash", *"a/b")
        await settle(app, pilot)
        assert app.browser.query_one("#search", Input).value == "a/b"
        assert footer_keys(app) == [("enter", "Find"), ("escape", "Close")]
        await pilot.press("escape")  # the box closes; the highlights stay for the next Esc
        await settle(app, pilot)
        assert not app.browser.query_one("#search").display
        assert len(app.browser._matches) == 3
        assert ("slash", "Find") in footer_keys(app)
        await pilot.press("ampersand")
        await settle(app, pilot)
        assert footer_keys(app) == [("enter", "Filter"), ("escape", "Close")]
        await pilot.press(*"conftest", "enter")
        await settle(app, pilot)
        assert tree(app).restrict is not None


async def test_words_are_anded_and_phrases_match_literally(large):
    app = make_app(large)
    async with app.run_test(size=(120, 40)) as pilot:
        await search(app, pilot, "ampersand", "cyan thinkingMedium")
        both = set(app.browser._matches)
        await pilot.press("escape")
        # (a phrase that is in the file: the one here was not, and the check passed only on
        # the first search's matches, which the second used to leave behind)
        await search(app, pilot, "ampersand", '"cyan (#00d7ff) - prominent"')
        phrase = set(app.browser._matches)
        assert phrase and phrase <= both


async def test_an_invalid_expression_is_a_message_under_the_box(large):
    app = make_app(large)
    async with app.run_test(size=(80, 24)) as pilot:
        await pilot.press("slash", *"re:(unclosed", "enter")
        await pilot.pause()
        status = app.browser.query_one("#search-status")
        message = str(status.render())
        assert status.display and "missing )" in message and "\n" not in message.strip()
        assert app.browser.query_one("#search").display  # still open, to fix the expression
        await pilot.press("escape")
        assert not app.browser.query_one("#search").display and app.is_running


async def test_find_then_next_on_tool_rows_drawn_as_calls(large):
    app = make_app(large)
    async with app.run_test(size=(160, 50)) as pilot:
        await pilot.press("5")  # everything
        await search(app, pilot, "slash", "re:^\\[?read")
        assert app.browser._matches
        assert "for 're:^\\[?read' (n / N)" in status(app)  # as typed: one backslash, not repr's two
        assert any(r.lstrip("▌ ").startswith(("↳ [read: ", "↳ [read:")) or "[read: " in r for r in rows(app))


@pytest.mark.parametrize(
    ("width", "said"),
    [
        (160, "2 matches for 'Asia/Tokyo' (n / N) · 2 filtered out (5 shows all) · none below: from the top"),
        (74, "2 matches for 'Asia/Tokyo' · 2 filtered out · none below: from the top"),
        (60, "2 matches for 'Asia/Tokyo' · 2 filtered out · from the top"),
        (50, "2 matches for 'Asia/Tokyo' · from the top"),
    ],
)
async def test_the_find_status_gives_way_from_its_keys_not_from_where_the_cursor_went(demo, width, said):
    """With 170 matches at 80 columns the end was still cut: where the cursor went (QA)."""
    app = make_app(demo)
    async with app.run_test(size=(width, 40)) as pilot:
        await search(app, pilot, "slash", "Asia/Tokyo")
        assert status(app) == said


async def test_find_lands_on_tool_rows_by_the_call_they_show_under_the_default_filter(demo):
    """The default filter hides the assistant turns that only call tools; their results'
    rows show the calls (`[bash: TZ=Asia/Tokyo …]`), so those rows are what find lands on."""
    app = make_app(demo)
    async with app.run_test(size=(80, 24)) as pilot:
        await search(app, pilot, "slash", "Asia/Tokyo")
        # two rows, and the two calling turns the filter hides are counted, not left unsaid
        assert len(app.browser._match_rows()) == 2 and len(app.browser._matches) == 4
        # from the leaf; the keys that show the hidden ones give way at 80 columns, where the
        # end was cut: where the cursor went (QA)
        assert status(app) == "2 matches for 'Asia/Tokyo' (n / N) · 2 filtered out · none below: from the top"
        row = tree(app).cursor_row
        assert "[bash: TZ=Asia/Tokyo" in rows(app)[row - int(tree(app).scroll_offset.y)]


async def test_esc_stops_a_slow_search(tmp_path):
    from harness.retries import write_retries

    write_retries(tmp_path / "r.jsonl", retries=3000, nested=10).close()
    app = make_app(tmp_path / "r.jsonl")
    async with app.run_test(size=(80, 24)) as pilot:
        await settle(app, pilot)
        before = len(tree(app).outline)
        await pilot.press("ampersand", *"re:(a|b)*c+d", "enter", "escape")
        await settle(app, pilot)
        assert len(tree(app).outline) == before and tree(app).restrict is None
        assert not [w for w in app.workers if w.group == "search" and not w.is_finished]


async def test_the_tokens_column_shows_the_previews_numbers(large):
    from sessiontree.context import estimate_context_tokens
    from sessiontree.sizes import short_tokens

    app = make_app(large)
    async with app.run_test(size=(120, 40)) as pilot:
        await pilot.press("t")
        await settle(app, pilot)
        await pilot.pause(0.2)
        await settle(app, pilot)
        leaf_row = rows(app)[tree(app).cursor_row - int(tree(app).scroll_offset.y)]
        expected = estimate_context_tokens(app.session.build_context().messages)
        assert short_tokens(expected) in leaf_row
        assert not any(r.rstrip().endswith("      …") or "      …       " in r for r in rows(app))
        await pilot.press("t")
        assert short_tokens(expected) not in rows(app)[tree(app).cursor_row - int(tree(app).scroll_offset.y)]


async def test_a_search_whose_expression_backtracks_without_end_gives_up_and_keys_still_work(tmp_path):
    """`re:(\\w+\\s?)+!$` on Pi's large session froze the app for good under `re`: no key,
    not even q, and not SIGTERM. The expression now gives up on the first entry it is stuck on,
    and the tree answers keys meanwhile."""
    path = tmp_path / "s.jsonl"
    with Session(JsonlStorage.create(path, cwd="/p")) as s:
        for k in range(30):
            s.append_message(U(f"question {k}"))
        s.append_message(U("a" * 60 + "b"))
    app = make_app(path)
    async with app.run_test(size=(100, 30)) as pilot:
        await settle(app, pilot)
        await pilot.press("slash", *"re:(a|aa)+c", "enter")
        await pilot.pause(0.2)
        row = tree(app).cursor_row
        await pilot.press("k")  # answered while the search runs
        await pilot.pause(0.1)
        assert tree(app).cursor_row == row - 1
        for _ in range(40):
            await pilot.pause(0.1)
            if not [w for w in app.workers if w.group == "search" and not w.is_finished]:
                break
        await settle(app, pilot)
        said = [n.message for n in app._notifications]
        assert any("gave up after" in m and "re:(a|aa)+c" in m for m in said), said


async def test_a_new_search_drops_the_last_ones_matches_and_line(large):
    """The last search's "N matches for …" stood through the next search, and after it when it
    found nothing, where `n` then did nothing (QA)."""
    app = make_app(large)
    async with app.run_test(size=(120, 40)) as pilot:
        await settle(app, pilot)
        await search(app, pilot, "slash", "theme")
        assert app.browser._matches and "matches for 'theme'" in status(app)
        await search(app, pilot, "slash", "zzzqqq")
        assert app.browser._matches == [] and "theme" not in status(app)
        assert "match " not in str(app.browser.query_one("SessionHeader").render())


async def test_thousands_of_matches_are_counted_and_stepped_through_in_row_order(tmp_path):
    # Past `MANY_MATCHES` the rows of the matches are found with array operations: 527,000 of
    # them took 1.1 s in the loop, on the UI thread, on every key that changed the rows.
    from sessiontree import outline as outline_module

    path = tmp_path / "many.jsonl"
    with Session(JsonlStorage.create(path, cwd="/p")) as s:
        for k in range(2600):
            s.append_message(U(f"needle {k}"))
            s.append_message(A(f"needle answer {k}"))
            if k % 100 == 99:  # a retry now and then: rows and entries part ways
                s.move_to(s.tree.ids[s.position(s.leaf_id) - 3])
    app = make_app(path)
    async with app.run_test(size=(120, 40)) as pilot:
        await settle(app, pilot)
        view = tree(app)
        await search(app, pilot, "/", "needle")
        found = app.browser._matches
        assert len(found) > outline_module.MANY_MATCHES
        by_loop = sorted(view.outline.row_of[i] for i in found if view.outline.row_of[i] >= 0)
        await pilot.press("g", "n", "n")
        assert by_loop[0] == 0 and view.cursor_row == by_loop[2]
        assert f"match 3/{len(by_loop):,}" in app.browser.sub_title
        # `&` keeps the matches and the entries that place them, and nothing else
        await pilot.press("escape")
        await search(app, pilot, "&", "needle")
        found = app.browser._matches
        parent = app.session.tree.parent
        placed = set(found)
        for i in found:
            while parent[i] >= 0:
                i = parent[i]
                placed.add(i)
        assert view.restrict is not None
        assert {i for i, on in enumerate(view.restrict) if on} == placed
        assert f"/{len(found):,}" in app.browser.sub_title


async def test_the_filter_after_the_same_find_decodes_nothing_again(large, monkeypatch):
    """`&` right after `/` with the same words: the find looked at every row already, and on a
    1M-entry file `&` repeated its 3-4 s (QA). It now only narrows the tree."""
    from sessiontree import finding

    decoded: list[int] = []
    real = finding.haystack
    monkeypatch.setattr(finding, "haystack", lambda s, i, *rest: decoded.append(i) or real(s, i, *rest))
    app = make_app(large)
    async with app.run_test(size=(120, 40)) as pilot:
        await settle(app, pilot)
        full = len(tree(app).outline)
        await search(app, pilot, "slash", "thinkingMedium cyan")
        found = list(app.browser._matches)
        assert found and decoded
        decoded.clear()
        await search(app, pilot, "ampersand", "thinkingMedium cyan")
        assert app.browser._matches == found and not decoded
        assert 0 < len(tree(app).outline) < full
        assert tree(app).current_position() in found


@pytest.fixture
def slow_search(tmp_path, monkeypatch):
    """A session of 60 turns, every third saying "flaky", and a search that stops after its
    first 5 decodes until the test lets it go on (`go`)."""
    import threading

    from sessiontree import finding
    from sessiontree.tui import search as search_module

    path = tmp_path / "s.jsonl"
    with Session(JsonlStorage.create(path, cwd="/p")) as s:
        for n in range(60):
            s.append_message(U(f"flaky question {n}" if n % 3 == 0 else f"question {n}"))
    go, decoded = threading.Event(), []
    real = finding.haystack

    def haystack(session, i, *rest):
        decoded.append(i)
        if len(decoded) > 5:
            go.wait(10)
        return real(session, i, *rest)

    monkeypatch.setattr(finding, "haystack", haystack)
    monkeypatch.setattr(search_module, "PROGRESS_EVERY", 1)
    monkeypatch.setattr(search_module, "PARTIAL_EVERY", 0.0)
    go.decoded = decoded  # type: ignore[attr-defined]  # what the searches decoded, in order
    return path, go


async def find_slowly(app, pilot) -> None:
    """From the top, find "flaky" (the `slow_search` session), until its first matches show."""
    await settle(app, pilot)
    await pilot.press("home", "slash", *"flaky", "enter")
    for _ in range(200):
        if app.browser._matches:
            return
        await pilot.pause(0.01)
    raise AssertionError("no matches shown while the search ran")


async def test_a_running_find_shows_its_matches_so_far(slow_search):
    """The matches show as they are found, the cursor on the first: on a 1M-entry file a
    common word took ~17 s to decode, with nothing to see until its end (QA)."""
    path, go = slow_search
    app = make_app(path)
    async with app.run_test(size=(120, 30)) as pilot:
        await find_slowly(app, pilot)
        so_far = list(app.browser._matches)
        assert 0 < len(so_far) < 20
        assert tree(app).current_position() == min(so_far)  # the first match from the top
        assert any(w.group == "search" and not w.is_finished for w in app.workers)  # still running
        # counts that will grow, and a place among them that may: said as such (QA: "match
        # 1/1,534" was the 311th of 356,369)
        assert f"match 1/{len(so_far)} so far" in app.browser.sub_title
        await pilot.press("n")
        assert status(app) == f"Match 2/{len(so_far)} so far"
        go.set()
        await settle(app, pilot)
        assert len(app.browser._matches) == 20
        assert "20 matches for 'flaky'" in status(app) and "so far" not in app.browser.sub_title
        assert "match 2/20 ·" in app.browser.sub_title


async def test_a_filter_asked_while_its_find_runs_narrows_the_tree_when_it_ends(slow_search):
    """`&` during a find of a common word threw the find away and scanned the file again: on
    a 1M-entry file the tree stayed whole 25 s more (QA). It waits for the find, then narrows
    from its verdicts without decoding an entry again."""
    path, go = slow_search
    app = make_app(path)
    async with app.run_test(size=(120, 30)) as pilot:
        await find_slowly(app, pilot)
        await pilot.press("ampersand", "enter")  # the box holds the find's words
        await pilot.pause()
        assert status(app) == "The tree narrows to the matches of 'flaky' once the search ends"
        assert any(w.group == "search" and not w.is_finished for w in app.workers)  # the find goes on
        go.set()
        await settle(app, pilot)
        assert tree(app).restrict is not None
        assert status(app).startswith("20 matches shown")
        assert len(go.decoded) == len(set(go.decoded))  # nothing decoded twice: no second scan


async def test_entries_arriving_while_a_find_runs_are_searched_when_it_ends(slow_search):
    path, go = slow_search
    app = make_app(path)
    async with app.run_test(size=(120, 30)) as pilot:
        await find_slowly(app, pilot)
        late = "1a7e0001"  # written as Pi writes (no lock), after the find began
        entry = {
            "type": "message",
            "id": late,
            "parentId": app.session.leaf_id,
            "timestamp": "2026-03-14T10:00:00Z",
        }
        entry["message"] = {"role": "user", "content": "a flaky late question", "timestamp": 1}
        with open(path, "ab") as f:
            f.write(json.dumps(entry).encode() + b"\n")
        for _ in range(50):
            await pilot.pause(0.1)
            if late in app.session.tree.pos:
                break
        go.set()
        await settle(app, pilot)
        for _ in range(50):  # the search of the arrivals, a worker after the find
            if len(app.browser._matches) == 21:
                break
            await pilot.pause(0.1)
        assert app.browser._matches[-1] == app.session.tree.pos[late] and len(app.browser._matches) == 21


async def test_a_find_leaves_a_cursor_moved_while_it_ran_where_it_is(slow_search):
    path, go = slow_search
    app = make_app(path)
    async with app.run_test(size=(120, 30)) as pilot:
        await find_slowly(app, pilot)
        await pilot.press("end")  # the reader goes elsewhere while it runs
        where = tree(app).current_position()
        go.set()
        await settle(app, pilot)
        assert len(app.browser._matches) == 20 and tree(app).current_position() == where


async def test_esc_stops_a_find_and_keeps_the_matches_it_showed(slow_search):
    path, go = slow_search
    app = make_app(path)
    async with app.run_test(size=(120, 30)) as pilot:
        await find_slowly(app, pilot)
        so_far = list(app.browser._matches)
        await pilot.press("escape")
        go.set()
        await settle(app, pilot)
        assert app.browser._matches == so_far  # a later delivery of the stopped search adds none
        assert status(app) == f"Search stopped: {len(so_far)} matches so far (n / N)"
        await pilot.press("n")
        assert tree(app).current_position() == sorted(so_far)[1]
        assert status(app) == f"Match 2/{len(so_far)} so far"  # stopped: all it will count


async def test_esc_on_a_box_opened_over_a_running_find_closes_only_the_box(slow_search):
    """`&` (or `/`) then Esc while a find ran stopped the find too, and its progress line
    stayed (QA): one Esc at a time, the box goes and the find goes on."""
    path, go = slow_search
    app = make_app(path)
    async with app.run_test(size=(120, 30)) as pilot:
        await find_slowly(app, pilot)
        running = [w for w in app.browser.workers if w.group == "search" and not w.is_finished]
        await pilot.press("ampersand")
        assert app.browser.query_one("#search").display
        await pilot.press("escape")
        assert not app.browser.query_one("#search").display
        assert running and not running[0].is_cancelled
        go.set()
        await settle(app, pilot)
        assert len(app.browser._matches) == 20  # every "flaky" turn: the find ran to its end
        assert not app.browser.query_one("#search-status").display


async def test_a_stopped_finds_progress_sent_as_it_stopped_is_not_shown(slow_search):
    """The find's thread waits for each progress line to be shown: one on its way as Esc
    stopped the find came after Esc had cleared the line, and stayed (QA)."""
    path, go = slow_search
    app = make_app(path)
    async with app.run_test(size=(120, 30)) as pilot:
        await find_slowly(app, pilot)
        worker = next(w for w in app.browser.workers if w.group == "search" and not w.is_finished)
        await pilot.press("escape")
        app.browser._progress(worker, "searching… 50% of 60 entries to check · 3 found")  # as delivered
        go.set()
        await settle(app, pilot)
        assert not app.browser.query_one("#search-status").display


async def test_esc_keeps_every_match_found_so_far_and_says_how_many_are_shown(slow_search, monkeypatch):
    """The progress line counted what the find had found, Esc what it had shown last (those
    show at growing intervals), and `n` the rows shown: 74,793, 56,315 and 4,735 (QA)."""
    from sessiontree.tui import search as search_module

    monkeypatch.setattr(search_module, "PARTIAL_EVERY", 1000.0)  # nothing shown before Esc
    path, go = slow_search
    app = make_app(path)
    async with app.run_test(size=(120, 30)) as pilot:
        await settle(app, pilot)
        await pilot.press("home", "slash", *"flaky", "enter")
        await until(pilot, lambda: app.browser._so_far is not None and len(app.browser._so_far[1]) >= 2)
        found = list(app.browser._so_far[1])
        assert app.browser._matches == []
        await pilot.press("4")  # labeled only: no match has a row
        await pilot.press("escape")
        go.set()
        await settle(app, pilot)
        assert app.browser._matches == found
        # as a finished find says it: none shown, and what hides them (QA)
        hidden = f"{len(found)} filtered out (5 shows all)"
        assert status(app) == f"Search stopped: no match shown so far · {hidden}"
        await pilot.press("1")
        await settle(app, pilot)
        await pilot.press("n")
        assert re.fullmatch(rf"Match \d/{len(found)} so far", status(app))  # every match has a row again


def marked(app) -> list[str]:
    """The texts the preview draws in its match style, over the rows on screen."""
    from sessiontree.tui.preview import PreviewView

    view = app.browser.query_one(PreviewView)
    mark = view._style("preview--match").bgcolor
    found = []
    for y in range(view.scrollable_content_region.height):
        found += [s.text for s in view.render_line(y) if s.style is not None and s.style.bgcolor == mark]
    return found


async def test_the_preview_marks_the_words_found_until_esc(tmp_path):
    """The tree shows which entries match a find; the preview showed their text unmarked, so in
    a long answer the reader hunted for the word. Its words are marked there (inside Markdown's
    own styles too) while the matches stand, and go with them."""
    path = tmp_path / "s.jsonl"
    with Session(JsonlStorage.create(path, cwd="/p")) as s:
        s.append_message(U("Fix the flaky date parsing"))
        s.append_message(A("The **date** parser drops the\tparsing offset; see `date_util`."))
    app = make_app(path)
    async with app.run_test(size=(120, 30)) as pilot:
        await settle(app, pilot)
        assert marked(app) == []
        await search(app, pilot, "slash", '"date parsing"')
        await settle(app, pilot)
        assert len(app.browser._matches) == 1 and marked(app) == ["date parsing"]
        await search(app, pilot, "slash", '"parsing offset"')  # a tab between them in the file
        await settle(app, pilot)
        assert marked(app) == ["parsing offset"]  # drawn with a space: any whitespace matches
        await search(app, pilot, "slash", "DATE")
        await settle(app, pilot)
        assert marked(app) == ["date", "date", "date"]  # the second in bold, the third in code
        await pilot.press("escape")
        await settle(app, pilot)
        assert marked(app) == [] and app.browser._matches == []


async def test_a_find_says_what_hides_its_matches_and_n_says_why_it_does_nothing(demo):
    """A match in a folded branch or under a filter that hides it was left out unsaid: "No
    entry matches" for text the preview showed (QA). They are counted, with the key that shows
    them; the matches follow the filter; `n` without a search, or with every match hidden, says
    so; words that look like a regular expression and find nothing point to `re:`."""
    app = make_app(demo)
    async with app.run_test(size=(120, 30)) as pilot:
        await settle(app, pilot)
        await pilot.press("n")
        assert status(app) == "No search to step through: / finds"
        await pilot.press("a", "z")  # side branches folded: "All 14 tests pass" is in one
        await settle(app, pilot)
        await search(app, pilot, "slash", '"All 14 tests pass"')
        assert status(app) == "No shown entry matches '\"All 14 tests pass\"': 1 folded (z)"
        await pilot.press("n")
        assert status(app) == "No match is shown: 1 folded (z)"
        await pilot.press("z")  # unfolded: the same matches, now a row
        await settle(app, pilot)
        assert len(app.browser._match_rows()) == 1 and "match" in app.browser.sub_title
        await pilot.press("3")  # user messages only
        await search(app, pilot, "slash", '"Found it"')
        assert status(app) == "No shown entry matches '\"Found it\"': 1 filtered out (5 shows all)"
        await pilot.press("5")  # the matches follow the filter: no search again
        await settle(app, pilot)
        assert len(app.browser._match_rows()) == 1
        await pilot.press("n")
        assert status(app) == "Match 1/1"
        await search(app, pilot, "slash", "tok.*yo")
        assert status(app) == "No entry matches 'tok.*yo' (as a regular expression: re:tok.*yo)"


async def test_esc_after_a_search_filter_keeps_the_entry_the_reader_moved_to(demo):
    """Esc put the cursor back where it was before `&` even after the reader had moved among
    the matches, or moved the leaf to one (QA); untouched, it still goes back."""
    app = make_app(demo)
    async with app.run_test(size=(120, 30)) as pilot:
        await settle(app, pilot)
        before = cursor_id(app)
        await search(app, pilot, "ampersand", "conftest")
        assert status(app) == "3 matches shown · Esc restores the tree"
        assert len(tree(app).outline) == 3
        await pilot.press("escape")
        await settle(app, pilot)
        assert cursor_id(app) == before  # untouched: back where it was
        await search(app, pilot, "ampersand", "conftest")
        await pilot.press("n")
        chosen = cursor_id(app)
        assert chosen != before
        await pilot.press("escape")
        await settle(app, pilot)
        assert tree(app).restrict is None and cursor_id(app) == chosen


async def test_a_match_past_a_cut_body_is_said_and_marked_once_expanded(demo):
    """`/"1 failed"` landed on a tool result whose preview ended "… 4 more lines": the match
    was out of sight in the row and the preview alike (QA). The marker says it is there; `e`
    shows it, marked."""
    from sessiontree.tui.preview import PreviewView

    app = make_app(demo)
    async with app.run_test(size=(80, 24)) as pilot:
        await settle(app, pilot)
        await search(app, pilot, "slash", '"1 failed"')
        await settle(app, pilot)
        text = app.browser.query_one(PreviewView).plain_text()
        assert "more lines, the match among them  (e: expand" in text
        await pilot.press("e")
        await settle(app, pilot)
        view = app.browser.query_one(PreviewView)
        assert "the match among them" not in view.plain_text()
        rows_with = [k for k, row in enumerate(view.rows) if "1 failed" in "".join(t for t, _ in row[0])]
        assert rows_with
        view.scroll_to(0, rows_with[0], animate=False, immediate=True)
        await settle(app, pilot)
        assert "1 failed" in marked(app)
        await pilot.press("escape")  # the highlights go, and the note with them
        await pilot.press("e")
        await settle(app, pilot)
        assert "more lines  (e: expand" in app.browser.query_one(PreviewView).plain_text()


async def test_after_a_search_filter_the_matches_follow_the_filter_and_the_header_follows_folds(demo):
    """`&` kept only the matches its filter showed: after Esc, "5" left `n` stepping through 6
    of 9 (QA). `z` unfolding the only match left the header saying "matches hidden", and `:`
    switching to "all" left it naming the old filter (QA)."""
    app = make_app(demo)
    async with app.run_test(size=(120, 30)) as pilot:
        await settle(app, pilot)
        await search(app, pilot, "slash", "pytest")
        everywhere = len(app.browser._matches)
        shown = len(app.browser._match_rows())
        assert everywhere > shown
        await search(app, pilot, "ampersand", "pytest")
        assert status(app).endswith(
            f"shown · {everywhere - shown} filtered out (5 shows all) · Esc restores the tree"
        )
        await pilot.press("escape")
        await pilot.press("5")
        await settle(app, pilot)
        assert len(app.browser._match_rows()) == everywhere
        await pilot.press("escape", "1", "z")  # highlights gone; side branches folded
        await settle(app, pilot)
        await search(app, pilot, "slash", '"All 14 tests pass"')
        assert "matches hidden" in app.browser.sub_title
        await pilot.press("z")
        await settle(app, pilot)
        assert "matches hidden" not in app.browser.sub_title and "1 match" in app.browser.sub_title
        await pilot.press("3")
        await settle(app, pilot)
        assert "filter user-only" in app.browser.sub_title
        await pilot.press("colon", *"3a7c1b4a", "enter")  # an assistant entry: to "all"
        await settle(app, pilot)
        assert "filter all" in app.browser.sub_title and "user-only" not in app.browser.sub_title


async def test_a_on_a_leaf_the_filter_hides_says_where_the_cursor_is(demo):
    """Under user-only, `a` put the cursor on the row the leaf is drawn under and said "On the
    active leaf" (QA)."""
    app = make_app(demo)
    async with app.run_test(size=(120, 30)) as pilot:
        await settle(app, pilot)
        await pilot.press("3", "g", "a")
        await settle(app, pilot)
        leaf = app.session.leaf_id
        kind = app.session.tree.type_name(app.session.tree.pos[leaf])
        hidden = f"a {kind} entry the filter hides (5 shows it)"
        assert status(app) == f"On the row of the active leaf {leaf}, {hidden}"


@pytest.mark.parametrize("key", ["slash", "ampersand"])
async def test_entries_live_follow_brings_in_join_the_search_in_effect(demo, key):
    """A find's count, `n`/`N` and `&` left out the entries live follow brought in: a new row
    holding the word, and "match 4/4" wrapped over it (QA). Under `&`, an arrival that does not
    match is not shown."""
    app = make_app(demo)
    async with app.run_test(size=(120, 30)) as pilot:
        await settle(app, pilot)
        await search(app, pilot, key, "conftest")
        assert len(app.browser._matches) == 3
        leaf = app.session.leaf_id

        def record(eid: str, parent: str, text: str) -> bytes:
            message = {"role": "user", "content": text, "timestamp": 1}
            entry = {
                "type": "message",
                "id": eid,
                "parentId": parent,
                "timestamp": "2026-03-14T10:00:00.000Z",
            }
            return json.dumps({**entry, "message": message}).encode() + b"\n"

        with open(demo, "ab") as f:  # Pi (no lock) appends while we browse
            f.write(record("feed0001", leaf, "the conftest again"))
            f.write(record("feed0002", "feed0001", "other words"))
        for _ in range(50):
            await pilot.pause(0.1)
            if len(app.browser._matches) == 4:
                break
        await settle(app, pilot)
        new = app.session.tree.pos["feed0001"]
        assert app.browser._matches[-1] == new and len(app.browser._matches) == 4
        assert "4 matches" in app.browser.sub_title or "/4" in app.browser.sub_title
        shown = {tree(app).outline.rows_pos[r] for r in range(len(tree(app).outline))}
        if key == "ampersand":
            assert new in shown and app.session.tree.pos["feed0002"] not in shown and len(shown) == 4
            # the count `&` said follows (it stayed at 3 beside the header's "match 4/4"; QA)
            assert status(app).startswith("4 matches shown") and status(app).endswith("Esc restores the tree")
        tree(app).set_cursor(tree(app).outline.row_for(app.browser._matches[0]))
        await pilot.press("N")  # back over the first: the last match is the new entry
        assert cursor_id(app) == "feed0001"


async def test_a_find_from_below_its_last_match_says_it_went_round(demo):
    """From the leaf at the bottom, `/` landed on "match 1/3" without a word of going round,
    which `n` says (QA)."""
    app = make_app(demo)
    async with app.run_test(size=(120, 30)) as pilot:
        await settle(app, pilot)
        await pilot.press("G")
        await search(app, pilot, "slash", "conftest")
        assert status(app) == "3 matches for 'conftest' (n / N) · none below: from the top"
        assert "match 1/3" in app.browser.sub_title
        await pilot.press("g")
        await search(app, pilot, "slash", "conftest")
        assert status(app) == "3 matches for 'conftest' (n / N)"


async def test_a_filter_key_under_the_search_view_shows_the_matches_it_shows(demo):
    """Under `&`, "10 matches shown · 2 filtered out (5 shows all)": 5 still showed the 10, the view
    keeping the matches of the filter it was made under (QA). `h` there sent the user to `f`,
    which changes nothing in that view."""
    app = make_app(demo)
    async with app.run_test(size=(120, 30)) as pilot:
        await settle(app, pilot)
        await search(app, pilot, "slash", "UTC")
        everywhere = len(app.browser._matches)
        await search(app, pilot, "ampersand", "UTC")
        shown = len(tree(app).outline)
        assert shown < everywhere and status(app).endswith(
            f"{everywhere - shown} filtered out (5 shows all) · Esc restores the tree"
        )
        await pilot.press("5")
        await settle(app, pilot)
        assert (
            len(tree(app).outline) == everywhere and status(app) == f"Filter: all · {everywhere} rows shown"
        )
        await pilot.press("1")
        await settle(app, pilot)
        assert len(tree(app).outline) == shown
        await pilot.press("5", "g", "h")  # the first match's parent is no match
        assert "not among the matches shown (Esc shows the tree)" in status(app), status(app)


async def test_back_onto_a_leaf_in_a_fold_says_the_fold_hides_it(demo):
    """`b` said the leaf was "a message entry the filter hides (5 shows it)" when a fold hid
    it, and 5 changed nothing (QA)."""
    app = make_app(demo)
    async with app.run_test(size=(120, 30)) as pilot:
        await settle(app, pilot)
        leaf = app.session.leaf_id
        await pilot.press("g", "bracketright", "space")  # the first fork folded: the leaf in it
        await settle(app, pilot)
        assert "the leaf is in the fold" in status(app), status(app)
        await pilot.press("enter")  # the leaf moves to the fold's row
        await settle(app, pilot)
        await pilot.press("b")
        await settle(app, pilot)
        assert app.session.leaf_id == leaf
        said = status(app)
        assert said.endswith("a message entry folded away (space on its fold opens it)"), said
        assert "filter" not in said


async def test_an_empty_search_and_a_cancelled_label_say_so(demo):
    """`&` with nothing typed, and Esc in the label prompt, left the status line saying what it
    said before ("No search to step through: / finds"; QA)."""
    app = make_app(demo)
    async with app.run_test(size=(120, 30)) as pilot:
        await settle(app, pilot)
        await pilot.press("n")
        assert status(app).startswith("No search to step through")
        await search(app, pilot, "ampersand", "")
        assert status(app) == "Nothing to search for: the search was empty"
        await search(app, pilot, "slash", "UTC")
        await pilot.press("slash", "backspace", "enter")  # the last query, selected, deleted
        await settle(app, pilot)
        assert status(app) == "Search cleared" and not app.browser._matches
        before = app.session.entry_count()
        await pilot.press("m", *"x", "escape")
        await settle(app, pilot)
        assert status(app) == f"Label left as it was on {cursor_id(app)}: nothing was written"
        assert app.session.entry_count() == before


async def test_z_after_a_fold_of_ones_own_folds_the_side_branches(demo):
    """`z` after one `space` unfolded that fold ("Unfolded every branch") rather than folding
    the side branches, as help says it does (QA). A second `z` unfolds everything."""
    app = make_app(demo)
    async with app.run_test(size=(120, 30)) as pilot:
        await settle(app, pilot)
        sides = list(tree(app).outline.side_folds)
        assert len(sides) >= 2
        await put_cursor(app, pilot, app.session.tree.ids[sides[-1]])
        await pilot.press("space")  # one side branch folded by hand
        await settle(app, pilot)
        assert list(tree(app).folded) == [sides[-1]]
        await pilot.press("z")
        await settle(app, pilot)
        assert status(app).startswith(f"Folded {len(sides) - 1} side branch"), status(app)
        assert list(tree(app).folded) == sides
        await pilot.press("z")
        await settle(app, pilot)
        assert status(app).startswith("Unfolded every branch") and not tree(app).folded


async def test_keys_in_a_view_with_no_row_say_what_is_shown(tmp_path):
    """Under labeled-only with no label, `]` said "No fork below this row under this filter"
    and `a` "On the row of the active leaf …" of rows that were not there; `h` and space said
    nothing (QA)."""
    s = create_session("/p", path=tmp_path / "s.jsonl")
    first = s.append_message(U("one"))
    s.append_message(A("two"))
    s.move_to(first)
    s.append_message(U("three"))
    s.close()
    app = make_app(tmp_path / "s.jsonl")
    async with app.run_test(size=(120, 30)) as pilot:
        await settle(app, pilot)
        await pilot.press("4")
        await settle(app, pilot)
        empty = "Nothing is shown under the labeled-only filter: 1 shows the default one"
        assert not len(tree(app).outline) and status(app) == empty
        for key in ("bracketright", "bracketleft", "a", "h", "space", "z"):
            await pilot.press("1", "4")  # a status of another kind in between
            await pilot.press(key)
            await settle(app, pilot)
            assert status(app) == empty, (key, status(app))
