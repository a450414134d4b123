"""Exports (Markdown, session files), forks and context comparisons, at the library level.

The session-file export is checked twice: by sessiontree (the copy reopens at ID with the same
context) and by Pi's own SessionManager (node, @mariozechner/pi-coding-agent 0.73.1), which must
compute for the copy exactly the context it computes at ID in the source — on the real Pi
fixtures and on a generated tree with branches, leaf moves, labels, summaries and compactions.
"""

from __future__ import annotations

import json
import os
import re
import shutil
import stat
import subprocess
import sys
from importlib import resources
from pathlib import Path

import pytest

from helpers import PI_FIXTURES, A, U, texts, zero_usage
from sessiontree import JsonlStorage, Session, SessionError, create_session, open_session
from sessiontree.compare import compare_contexts, comparison_lines
from sessiontree.context import estimate_context_tokens
from sessiontree.export import (
    collect_path,
    context_markdown,
    damage_line,
    export_jsonl,
    export_markdown,
    write_file,
)
from sessiontree.export.markdown import code, fence, prose
from sessiontree.fork import fork_session

ROOT = Path(__file__).resolve().parents[2]
BENCH = ROOT / "bench"
PI_PACKAGE = BENCH / "node_modules" / "@mariozechner" / "pi-coding-agent"
HAVE_PI = shutil.which("node") is not None and PI_PACKAGE.is_dir()
needs_pi = pytest.mark.skipif(
    not HAVE_PI, reason="Pi's SessionManager is not installed (needs node, then `cd bench && npm ci`)"
)


def tool_call(call_id: str, name: str, **args) -> dict:
    msg = A("")
    msg["content"] = [{"type": "toolCall", "id": call_id, "name": name, "arguments": args}]
    msg["stopReason"] = "toolUse"
    return msg


def tool_result(call_id: str, name: str, text: str, *, error: bool = False) -> dict:
    return {
        "role": "toolResult",
        "toolCallId": call_id,
        "toolName": name,
        "content": [{"type": "text", "text": text}],
        "isError": error,
        "timestamp": 3,
    }


def build_tree(path: Path) -> dict[str, str]:
    """A session with the shapes an export meets: settings, a labelled entry, an abandoned
    branch left with a summary, tool calls, a compaction, a custom message, a session name."""
    ids: dict[str, str] = {}
    with Session(JsonlStorage.create(path, cwd="/work")) as s:
        s.append_model_change("openai", "gpt-5")
        s.append_thinking_level_change("high")
        ids["u1"] = s.append_message(U("first question"))
        ids["a1"] = s.append_message(A("first answer"))
        ids["label"] = s.append_label(ids["a1"], "good")
        ids["u_abandoned"] = s.append_message(U("a question we drop"))
        ids["a_abandoned"] = s.append_message(A("an answer we drop"))
        ids["summary"] = s.move_to(ids["a1"], "tried something else") or ""
        ids["leaf_entry"] = next(m.entry_id for m in s.leaf_moves())
        ids["u2"] = s.append_message(U("second question"))
        ids["call"] = s.append_message(tool_call("c1", "read", path="x.py"))
        ids["result"] = s.append_message(tool_result("c1", "read", "print('x')\n" * 2000))
        ids["a2"] = s.append_message(A("kept answer"))
        ids["custom"] = s.append_custom_message_entry("note", "a note for the model", True)
        ids["u3"] = s.append_message(U("more"))
        ids["compaction"] = s.append_compaction("summary of the early part", ids["a2"], 1234)
        ids["u4"] = s.append_message(U("after the compaction"))
        ids["name"] = s.append_session_name("export test")
        ids["a4"] = s.append_message(A("last", model="claude-sonnet-4-5"))
    return ids


@pytest.fixture
def tree(tmp_path) -> tuple[Path, dict[str, str]]:
    path = tmp_path / "tree.jsonl"
    return path, build_tree(path)


# --- Markdown helpers ---------------------------------------------------------------------------


def test_fence_is_longer_than_any_backtick_run_inside():
    text = "a ``` b\n````\nc"
    fenced = fence(text)
    assert fenced.startswith("`````\n") and fenced.endswith("\n`````")
    assert fence("plain").startswith("```\n")


def test_code_span_survives_backticks_and_newlines():
    assert code("a`b") == "``a`b``"
    assert code("`x") == "`` `x ``"
    assert "\n" not in code("two\nlines")


def test_prose_closes_an_unclosed_fence_and_escapes_tags():
    out = prose("look:\n```python\nprint(1)\n<b>not markup</b>")
    assert out.endswith("\n```")  # closed: the rest of the document stays outside
    assert "<b>not markup</b>" in out  # inside the fence: literal, not escaped
    out = prose("<script>alert(1)</script> and `<kbd>` in code")
    assert out.startswith("&lt;script>alert(1)&lt;/script>")
    assert "`<kbd>`" in out
    out = prose("escape \x1b]0;title\x07 and \u202e reversed")
    assert "\x1b" not in out and "\u202e" not in out and "␛" in out


# --- Markdown export ----------------------------------------------------------------------------


