"""The byte scan behind search never loses a match: on real Pi sessions and on sessions full of
what could trip it (escapes, case that Unicode folds, words the display adds, labels, custom
data, tool calls), `finding.find` returns exactly the entries a decode of every entry finds."""

from __future__ import annotations

import itertools
import random
import re
import shutil

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from helpers import PI_FIXTURES, A, U, examples
from sessiontree import Session, SqliteStorage, finding, open_session
from sessiontree.finding import Remembered, find, haystack, required_pieces, scan_needle
from sessiontree.opening import create_session, upgrade_session
from sessiontree.query import compile_query
from sessiontree.storage.base import CONTAINS, ESCAPED
from sessiontree.storage.index import TOOL_RESULT
from sessiontree.storage.jsonl import storage as jsonl_storage


def decode_all(session, query) -> list[int]:
    return [i for i in range(len(session.tree)) if query.matches(haystack(session, i))]


def test_real_sessions_queried_with_their_own_words(tmp_path):
    rng = random.Random(11)
    for name in ("large-session.jsonl", "before-compaction.jsonl"):
        path = tmp_path / name
        shutil.copyfile(PI_FIXTURES / name, path)
        upgrade_session(path)  # Pi's older format is held in memory: nothing to scan there
        with open_session(path, read_only=True) as session:
            words = sorted(set(re.findall(r"[A-Za-z][A-Za-z_]{2,}", path.read_text())))
            queries = [rng.choice(words) for _ in range(25)]
            queries += [w.upper() for w in queries[:5]] + [
                f'"{a} {b}"' for a, b in itertools.pairwise(queries[:8])
            ]
            queries += ["re:fla[a-z]+", "branch summary", "(thinking)", "exit", "zqxjvw nothing"]
            scanned = 0
            for text in queries:
                query = compile_query(text)
                found = find(session, query, range(len(session.tree)))
                assert found is not None
                assert found.positions == decode_all(session, query), text
                scanned += found.scanned
            assert scanned > 20  # the scan did the work, not the fallback


TOKENS = [
    "flaky",
    "FLAKY",
    "fl\\u0061ky",  # a JSON escape of a letter, written as such in the line
    "\u212aelvin",  # KELVIN SIGN: matches "kelvin" ignoring case
    "kelvin",
    "\u017foft",  # LONG S: matches "soft"
    "soft",
    "\u0130nline",  # DOTTED CAPITAL I: matches "inline"
    "\u0131nline",  # DOTLESS I: matches "inline" too
    "\\u212Aelvin",  # the same letters as JSON escapes, upper- and lowercase hex
    "\\u017foft",
    "\\u0131NLINE",
    "pars\u0130ng",  # a lookalike inside a word
    'say "quoted"',
    "back\\\\slash",
    "two\\nlines",
    "tab\\there",
    "café",
    "exit",
    "summary",
    "markdown",
    "theme",
]


def _line(eid: str, parent: str | None, body: str) -> bytes:
    """A message line written by hand, so escapes stay as they are in the text."""
    parent_json = "null" if parent is None else f'"{parent}"'
    return (
        f'{{"type":"message","id":"{eid}","parentId":{parent_json},'
        f'"timestamp":"2026-12-03T10:00:00.000Z","message":{{"role":"user","content":"{body}","timestamp":1}}}}\n'
    ).encode()


def _with_lines(path, first: str, bodies: list[str]):
    """A session of a user message `first`, then one message line per body written by hand
    (so escapes stay as written), each the child of the one before."""
    session = create_session("/p", path=path)
    session.append_message(U(first))
    parent = session.leaf_id
    session.close()
    with open(path, "ab") as f:
        for n, body in enumerate(bodies):
            f.write(_line(f"e{n}", parent, body))
            parent = f"e{n}"
    return path


