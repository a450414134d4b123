"""Branch collection, transcript format and both summarizers."""

from __future__ import annotations

import sys

import pytest

from helpers import A, U
from sessiontree import BranchSummary, MemoryStorage, Session, open_session
from sessiontree.opening import create_session
from sessiontree.summarize import (
    BATCH,
    DEFAULT_BUDGET,
    NO_CONTENT,
    PREAMBLE,
    FileOps,
    SummarizerError,
    _prepare_messages,
    collect_branch,
    summarize_branch,
    transcript,
)


def tool_call(name, **args):
    return {"type": "toolCall", "id": name, "name": name, "arguments": args}


def build():
    s = Session(MemoryStorage())
    root = s.append_message(U("fix the parser"))
    s.append_message(A("ok"))
    s.append_message(U("try approach B"))
    s.append_message(
        {
            "role": "assistant",
            "content": [
                {"type": "thinking", "thinking": "hmm"},
                {"type": "text", "text": "editing"},
                tool_call("read", path="a.py"),
                tool_call("edit", path="b.py"),
            ],
            "provider": "p",
            "model": "m",
        }
    )
    s.append_message(
        {
            "role": "toolResult",
            "toolCallId": "read",
            "toolName": "read",
            "content": [{"type": "text", "text": "x" * 5000}],
            "isError": False,
        }
    )
    return s, root


def test_collect_walks_back_to_common_ancestor():
    s, root = build()
    branch = collect_branch(s, root)
    assert branch.common_ancestor_id == root
    assert branch.size == 4
    assert [m["role"] for m in branch.messages] == [
        "assistant",
        "user",
        "assistant",
    ]  # no toolResult
    assert branch.files.details() == {"readFiles": ["a.py"], "modifiedFiles": ["b.py"]}


def test_transcript_format():
    text = transcript(
        [
            U("hi"),
            {
                "role": "assistant",
                "content": [
                    {"type": "thinking", "thinking": "t"},
                    {"type": "text", "text": "a"},
                    tool_call("read", path="x"),
                ],
            },
            {"role": "toolResult", "content": [{"type": "text", "text": "y" * 5000}]},
        ]
    )
    parts = text.split("\n\n")
    assert parts[:4] == [
        "[User]: hi",
        "[Assistant thinking]: t",
        "[Assistant]: a",
        '[Assistant tool calls]: read(path="x")',
    ]
    assert text.endswith("[... 3000 more characters truncated]")


def test_extractive_draft():
    s, root = build()
    s.append_message(U("and keep the old API"))
    summary = summarize_branch(collect_branch(s, root), custom_instructions="parser only")
    assert summary.summary.startswith(PREAMBLE)
    assert "## Goal" in summary.summary and "try approach B" not in summary.summary.split("## Goal")[0]
    assert 'edit(path="b.py")' in summary.summary
    # the branch's later user messages as what they are, not as the user's constraints (QA)
    assert "## Later requests\n- and keep the old API" in summary.summary
    assert "Constraints" not in summary.summary
    assert summary.summary.endswith(
        "<read-files>\na.py\n</read-files>\n\n<modified-files>\nb.py\n</modified-files>"
    )
    assert summary.details == {"readFiles": ["a.py"], "modifiedFiles": ["b.py"]}


def test_nothing_to_summarize():
    s = Session(MemoryStorage())
    u = s.append_message(U("only"))
    assert summarize_branch(collect_branch(s, u)).summary == NO_CONTENT


def test_command_summarizer_gets_prompt_on_stdin(tmp_path):
    s, root = build()
    script = tmp_path / "summ.py"
    script.write_text(
        "import os, sys\n"
        "data = sys.stdin.read()\n"
        "assert data.startswith('<conversation>') and 'Additional focus: be brief' in data\n"
        "print('SUMMARY of', data.count('[User]'), 'user turns;', os.environ['SESSIONTREE_INSTRUCTIONS'])\n"
    )
    out = summarize_branch(
        collect_branch(s, root),
        command=f"{sys.executable} {script}",
        custom_instructions="be brief",
    )
    assert "SUMMARY of 1 user turns; be brief" in out.summary


def test_a_summarizer_that_colours_its_output_leaves_no_codes_in_the_summary(tmp_path):
    """An `llm` wrapper writing colours had `\\u001b[31m` stored in the summary, which Pi and
    the exports then carry (QA); tabs and line breaks are kept."""
    s, root = build()
    script = tmp_path / "summ.py"
    script.write_text(
        "import sys\n"
        "sys.stdin.read()\n"
        "sys.stdout.write('\\x1b[1;31mGoal\\x1b[0m:\\tfix\\r\\n\\x1b]0;title\\x07- keep UTC\\x08\\n')\n"
    )
    out = summarize_branch(collect_branch(s, root), command=f"{sys.executable} {script}")
    assert "\n\nGoal:\tfix\n- keep UTC\n\n<read-files>" in out.summary


def test_command_summarizer_failures(tmp_path):
    s, root = build()
    branch = collect_branch(s, root)
    with pytest.raises(SummarizerError, match="not found"):
        summarize_branch(branch, command="definitely-not-a-command-xyz")
    with pytest.raises(
        SummarizerError, match=r"^summarizer exited with code 3 and printed nothing on stderr$"
    ):
        summarize_branch(
            branch, command=f"{sys.executable} -c 'import sys; sys.exit(3)'"
        )  # said "code 3:" (QA)
    with pytest.raises(SummarizerError, match=r"^summarizer exited with code 4: no key$"):
        summarize_branch(
            branch,
            command=f"{sys.executable} -c 'import sys; print(\"no key\", file=sys.stderr); sys.exit(4)'",
        )
    with pytest.raises(SummarizerError, match="printed nothing"):
        summarize_branch(branch, command=f"{sys.executable} -c 'pass'")


def test_collect_unknown_target_is_not_found():
    from sessiontree import SessionError

    s, _ = build()
    with pytest.raises(SessionError) as err:
        collect_branch(s, "ghost")
    assert err.value.code == "not_found"


def test_a_long_branch_is_decoded_only_as_far_as_the_budget_reaches(tmp_path):
    """Leaving the start of a long session behind abandons every entry after it; the summary
    reads the newest within the token budget and the branch summaries' file lists, so only
    those are decoded (all of them took a second at 100,000 entries before the dialog showed).
    The result is Pi's: the same messages and files as preparing every entry."""
    s = create_session(str(tmp_path), path=tmp_path / "long.jsonl")
    root = s.append_message(U("start"))
    s.append_message(A("ok"))
    details = {"readFiles": ["old.py"], "modifiedFiles": []}
    left = [s.move_to(root, BranchSummary("an older try", details=details))]
    for k in range(1500):  # ~300 tokens each: the budget holds about a quarter of them
        text = f"turn {k} " + "x" * 1200
        left.append(s.append_message(U(text) if k % 2 == 0 else A(text)))
    s.close()
    s = open_session(tmp_path / "long.jsonl")
    decoded: list[int] = []
    load_many = s.storage.load_many

    def counted(positions):
        decoded.extend(positions)
        return load_many(positions)

    s.storage.load_many = counted  # type: ignore[method-assign]
    branch = collect_branch(s, root)
    assert branch.size == len(left) == 1501
    every = [s.get_entry(i) for i in left]
    assert branch.messages == _prepare_messages(reversed(every), FileOps(), DEFAULT_BUDGET)
    assert BATCH < len(branch.messages) < len(left) / 3  # more than one batch read
    assert branch.files.details() == details  # from the oldest entry, past the budget
    assert len(decoded) < len(left) / 2, len(decoded)