def test_markdown_of_the_path(tree):
    path, ids = tree
    with open_session(path, read_only=True) as s:
        text, collected = export_markdown(s, max_result_chars=500)
    assert collected.complete and collected.target_id == ids["a4"]
    assert text.startswith("# export test\n")
    assert "a question we drop" not in text  # another branch
    assert "### Branch summary" in text and "tried something else" in text
    assert "### Compaction" in text and "1,234 tokens before" in text
    assert "label **good**" in text  # shown on the entry it marks
    assert "*… 21,500 more characters not shown (22,000 in all)*" in text
    assert "**Tool call** `read` `x.py` (`c1`)\n\n### Tool result: read" in text  # nothing else to show
    assert "*Model → openai/gpt-5*" in text and "*Thinking level → high*" in text
    # before the compaction's kept range: marked, since the model sees it only as the summary
    first_user = text.index("first question")
    assert "compacted" in text[text.rindex("###", 0, first_user) : first_user]
    tail = text[text.index("## State at the end") :]
    assert "claude-sonnet-4-5" in tail and "Thinking level: high" in tail
    assert "- Context: 6 messages" in tail  # compaction summary, kept a2, custom, u3, u4, a4


def test_tool_calls_read_as_the_app_draws_them(tmp_path):
    """Every call was its arguments as JSON: an edit's lines one string of `\\n` escapes (QA
    of the HTML export, whose Markdown sibling did the same)."""
    with create_session("/p", path=tmp_path / "calls.jsonl") as s:
        s.append_message(U("go"))
        old, new = "def f():\n    return 1\n    # end\n", "def f():\n    return 2\n    # end\n"
        s.append_message(tool_call("c1", "edit", path="src/x.py", oldText=old, newText=new))
        s.append_message(tool_call("c2", "write", path="notes/a.py", content="print('hi')\n"))
        s.append_message(tool_call("c3", "bash", command="ls\npwd", timeout=5))
        s.append_message(tool_call("c4", "grep", pattern="a b"))
        s.append_message(
            tool_call("c5", "Edit", file_path="y.txt", edits=[{"oldText": "a", "newText": "b"}] * 2)
        )
        text, _ = export_markdown(s)
    diff = "```diff\n def f():\n-    return 1\n+    return 2\n     # end\n```"
    assert "**Tool call** `edit` `src/x.py` (`c1`)\n\n" + diff in text
    assert "**Tool call** `write` `notes/a.py` (`c2`)\n\n```python\nprint('hi')\n```" in text
    assert '```bash\nls\npwd\n```\n```json\n{\n  "timeout": 5\n}\n```' in text
    assert '**Tool call** `grep` (`c4`)\n\n```json\n{\n  "pattern": "a b"\n}\n```' in text
    assert "(`c5`)\n\n```diff\n-a\n+b\n@@\n-a\n+b\n```" in text
    assert "\\n" not in text


def test_the_state_at_the_end_counts_one_message_in_the_singular(tmp_path):
    with create_session("/p", path=tmp_path / "one.jsonl") as s:
        s.append_message(U("only this"))
        text, _ = export_markdown(s)
    assert text.rstrip().endswith("- Context: 1 message, ~3 tokens")  # it said "1 messages" (QA)


def test_hostile_text_does_not_take_the_document_apart(tmp_path):
    """Parsed by a CommonMark parser, the document keeps one section per entry in order, and
    no raw HTML survives, whatever the messages hold."""
    markdown_it = pytest.importorskip("markdown_it")
    nasty = [
        "an unclosed fence\n```python\nprint(1)",
        "a longer fence ````` and ~~~ tildes\n~~~\nnever closed",
        "<script>alert(1)</script> <img src=x onerror=alert(1)>\n<!-- a comment that never ends",
        "    indented code <b>",
    ]
    path = tmp_path / "nasty.jsonl"
    with Session(JsonlStorage.create(path, cwd="/p")) as s:
        for k, text in enumerate(nasty):
            s.append_message(U(text))
            s.append_message(tool_call(f"c{k}", "bash", command="echo '```'"))
            s.append_message(tool_result(f"c{k}", "bash", "```\n### not a heading\n" + text))
            # a command the user ran: its output's ``` closed the text's fence (QA)
            s.append_message(
                {"role": "bashExecution", "command": "cat x", "output": "```\n### not a heading\n" + text}
                | {"exitCode": 2, "cancelled": False, "truncated": False, "timestamp": 1}
            )
            s.append_message(A(text))
    with open_session(path, read_only=True) as s:
        text, _ = export_markdown(s)
    tokens = markdown_it.MarkdownIt("commonmark").parse(text)
    headings = [
        tokens[k + 1].content for k, t in enumerate(tokens) if t.type == "heading_open" and t.tag == "h3"
    ]
    assert (
        headings
        == [
            "User",
            "Assistant (anthropic/claude-test)",
            "Tool result: bash",
            "Shell command (user)",
            "Assistant (anthropic/claude-test)",
        ]
        * 4
    )
    assert text.count("*Command exited with code 2*") == 4
    assert not [t for t in tokens if t.type in ("html_block", "html_inline")]
    assert tokens[-1].type == "bullet_list_close"  # the state list at the end is still a list


def test_session_text_in_headings_labels_and_names_stays_text(tmp_path):
    """A session's name, a label, a model's and a tool's name, a custom message's type were
    written into headings and emphasis as they were: a CommonMark parser made live `<script>`
    and `<img onerror>` HTML of them. Every one comes out as the text it is, and a message's
    `&amp;` as typed, not as `&`."""
    markdown_it = pytest.importorskip("markdown_it")
    evil = "<script>x</script><img src=x onerror=y> *em* [a](j:x) &amp;"
    path = tmp_path / "evil.jsonl"
    with Session(JsonlStorage.create(path, cwd="/p")) as s:
        s.append_session_name(evil)
        first = s.append_message(U("plain &amp; &lt;b&gt; &#60;"))
        s.append_label(first, evil)
        s.append_model_change("prov", evil)
        s.append_message(A("ok", model=evil))
        s.append_message(tool_call("c1", evil, command="x"))
        s.append_message(tool_result("c1", evil, "out"))
        s.append_custom_message_entry(evil, "shown", display=True)
    with open_session(path, read_only=True) as s:
        text, _ = export_markdown(s)
    tokens = markdown_it.MarkdownIt("commonmark").parse(text)
    assert not [t for t in tokens if t.type in ("html_block", "html_inline")]
    inline = [t for t in tokens if t.type == "inline"]
    assert not [c for t in inline for c in t.children or [] if c.type == "link_open"]
    html = markdown_it.MarkdownIt("commonmark").render(text)
    shown = html.replace("&lt;", "<").replace("&gt;", ">").replace("&quot;", '"').replace("&amp;", "&")
    assert shown.count(evil) >= 6  # title, label, model twice, tool result's heading, custom type
    assert "plain &amp; &lt;b&gt; &#60;" in shown