@settings(
    max_examples=examples(60), deadline=None, suppress_health_check=[HealthCheck.function_scoped_fixture]
)
@given(
    texts=st.lists(st.lists(st.sampled_from(TOKENS), min_size=1, max_size=4), min_size=3, max_size=12),
    queries=st.lists(
        st.lists(
            st.sampled_from(
                [
                    "flaky",
                    "kelvin",
                    "soft",
                    "inline",
                    "parsing",
                    "quoted",
                    "slash",
                    "lines",
                    "here",
                    "café",
                    "exit",
                    "summary",
                    "markdown theme",
                    '"two',
                    "branch summary",
                    "nlines",
                    "there",
                ]
            ),
            min_size=1,
            max_size=2,
        ),
        min_size=1,
        max_size=5,
    ),
    numpy_fold=st.booleans(),
)
def test_tricky_sessions_find_what_decoding_finds(tmp_path_factory, monkeypatch, texts, queries, numpy_fold):
    # a file this small is folded with `bytes.translate`, a big one with numpy: both are tried
    monkeypatch.setattr(jsonl_storage, "SCAN_NUMPY_MIN", 0 if numpy_fold else 1 << 40)
    path = tmp_path_factory.mktemp("find") / "s.jsonl"
    session = create_session("/p", path=path)
    first = session.append_message(U("start"))
    summary_at = session.append_message(A("an answer about markdown"))
    session.append_custom_entry("note", {"text": "flaky kelvin", "n": 1e5})
    session.append_label(first, "soft flaky label")
    session.append_message(
        {
            **A(""),
            "content": [
                {"type": "thinking", "thinking": "theme soft"},
                {
                    "type": "toolCall",
                    "id": "c1",
                    "name": "bash",
                    "arguments": {"command": "echo 'two\nlines'"},
                },
            ],
        }
    )
    session.move_to(first, summary="branch summary of markdown work")
    leaf = session.leaf_id
    session.close()
    with open(path, "ab") as f:
        parent = leaf
        for k, words in enumerate(texts):
            eid = f"t{k:06d}"
            f.write(_line(eid, parent, " ".join(words)))
            parent = eid
    assert summary_at
    with open_session(path, read_only=True) as session:
        for words in queries:
            query = compile_query(" ".join(words))
            found = find(session, query, range(len(session.tree)))
            assert found is not None
            assert found.positions == decode_all(session, query), words


def test_pieces_are_whole_words_but_those_the_display_adds_and_short_ones():
    assert required_pieces(compile_query("MarkdownTheme")) == [b"markdowntheme"]
    # i, k and s are scanned for: lines with the letters that also match them are decoded anyway
    assert scan_needle(compile_query("flaky test")) == b"flaky"
    assert required_pieces(compile_query("tests flaky")) == [b"flaky", b"tests"]
    assert scan_needle(compile_query("husky")) == b"husky"
    assert required_pieces(compile_query("mark summary")) == [b"mark"]  # "summary": a display word
    assert scan_needle(compile_query("branch summary")) is None  # both are display words
    assert scan_needle(compile_query("re:markdown")) is None
    assert scan_needle(compile_query("ox")) is None  # too short to scan for


def test_a_storage_without_bytes_decodes_every_entry(tmp_path):
    session = Session(SqliteStorage.create(tmp_path / "s.sqlite", cwd="/p"))
    session.append_message(U("flaky test"))
    session.append_message(A("not this one"))
    query = compile_query("flaky")
    found = find(session, query, range(len(session.tree)))
    assert found is not None and not found.scanned
    assert found.positions == [0] == decode_all(session, query)
    session.close()


def test_a_cancelled_search_returns_nothing(tmp_path):
    path = tmp_path / "s.jsonl"
    shutil.copyfile(PI_FIXTURES / "large-session.jsonl", path)
    upgrade_session(path)
    with open_session(path, read_only=True) as session:
        assert find(session, compile_query("theme"), range(len(session.tree)), cancelled=lambda: True) is None


def _turns(path, count: int) -> None:
    """A session of `count` user turns saying "flaky N", each a line of the same length."""
    with Session(jsonl_storage.JsonlStorage.create(path, cwd="/p")) as s:
        for n in range(count):
            s.append_message(U(f"flaky {n:04d}"))


def test_a_line_changed_on_disk_is_unreadable_and_the_others_of_its_batch_are_found(tmp_path):
    """Candidates are decoded a batch at a time (one read per stretch of lines); a line that
    fails to decode costs that entry, not the batch around it."""
    path = tmp_path / "s.jsonl"
    _turns(path, 700)
    with open_session(path, read_only=True) as session:
        bad = 300
        line = session.storage.raw_line(bad)
        with open(path, "r+b") as f:  # same length, no longer JSON: indexed whole, read broken
            f.seek(session.storage._lines.offsets[bad])
            f.write(b"#" + line[1:])
        found = find(session, compile_query("flaky"), range(len(session.tree)), scan=False)
        assert found is not None
        assert found.unreadable == [bad]
        assert found.positions == [i for i in range(len(session.tree)) if i != bad]


def test_a_session_closed_during_a_find_leaves_the_rest_unreadable(tmp_path):
    """The app leaving a session (its storage closed) while a find decodes: what is left comes
    out unreadable, where an error would end the find's thread with the app."""
    path = tmp_path / "s.jsonl"
    _turns(path, 1200)
    with open_session(path, read_only=True) as session:
        count = len(session.tree)

        def progress(done: int, total: int, matches: list[int]) -> None:
            if done == 600:
                session.close()

        found = find(session, compile_query("flaky"), range(count), scan=False, progress=progress, every=600)
        assert found is not None
        assert found.positions and found.positions == list(range(len(found.positions)))
        assert found.unreadable == list(range(len(found.positions), count))
        assert len(found.positions) >= 600