def test_markdown_at_an_entry_and_the_clipboard_text(tree):
    path, ids = tree
    with open_session(path, read_only=True) as s:
        text, _ = export_markdown(s, ids["a_abandoned"])
        assert "a question we drop" in text and "second question" not in text
        assert context_markdown(s, ids["u1"]).count("### ") == 1


def test_targets_that_are_refused_or_explained(tree):
    path, ids = tree
    with open_session(path, read_only=True) as s:
        with pytest.raises(SessionError) as exc:
            collect_path(s, "nope")
        assert exc.value.code == "not_found"
        with pytest.raises(SessionError) as exc:
            collect_path(s, ids["leaf_entry"])
        assert exc.value.code == "invalid_argument"
        assert "`leaf` entry" in str(exc.value) and ids["a1"] in str(exc.value)
        label = collect_path(s, ids["label"])
        assert label.note is not None and "`label` entry" in label.note
        assert [e.id for e in label.entries][-1] == ids["label"]


# --- session-file export ------------------------------------------------------------------------


def jsonl_at(session: Session, at: str | None, target: Path) -> Path:
    data, _ = export_jsonl(session, at)
    target.write_bytes(data)
    return target


def test_jsonl_reopens_at_the_entry_with_the_same_context(tree, tmp_path):
    path, ids = tree
    with open_session(path, read_only=True) as s:
        for name, at in ids.items():
            if name == "leaf_entry":
                continue
            out = jsonl_at(s, at, tmp_path / f"{name}.jsonl")
            with open_session(out, read_only=True) as copy:
                assert copy.diagnostics == [], name
                assert copy.leaf_id == at
                assert copy.header.parent_session == str(path.resolve())
                assert copy.session_id != s.session_id
                assert [e.id for e in copy.get_entries()] == [e.id for e in s.get_path(at)]
                ours, theirs = s.build_context(at=at), copy.build_context()
                assert theirs.messages == ours.messages, name
                assert (theirs.model, theirs.thinking_level) == (ours.model, ours.thinking_level)


def test_jsonl_escapes_what_a_terminal_would_act_on(tmp_path):
    path = tmp_path / "hostile.jsonl"
    text = "csi \u009b31m, del \x7f, bidi \u202e, sep \u2028, zw \u200b, esc \x1b[2J"
    with Session(JsonlStorage.create(path, cwd="/p")) as s:
        s.append_message(U(text))
    with open_session(path, read_only=True) as s:
        data, _ = export_jsonl(s)
    assert data.isascii() or not re.search("[\x7f-\x9f\u2028\u202e\u200b\x1b]", data.decode())
    out = tmp_path / "copy.jsonl"
    out.write_bytes(data)
    with open_session(out, read_only=True) as copy:
        assert copy.build_context().messages[0]["content"] == text  # same value, escaped form


def test_a_leaf_entry_inside_the_path_is_left_out(tmp_path):
    """Pi's coding agent continues a file that ends in a leaf move *below* the leaf entry, and a
    label may name an entry of another branch; the copy is still a clean session."""
    ts = "2026-01-01T00:00:00.000Z"
    lines = [
        {"type": "session", "version": 3, "id": "s", "timestamp": ts, "cwd": "/p"},
        {"type": "message", "id": "u1", "parentId": None, "timestamp": ts, "message": U("one")},
        {"type": "message", "id": "a1", "parentId": "u1", "timestamp": ts, "message": A("two")},
        {"type": "message", "id": "side", "parentId": "a1", "timestamp": ts, "message": U("side")},
        {"type": "leaf", "id": "mv", "parentId": "side", "timestamp": ts, "targetId": "u1"},
        {"type": "message", "id": "u2", "parentId": "mv", "timestamp": ts, "message": U("below the move")},
        {"type": "label", "id": "lb", "parentId": "u2", "timestamp": ts, "targetId": "a1", "label": "x"},
        {"type": "message", "id": "a2", "parentId": "lb", "timestamp": ts, "message": A("end")},
    ]
    source = tmp_path / "pi-continued.jsonl"
    source.write_text("".join(json.dumps(line) + "\n" for line in lines))
    with open_session(source, read_only=True) as s:
        copy = jsonl_at(s, "a2", tmp_path / "copy.jsonl")
        want = s.build_context(at="a2").messages
    with open_session(copy, read_only=True) as c:
        assert c.diagnostics == [] and c.leaf_id == "a2"
        assert [e.id for e in c.get_entries()] == ["u1", "a1", "side", "u2", "lb", "a2"]
        assert c.require_entry("u2").parent_id == "side"
        assert c.build_context().messages == want
    if HAVE_PI:
        assert pi_compare(source, [("a2", copy)], tmp_path)[0]["same"]