def test_the_scan_reports_its_progress_through_the_file(tmp_path, monkeypatch):
    """(bytes scanned, bytes to scan) after every block: what the app shows before the first
    entry is decoded, about a second per gigabyte."""
    monkeypatch.setattr(jsonl_storage, "SCAN_BLOCK", 64 << 10)
    path = tmp_path / "s.jsonl"
    shutil.copyfile(PI_FIXTURES / "large-session.jsonl", path)
    upgrade_session(path)
    seen: list[tuple[int, int]] = []
    with open_session(path, read_only=True) as session:
        query = compile_query("theme")
        found = find(session, query, range(len(session.tree)), scanning=lambda *a: seen.append(a))
        assert found is not None and found.scanned and found.positions == decode_all(session, query)
    size = path.stat().st_size
    assert len(seen) > 10 and {total for _, total in seen} == {size - 1}  # the last line's newline aside
    done = [d for d, _ in seen]
    assert done == sorted(set(done)) and done[-1] == size - 1


def test_a_query_searched_again_decodes_only_what_it_has_not_seen(tmp_path, monkeypatch):
    """`&` after `/`: the verdicts of the first search stand for the entries it looked at; the
    answer is the same as a search from scratch. Another query, or a label added (part of its
    entry's haystack), starts over."""
    path = tmp_path / "s.jsonl"
    session = create_session("/p", path=path)
    for n in range(40):
        session.append_message(U(f"flaky question {n}" if n % 3 else f"question {n}"))
        session.append_message(A(f"flaky answer {n}" if n % 4 else f"answer {n}"))
    decoded: list[int] = []
    real = finding.haystack
    monkeypatch.setattr(finding, "haystack", lambda s, i, *rest: decoded.append(i) or real(s, i, *rest))
    query = compile_query("flaky")
    remembered = Remembered()
    everything = range(len(session.tree))
    first = remembered.find(session, query, range(0, len(session.tree), 2))
    assert first is not None and first.positions == [i for i in decode_all(session, query) if i % 2 == 0]
    decoded.clear()
    again = remembered.find(session, query, everything)
    assert again is not None and again.positions == decode_all(session, query)
    assert decoded and all(i % 2 for i in decoded)  # only the entries the first did not look at
    decoded.clear()
    scans: list[bytes] = []
    scan = session.storage.lines_containing
    monkeypatch.setattr(
        session.storage, "lines_containing", lambda needle, **kw: scans.append(needle) or scan(needle, **kw)
    )
    assert remembered.find(session, query, reversed(everything)).positions == decode_all(session, query)[::-1]
    assert not decoded and not scans  # every verdict known, in the order asked for: not even a scan
    session.append_message(U("flaky at last"))
    decoded.clear()
    assert remembered.find(session, query, range(len(session.tree))).positions[-1] == len(session.tree) - 1
    assert decoded == [len(session.tree) - 1]  # appended since: looked at, the rest known
    session.append_label(session.tree.ids[0], "flaky label")
    decoded.clear()
    assert (
        remembered.find(session, query, range(len(session.tree))).positions[0] == 0
    )  # labelled: a match now
    assert len(decoded) > 1  # labels changed: nothing was kept
    other = remembered.find(session, compile_query("answer"), range(len(session.tree)))
    assert other is not None and other.positions == decode_all(session, compile_query("answer"))
    session.close()


ESCAPE = re.compile(rb"\\u(?:00[0-7]|013[01]|017[fF]|212[aA])")
LOOKALIKES = tuple(letter.encode() for letter in "\u0130\u0131\u017f\u212a")


@pytest.mark.parametrize("numpy_fold", [False, True])
def test_the_scan_marks_exactly_the_lines_lowercasing_finds(tmp_path, monkeypatch, numpy_fold):
    """The scan compares bytes with their 0x20 bit set, so `[X]` and `{x}` look alike to it
    (and `|u` like the `\\u` of an escape): a line is marked only if lowercasing it shows the
    needle, or it really holds an escape or a lookalike letter. Blocks of 256 bytes put line
    ends and matches on block edges."""
    monkeypatch.setattr(jsonl_storage, "SCAN_NUMPY_MIN", 0 if numpy_fold else 1 << 40)
    monkeypatch.setattr(jsonl_storage, "SCAN_BLOCK", 256)
    bodies = [
        "[X] and [Y]",
        "{x} and {Y}",
        "a pipe |u0041 is not an escape",
        "a real \\u004A escape",
        "KELVIN \\u212A and \\u212a",
        "kelvin \u212a raw",
        "\\\\u0041: an escaped backslash before u0041",
        "plain words" * 40,
        "x{X}y and ^caret~",
        "ESCAPE in capitals",
        "\u0130nline and \u017fome",
    ]
    path = _with_lines(tmp_path / "s.jsonl", "start", bodies)
    with open_session(path, read_only=True) as session:
        storage = session.storage
        raws = [storage.raw_line(i) for i in range(len(session.tree))]
        for needle in (b"{x}", b"[x]", b"x}", b"escape", b"plain words", b"kelvin", b"~", b"u0041"):
            marks = storage.lines_containing(needle)
            expected = [
                (CONTAINS if needle in raw.lower() else 0)
                | (ESCAPED if ESCAPE.search(raw) or any(x in raw for x in LOOKALIKES) else 0)
                for raw in raws
            ]
            assert marks is not None and list(marks) == expected, needle
        assert sum(m & ESCAPED for m in expected) >= 4 and sum(m & CONTAINS for m in expected) >= 2


def test_lines_with_ascii_escapes_are_marked_and_remembered(tmp_path):
    path = _with_lines(tmp_path / "s.jsonl", "plain flaky", ["fl\\u0061ky", "nothing here"])
    with open_session(path, read_only=True) as session:
        storage = session.storage
        marks = storage.lines_containing(b"flaky")
        assert marks is not None and list(marks) == [CONTAINS, ESCAPED, 0]
        assert storage._letter_escapes == ({1}, 3)  # a second scan skips the escape pass
        assert list(storage.lines_containing(b"nothing") or b"") == [0, ESCAPED, CONTAINS]


def test_a_tool_result_is_found_by_the_call_its_row_shows(demo):
    """The tree draws a tool result as the call that produced it (`[bash: TZ=Asia/Tokyo …]`);
    the call's words are on the assistant turn's line, which the default filter hides."""
    with open_session(demo, read_only=True) as session:
        tree = session.tree
        results = [i for i in range(len(tree)) if tree.role[i] == TOOL_RESULT]
        query = compile_query("Asia/Tokyo")
        found = find(session, query, results)
        assert found is not None and found.scanned
        commands = [session.tool_call_of(i)["arguments"]["command"] for i in found.positions]
        assert commands and all("TZ=Asia/Tokyo" in c for c in commands)
        assert found.positions == [i for i in results if query.matches(haystack(session, i))]
        assert "[bash: TZ=Asia/Tokyo" in haystack(session, found.positions[0])


def test_a_call_is_found_past_entries_written_while_its_tool_ran(tmp_path):
    """Another writer may append entries between a tool call and its result (a label set in
    this app while the agent runs the tool, a rename): the result is still drawn as its call,
    and found by the call's words, as in Pi's `/tree`, which looks a call up by its id."""
    path = tmp_path / "s.jsonl"
    call = {"type": "toolCall", "id": "call_1", "name": "bash", "arguments": {"command": "ls -la /srv/zebra"}}
    with create_session("/p", path=path) as session:
        session.append_message(U("list the files"))
        turn = A("") | {"content": [call], "stopReason": "toolUse"}
        turn_id = session.append_message(turn)
        session.append_label(turn_id, "checkpoint")
        session.append_session_name("zoo audit")
        result_id = session.append_message(
            {
                "role": "toolResult",
                "toolCallId": "call_1",
                "toolName": "bash",
                "content": [{"type": "text", "text": "total 0"}],
                "isError": False,
                "timestamp": 3,
            }
        )
    with open_session(path, read_only=True) as session:
        i = session.tree.pos[result_id]
        assert session.tool_call_of(i) == call
        assert "[bash: ls -la /srv/zebra" in haystack(session, i)
        found = find(session, compile_query("zebra"), [i])
        assert found is not None and found.scanned and found.positions == [i]


def test_an_assistant_turn_is_found_by_what_its_row_cuts_short(demo):
    """An edit's new text, a written file's content and thinking beside text show whole in the
    preview, and were never found: the row cuts a call's arguments at 80 characters (QA)."""
    with open_session(demo, read_only=True) as session:
        ids = session.tree.ids
        for text, expected in [
            # an edit's newText, past the row's 80 characters; its result, whose row is the call
            ("default=None", ["3a7c4246", "3a7c4439"]),
            ('"Add `--tz`"', ["3a7c51de", "3a7c53d1"]),  # a written CHANGELOG's content
            ('"usually time zones or locale"', ["3a7c0bb2"]),  # thinking, beside the turn's text
        ]:
            query = compile_query(text)
            found = find(session, query, range(len(session.tree)))
            assert found is not None and found.scanned
            assert [ids[i] for i in found.positions] == expected, text
            assert found.positions == decode_all(session, query)