def test_lone_surrogates_survive_copies_and_stay_inert_in_markdown(tmp_path):
    ts = "2026-01-01T00:00:00.000Z"
    lines = [
        {"type": "session", "version": 3, "id": "s", "timestamp": ts, "cwd": "/p"},
        {"type": "message", "id": "u\ud800", "parentId": None, "timestamp": ts, "message": U("half \ud83d")},
        {"type": "message", "id": "a1", "parentId": "u\ud800", "timestamp": ts, "message": A("big 1e400")},
    ]
    source = tmp_path / "surrogates.jsonl"
    source.write_text("".join(json.dumps(line) + "\n" for line in lines))
    with open_session(source, read_only=True) as s:
        copy = jsonl_at(s, "a1", tmp_path / "copy.jsonl")
        text, _ = export_markdown(s)
    with open_session(copy, read_only=True) as c:
        assert [e.id for e in c.get_entries()] == ["u\ud800", "a1"] and c.diagnostics == []
    assert "half ⟨U+D83D⟩" in text and "u⟨U+D800⟩" in text
    text.encode()  # nothing unencodable is left


def damaged_copy(tree_path: Path, tmp_path: Path, drop_id: str) -> Path:
    """The file with the line of `drop_id` replaced by garbage (a damaged interior line)."""
    lines = tree_path.read_bytes().splitlines(keepends=True)
    bad = [k for k, line in enumerate(lines) if f'"id":"{drop_id}"'.encode() in line]
    lines[bad[0]] = b'{"type":"message","id":\n'
    out = tmp_path / "damaged.jsonl"
    out.write_bytes(b"".join(lines))
    return out


def test_damaged_source_exports_what_is_readable(tree, tmp_path):
    path, ids = tree
    damaged = damaged_copy(path, tmp_path, ids["u2"])
    with open_session(damaged, read_only=True) as s:
        data, collected = export_jsonl(s, ids["a2"])
        line = damage_line(s, collected)
        text, _ = export_markdown(s, ids["a2"])
    assert collected.cut_above == ids["u2"]
    assert [e.id for e in collected.entries] == [ids["call"], ids["result"], ids["a2"]]
    assert line is not None and "cut above" in line and "skipped" in line and "\n" not in line
    out = tmp_path / "salvaged.jsonl"
    out.write_bytes(data)
    with open_session(out, read_only=True) as copy:  # re-rooted: a valid session
        assert copy.diagnostics == [] and copy.leaf_id == ids["a2"]
    assert "**Incomplete:**" in text


@pytest.mark.parametrize(
    ("parents", "said"),
    [
        ({"u1": "u1"}, "its parent u1 is the entry itself"),
        ({"u1": "a1"}, "its parent a1 leads back to it (a cycle)"),
    ],
)
def test_a_path_cut_at_a_cycle_names_the_parent_and_why(tmp_path, parents, said):
    """A self-parent or a cycle is cut like a missing parent; the warning said "its parent ? is
    missing" (QA): the parent is known, and it is there."""
    ts = "2026-01-01T00:00:00.000Z"
    lines = [{"type": "session", "version": 3, "id": "s", "timestamp": ts, "cwd": "/p"}]
    for eid, parent, message in (("u1", None, U("hi")), ("a1", "u1", A("hello")), ("u2", "a1", U("more"))):
        parent = parents.get(eid, parent)
        lines.append({"type": "message", "id": eid, "parentId": parent, "timestamp": ts, "message": message})
    source = tmp_path / "cut.jsonl"
    source.write_text("".join(json.dumps(line) + "\n" for line in lines))
    with open_session(source, read_only=True) as s:
        collected = collect_path(s, "u2")
        line = damage_line(s, collected)
        text, _ = export_markdown(s, "u2")
    assert line is not None and f"the path is cut above {collected.top_id} ({said})" in line
    assert "?" not in line
    assert f"its parent `{collected.cut_above}` {said.split(' ', 3)[3]}" in text


def test_a_clean_source_reports_no_damage(tree):
    path, _ = tree
    with open_session(path, read_only=True) as s:
        assert damage_line(s, collect_path(s)) is None


# --- Pi reads the copies ------------------------------------------------------------------------

PI_CONTEXTS = """
import { SessionManager, buildSessionContext } from "@mariozechner/pi-coding-agent";
import { readFileSync } from "node:fs";
const [source, pairs] = [process.argv[1], JSON.parse(readFileSync(process.argv[2], "utf8"))];
const original = SessionManager.open(source);
const all = original.getEntries();
const out = [];
for (const [key, copyPath] of pairs) {
  // a number names an entry by position: Pi gives a migrated v1 file ids of its own
  const id = typeof key === "number" ? all[key].id : key;
  const want = buildSessionContext(all, id);
  const copy = SessionManager.open(copyPath);
  const got = copy.buildSessionContext();
  const header = JSON.parse(readFileSync(copyPath, "utf8").split("\\n")[0]);
  out.push({
    id: key,
    leaf: copy.getLeafId(),
    same: JSON.stringify(got) === JSON.stringify(want),
    messages: want.messages.length,
    parentSession: header.parentSession,
  });
}
console.log(JSON.stringify(out));
"""


def pi_compare(source: Path, copies: list[tuple[str | int, Path]], tmp_path: Path) -> list[dict]:
    pairs = tmp_path / "pairs.json"
    pairs.write_text(json.dumps([[i, str(p)] for i, p in copies]))
    done = subprocess.run(
        ["node", "--input-type=module", "-e", PI_CONTEXTS, str(source), str(pairs)],
        capture_output=True,
        text=True,
        cwd=BENCH,
        check=True,
    )
    return json.loads(done.stdout)


def export_many(source: Path, ids: list[str], tmp_path: Path) -> list[tuple[str | int, Path]]:
    copies: list[tuple[str | int, Path]] = []
    with open_session(source, read_only=True) as s:
        for k, entry_id in enumerate(ids):
            copies.append((entry_id, jsonl_at(s, entry_id, tmp_path / f"copy{k}.jsonl")))
    return copies


def sample_ids(source: Path, limit: int = 40) -> list[str]:
    """Points where a context changes shape: entries next to compactions, user messages, the
    leaf; then, up to `limit`, others spread evenly over the file."""
    with open_session(source, read_only=True) as s:
        entries = [e for e in s.get_entries() if e.type != "leaf"]
        must: list[str] = []
        for k, e in enumerate(entries):
            if any(x.type == "compaction" for x in entries[max(0, k - 1) : k + 2]):
                must.append(e.id)
        users = [e.id for e in entries if e.type == "message" and e.get("message", {}).get("role") == "user"]
        others = [e.id for e in entries]
        room = max(limit - len(must), 2)
        spread = users[:: max(1, len(users) // (room // 2))] + others[:: max(1, len(others) // (room // 2))]
        chosen = list(dict.fromkeys([*must, *spread, s.leaf_id or ""]))
    return chosen


@needs_pi
@pytest.mark.parametrize("fixture", ["before-compaction.jsonl", "large-session.jsonl"])
def test_pi_opens_copies_of_the_real_fixtures_with_the_same_context(fixture, tmp_path):
    source = tmp_path / fixture
    shutil.copy(PI_FIXTURES / fixture, source)
    JsonlStorage.upgrade(source)  # v1 fixtures: give the entries the ids both sides will use
    ids = sample_ids(source)
    assert len(ids) > 30
    results = pi_compare(source, export_many(source, ids, tmp_path), tmp_path)
    assert [r["id"] for r in results] == ids
    assert all(r["same"] for r in results), [r["id"] for r in results if not r["same"]]
    assert all(r["leaf"] == r["id"] for r in results)
    assert all(r["parentSession"] == str(source) for r in results)
    if fixture == "before-compaction.jsonl":
        assert max(r["messages"] for r in results) > 400


@needs_pi
def test_pi_opens_copies_exported_straight_from_a_v1_file(tmp_path):
    """No upgrade first: sessiontree's in-memory migration and Pi's own must agree on what the
    context at the k-th entry is."""
    source = tmp_path / "v1.jsonl"
    shutil.copy(PI_FIXTURES / "before-compaction.jsonl", source)  # a copy: Pi rewrites what it migrates
    with open_session(source, read_only=True) as s:
        entries = s.get_entries()
        positions = sorted(
            {0, 1, len(entries) // 3, len(entries) // 2, len(entries) - 1}
            | {k for k, e in enumerate(entries) if e.type == "compaction"}
        )
        copies = [(k, jsonl_at(s, entries[k].id, tmp_path / f"v1-{k}.jsonl")) for k in positions]
        ours = {k: entries[k].id for k in positions}
    results = pi_compare(source, copies, tmp_path)
    assert all(r["same"] for r in results), [r["id"] for r in results if not r["same"]]
    assert all(r["leaf"] == ours[r["id"]] for r in results)


@needs_pi
def test_pi_opens_copies_of_a_branched_tree(tree, tmp_path):
    path, ids = tree
    chosen = [i for name, i in ids.items() if name != "leaf_entry"]
    results = pi_compare(path, export_many(path, chosen, tmp_path), tmp_path)
    assert all(r["same"] and r["leaf"] == r["id"] for r in results), results


@needs_pi
def test_pi_opens_copies_of_a_generated_session(tmp_path):
    source = tmp_path / "generated.jsonl"
    subprocess.run(
        [sys.executable, str(BENCH / "make_session.py"), "3000", "-o", str(source)],
        check=True,
        capture_output=True,
    )
    ids = sample_ids(source)
    results = pi_compare(source, export_many(source, ids, tmp_path), tmp_path)
    assert all(r["same"] and r["leaf"] == r["id"] for r in results), [
        r["id"] for r in results if not r["same"]
    ]


# --- forks --------------------------------------------------------------------------------------


def path_end(session: Session) -> str | None:
    """The last entry of a fork's path: its leaf, or the entry the label entries written after
    the path hang from (Pi's fork writes labels there, and the last becomes the leaf)."""
    entry = session.require_entry(session.leaf_id) if session.leaf_id else None
    while entry is not None and entry.type == "label":
        entry = session.require_entry(entry.parent_id) if entry.parent_id else None
    return entry.id if entry is not None else None


def test_a_fork_keeps_the_labels_of_its_path_as_pis_fork_does(tmp_path):
    """Every label was dropped (QA): a label set on the path from another branch, and so any
    label at all unless its entry happened to lie on the path."""
    path = tmp_path / "s.jsonl"
    with Session(JsonlStorage.create(path, cwd="/p")) as s:
        u1 = s.append_message(U("one"))
        a1 = s.append_message(A("two"))
        s.append_label(u1, " first ")  # on the path, kept as Pi wrote it
        u2 = s.append_message(U("three"))
        s.append_label(u2, "gone")
        s.append_label(u2, None)  # cleared since: not written
        a2 = s.append_message(A("four"))
        s.move_to(u1)
        s.append_message(U("elsewhere"))
        s.append_label(a1, "from another branch")
        s.append_label(u1, "renamed")  # the latest wins, in the first one's place
    with open_session(path, read_only=True) as s:
        result = fork_session(s, a2, output=tmp_path / "f.jsonl")
        want = s.build_context(at=a2).messages
    assert result.leaf_id == a2
    with open_session(tmp_path / "f.jsonl", read_only=True) as fork:
        assert fork.labels() == {u1: "renamed", a1: "from another branch"}
        kinds = [(e.type, e.get("targetId"), e.get("label")) for e in fork.get_entries()]
        assert kinds[-2:] == [("label", u1, "renamed"), ("label", a1, "from another branch")]
        assert [k for k, *_ in kinds[:-2]] == ["message"] * 4  # the path's own labels left out
        assert path_end(fork) == a2 and fork.build_context().messages == want
        assert fork.diagnostics == []


def test_fork_at_a_user_message_ends_at_its_parent(tree):
    path, ids = tree
    with open_session(path, read_only=True) as s:
        result = fork_session(s, ids["u2"])
    new = Path(result.path)
    assert new.parent == path.parent
    assert re.fullmatch(
        r"\d{4}-\d\d-\d\dT\d\d-\d\d-\d\d-\d{3}Z_" + re.escape(result.session_id) + r"\.jsonl", new.name
    )
    assert result.leaf_id == ids["summary"] and result.resend_text == "second question"
    assert stat.S_IMODE(new.stat().st_mode) == 0o600
    with open_session(new, read_only=True) as fork:
        assert path_end(fork) == ids["summary"] and fork.session_id == result.session_id
        assert fork.header.parent_session == str(path.resolve())
        assert fork.diagnostics == []


def test_fork_at_other_entries_ends_there(tree, tmp_path):
    path, ids = tree
    with open_session(path, read_only=True) as s:
        result = fork_session(s, ids["call"], output=tmp_path / "f.jsonl")
        assert result.leaf_id == ids["call"] and result.resend_text is None
        with pytest.raises(SessionError) as exc:
            fork_session(s, ids["call"], output=tmp_path / "f.jsonl")
        assert "already exists" in str(exc.value)
        again = fork_session(s, ids["a2"], output=tmp_path / "f.jsonl", force=True)
        assert again.leaf_id == ids["a2"]
        with pytest.raises(SessionError):
            fork_session(s, ids["leaf_entry"], output=tmp_path / "g.jsonl")
    assert not (tmp_path / "g.jsonl").exists()


def test_fork_at_the_first_user_message_is_an_empty_session(tmp_path):
    with Session(JsonlStorage.create(tmp_path / "plain.jsonl", cwd="/p")) as s:
        first = s.append_message(U("hello"))
        s.append_message(A("hi"))
        result = fork_session(s, first, output=tmp_path / "empty.jsonl")
    assert result.leaf_id is None and result.resend_text == "hello"
    with open_session(result.path) as fork:
        assert fork.entry_count() == 0
        fork.append_message(U("hello again"))  # a usable session: the conversation restarts


def test_a_fork_holds_a_batch_of_the_path_not_the_path(tmp_path):
    # A fork of a 700,000-entry path decoded every entry, and encoded every line, before
    # writing the first: it went past 20 GB. 2,000 turns of 20 kB here: 40 MB of path.
    import tracemalloc

    source = tmp_path / "long.jsonl"
    with Session(JsonlStorage.create(source, cwd="/p")) as s:
        for k in range(1000):
            s.append_message(U(f"question {k} " + "q" * 20_000))
            s.append_message(A(f"answer {k} " + "a" * 20_000))
        leaf = s.leaf_id
    with open_session(source, read_only=True) as s:
        tracemalloc.start()
        try:
            result = fork_session(s, leaf, output=tmp_path / "fork.jsonl")
            peak = tracemalloc.get_traced_memory()[1]
        finally:
            tracemalloc.stop()
    assert peak < 40e6  # the whole path: 86 MB
    assert result.entries == 2000 and result.leaf_id == leaf
    with open_session(result.path, read_only=True) as fork:
        assert fork.leaf_id == leaf and fork.entry_count() == 2000 and fork.diagnostics == []
        assert fork.build_context().messages[-1]["content"][0]["text"].startswith("answer 999 ")


def test_a_fork_of_a_session_closed_meanwhile_writes_nothing(tmp_path):
    # The app forks in a worker; quitting closes the session under it. Taken for damage, the
    # rest of the path was passed over and the fork, cut short, written as a whole session.
    source = tmp_path / "long.jsonl"
    with Session(JsonlStorage.create(source, cwd="/p")) as s:
        for k in range(600):
            s.append_message(U(f"question {k}"))
            s.append_message(A(f"answer {k}"))
        leaf = s.leaf_id
    s = open_session(source, read_only=True)
    real = s.storage.load_many

    def closed_after_the_first_batch(positions):
        out = real(positions)
        s.close()
        return out

    s.storage.load_many = closed_after_the_first_batch
    with pytest.raises(SessionError, match="closed"):
        fork_session(s, leaf, output=tmp_path / "fork.jsonl")
    assert sorted(p.name for p in tmp_path.iterdir()) == ["long.jsonl"]


def test_a_fork_leaves_out_an_entry_damaged_since_the_open_and_says_so(tree, tmp_path):
    path, ids = tree
    copy = tmp_path / "copy.jsonl"
    shutil.copy(path, copy)
    with open_session(copy, read_only=True) as s:
        raw = copy.read_bytes()
        at = raw.index(f'"id":"{ids["u2"]}"'.encode())
        start = raw.rindex(b"\n", 0, at) + 1
        end = raw.index(b"\n", at)
        with open(copy, "r+b") as f:  # the line's bytes changed on disk after it was indexed
            f.seek(start)
            f.write(b"x" * (end - start))
        result = fork_session(s, ids["a2"], output=tmp_path / "fork.jsonl")
        line = damage_line(s, result.source)
    assert result.source.unreadable == [ids["u2"]]
    assert line is not None and ids["u2"] in line
    with open_session(result.path, read_only=True) as fork:
        assert fork.diagnostics == [] and result.leaf_id == ids["a2"] in fork.tree.ids
        assert ids["u2"] not in fork.tree.ids and ids["call"] in fork.tree.ids


def test_fork_of_a_sqlite_session_goes_next_to_the_database(tmp_path):
    from sessiontree import SqliteStorage

    db = tmp_path / "sessions.sqlite"
    with Session(SqliteStorage.create(db, cwd="/p")) as s:
        s.append_message(U("q"))
        a = s.append_message(A("a"))
        sid = s.session_id
    with open_session(f"{db}#{sid}", read_only=True) as s:
        result = fork_session(s, a)
    assert Path(result.path).parent == tmp_path
    with open_session(result.path, read_only=True) as fork:
        assert fork.header.parent_session == f"{db}#{sid}"
        assert fork.leaf_id == a


# --- comparing contexts -------------------------------------------------------------------------


def test_the_shared_part_of_two_contexts_is_counted_as_the_contexts_are(tmp_path):
    """Beside two contexts of ~1,000 tokens (an assistant reported so), the shared part said
    ~2,500 "by length": the text of a long first message the model had counted otherwise (QA)."""
    path = tmp_path / "s.jsonl"
    with Session(JsonlStorage.create(path, cwd="/p")) as s:
        s.append_message(U("long " * 2000))
        answer = s.append_message(A("ok", usage=zero_usage(input=990, output=10, totalTokens=1000)))
        a = s.append_message(U("one way"))
        s.move_to(answer)
        b = s.append_message(U("the other"))
    with open_session(path, read_only=True) as s:
        c = compare_contexts(s, a, b)
        lines = comparison_lines(c)
    assert c.shared == 2 and c.shared_tokens == 1000
    assert c.a.context.tokens > 1000 and c.shared_tokens < min(c.a.context.tokens, c.b.context.tokens)
    assert lines[2].startswith("= 2 shared messages, ~1,000 tokens, ending with")


def test_compare_two_branches(tree):
    path, ids = tree
    with open_session(path, read_only=True) as s:
        c = compare_contexts(s, ids["a_abandoned"], ids["a2"])
        lines = comparison_lines(c)
        data = c.to_json()
    assert c.shared == 2  # u1, a1
    assert [m["role"] for m in c.tail_a] == ["user", "assistant"]
    assert [m["role"] for m in c.tail_b] == ["branchSummary", "user", "assistant", "toolResult", "assistant"]
    assert lines[0].startswith("--- " + ids["a_abandoned"]) and lines[1].startswith("+++ " + ids["a2"])
    # one count throughout, the model's: the shared part's by length was larger than either
    # whole context (QA)
    shared = estimate_context_tokens(c.shared_messages)
    assert c.shared_tokens == shared and 0 < shared <= min(c.a.context.tokens, c.b.context.tokens)
    assert f"5 after the shared part, ~{c.b.context.tokens - shared:,} tokens ·" in lines[1]
    assert lines[2].startswith(f"= 2 shared messages, ~{shared:,} tokens, ending with")
    assert data["b"]["tailTokens"] == c.b.context.tokens - shared
    assert sum(line.startswith("-") and not line.startswith("---") for line in lines) == 2
    assert sum(line.startswith("+") and not line.startswith("+++") for line in lines) == 5
    assert data["shared"]["messages"] == 2 and len(data["b"]["tail"]) == 5
    assert data["a"]["tokens"] == c.a.context.tokens


def test_compare_across_a_compaction_lines_up_the_kept_messages(tree):
    path, ids = tree
    with open_session(path, read_only=True) as s:
        c = compare_contexts(s, ids["u3"], ids["u4"])
        lines = comparison_lines(c, context=10)
    assert c.shared == 0  # the summary comes first at u4
    kept = [line for line in lines if line.startswith(" ")]
    assert any("kept answer" in line for line in kept)  # a2 is in both: shown as common
    assert any(line.startswith("+compactionSummary") for line in lines)


def test_compare_shows_an_aborted_answer_as_the_tree_does(tmp_path):
    """An answer aborted before any text was an empty "-assistant:" row; the tree's row says
    "(error) Request was aborted" (QA)."""
    path = tmp_path / "s.jsonl"
    with create_session("/w", path=path) as s:
        u1 = s.append_message(U("question"))
        aborted = {**A(""), "content": [], "stopReason": "aborted", "errorMessage": "Request was aborted"}
        a_aborted = s.append_message(aborted)
        s.move_to(u1)
        a_done = s.append_message(A("the answer"))
    with open_session(path, read_only=True) as s:
        lines = comparison_lines(compare_contexts(s, a_aborted, a_done))
    assert "-assistant: (error) Request was aborted" in lines
    assert "+assistant: the answer" in lines


def test_compare_identical_and_refused(tree):
    path, ids = tree
    with open_session(path, read_only=True) as s:
        c = compare_contexts(s, ids["a1"], ids["a1"])
        assert comparison_lines(c)[-1] == "(the two contexts are identical)"
        with pytest.raises(SessionError):
            compare_contexts(s, ids["a1"], ids["leaf_entry"])


# --- writing files ------------------------------------------------------------------------------


def test_write_file_refuses_replaces_and_leaves_nothing_half_written(tmp_path):
    target = tmp_path / "out.md"
    write_file(target, b"one")
    with pytest.raises(SessionError, match="already exists"):
        write_file(target, b"two")
    assert target.read_bytes() == b"one"
    os.chmod(target, 0o640)
    write_file(target, [b"th", b"ree"], force=True)
    assert target.read_bytes() == b"three" and stat.S_IMODE(target.stat().st_mode) == 0o640

    def failing():
        yield b"partial"
        raise OSError(28, "No space left on device")

    with pytest.raises(SessionError, match="No space left"):
        write_file(tmp_path / "new.md", failing())
    assert sorted(p.name for p in tmp_path.iterdir()) == ["out.md"]  # no temp file, no partial file
    with pytest.raises(SessionError, match="does not exist"):
        write_file(tmp_path / "missing" / "x.md", b"x")
    with pytest.raises(SessionError, match="is a directory"):
        write_file(tmp_path, b"x")
    link = tmp_path / "link.md"
    link.symlink_to(tmp_path / "elsewhere.md")
    with pytest.raises(SessionError, match="already exists"):
        write_file(link, b"x")  # a dangling symlink is not followed
    assert not (tmp_path / "elsewhere.md").exists()


@pytest.mark.skipif(os.geteuid() == 0, reason="root writes into read-only directories")
def test_write_file_into_a_read_only_directory(tmp_path):
    locked = tmp_path / "ro"
    locked.mkdir()
    locked.chmod(0o500)
    try:
        with pytest.raises(SessionError, match="cannot write"):
            write_file(locked / "x.md", b"x")
    finally:
        locked.chmod(0o700)


PI_BRANCHED = """
import { SessionManager } from "@mariozechner/pi-coding-agent";
const [source, dir, leaf] = process.argv.slice(1);
const manager = SessionManager.open(source, dir);
manager.createBranchedSession(leaf);
console.log(JSON.stringify(manager.getEntries().map((e) =>
  e.type === "label" ? ["label", e.targetId, e.label, e.timestamp] : [e.type, e.id])));
"""


@needs_pi
def test_a_fork_writes_the_labels_pis_own_fork_writes(tmp_path):
    """The same entries, and the same label entries after them (targets, labels, timestamps), as
    Pi's `createBranchedSession` on the demo (its labels: set on the path, from other branches)."""
    source = tmp_path / "demo.jsonl"
    shutil.copy(resources.files("sessiontree.demo") / "demo.jsonl", source)
    # assistant turns (at a user message sessiontree's fork ends at its parent, as the app's
    # navigation does: there the paths differ by design)
    for leaf in ("3a7c55c4", "3a7c4a12", "3a7c30bb", "3a7c137e"):
        done = subprocess.run(
            ["node", "--input-type=module", "-e", PI_BRANCHED, str(source), str(tmp_path / "pi"), leaf],
            capture_output=True,
            text=True,
            cwd=BENCH,
            check=True,
        )
        theirs = json.loads(done.stdout)
        with open_session(source, read_only=True) as s:
            fork_session(s, leaf, output=tmp_path / f"{leaf}.jsonl")
        with open_session(tmp_path / f"{leaf}.jsonl", read_only=True) as fork:
            ours = [
                ["label", e.get("targetId"), e.get("label"), e.timestamp]
                if e.type == "label"
                else [e.type, e.id]
                for e in fork.get_entries()
            ]
        assert any(row[0] == "label" for row in theirs), leaf
        assert ours == theirs, leaf


def test_a_fork_of_a_postgresql_session_names_it_without_the_password(tmp_path, pg_url):
    """A fork or a JSONL export of a session kept in PostgreSQL wrote no `parentSession`: the
    copy did not say where it came from (QA). The URL, its password masked, then `#id`."""
    from sessiontree.storage.postgres import PostgresStorage

    with Session(PostgresStorage.create(pg_url, cwd="/p")) as s:
        s.append_message(U("q"))
        a = s.append_message(A("a"))
        sid = s.session_id
    with open_session(f"{pg_url}#{sid}", read_only=True) as s:
        result = fork_session(s, a, output=tmp_path / "fork.jsonl")
    with open_session(result.path, read_only=True) as fork:
        named = fork.header.parent_session or ""
    password = pg_url.split("@")[0].rsplit(":", 1)[1]
    assert named.endswith(f"#{sid}") and named.startswith("postgresql://") and password not in named


def test_a_fork_keeps_a_label_entry_a_compaction_keeps_from(tmp_path):
    """The library takes any id as a compaction's `firstKeptEntryId`. A fork left the path's
    label entries out (as Pi's fork does), that one too: the fork's compaction kept nothing and
    its context lost the kept turns (helper review)."""
    source = tmp_path / "s.jsonl"
    with Session(JsonlStorage.create(source, cwd="/p")) as s:
        first = s.append_message(U("old"))
        s.append_message(A("old answer"))
        label = s.append_label(first, "start")
        s.append_message(U("kept q"))
        s.append_message(A("kept a"))
        s.append_compaction("SUM", label, 100)
        end = s.append_message(A("after"))
        want = texts(s.build_context().messages)
    with open_session(source, read_only=True) as s:
        fork_session(s, end, output=tmp_path / "fork.jsonl")
    with open_session(tmp_path / "fork.jsonl", read_only=True) as fork:
        assert texts(fork.build_context(at=end).messages) == want
        assert want[1:] == ["kept q", "kept a", "after"]


def test_the_transcript_says_an_older_compaction_among_the_kept_entries_is_not_sent(tmp_path):
    """It was shown like any entry the model gets (QA); Pi sends the newest summary only."""
    with Session(JsonlStorage.create(tmp_path / "s.jsonl", cwd="/p")) as s:
        kept = s.append_message(U("kept"))
        s.append_compaction("FIRST", kept, 10)
        s.append_message(U("between"))
        s.append_compaction("SECOND", kept, 20)
        s.append_message(U("after"))
        text, _ = export_markdown(s)
    sections = text.split("### Compaction")
    assert len(sections) == 3
    assert "not sent: a newer compaction's summary replaces it" in sections[1]
    assert "not sent" not in sections[2]
