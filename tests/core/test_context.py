"""Pure context functions: the exact texts sent to the model, and the token estimate."""

from __future__ import annotations

from helpers import A, U, zero_usage
from sessiontree import convert_to_llm, estimate_context_tokens, estimate_tokens
from sessiontree.context import TokenTally


def test_summary_wrappers_byte_for_byte():
    out = convert_to_llm(
        [
            {"role": "branchSummary", "summary": "S1", "fromId": "x", "timestamp": 5},
            {"role": "compactionSummary", "summary": "S2", "tokensBefore": 9, "timestamp": 6},
        ]
    )
    assert out[0] == {
        "role": "user",
        "content": [
            {
                "type": "text",
                "text": "The following is a summary of a branch that this conversation came back"
                " from:\n\n<summary>\nS1</summary>",
            }
        ],
        "timestamp": 5,
    }
    assert out[1]["content"][0]["text"] == (
        "The conversation history before this point was compacted into the following summary:\n\n"
        "<summary>\nS2\n</summary>"
    )


def test_convert_roles():
    bash_ok = {
        "role": "bashExecution",
        "command": "ls",
        "output": "a\nb",
        "exitCode": 0,
        "cancelled": False,
        "truncated": False,
    }
    bash_fail = {
        "role": "bashExecution",
        "command": "x",
        "output": "",
        "exitCode": 2,
        "cancelled": False,
        "truncated": True,
        "fullOutputPath": "/tmp/o",
    }
    bash_cancel = {**bash_ok, "cancelled": True}
    hidden = {**bash_ok, "excludeFromContext": True}
    custom = {
        "role": "custom",
        "customType": "n",
        "content": "note",
        "display": False,
        "timestamp": 3,
    }
    out = convert_to_llm([U("u"), A("a"), bash_ok, bash_fail, bash_cancel, hidden, custom, {"role": "weird"}])
    assert [m["role"] for m in out] == ["user", "assistant", "user", "user", "user", "user"]
    assert out[2]["content"][0]["text"] == "Ran `ls`\n```\na\nb\n```"
    assert (
        out[3]["content"][0]["text"]
        == "Ran `x`\n(no output)\n\nCommand exited with code 2\n\n[Output truncated. Full output: /tmp/o]"
    )
    assert out[4]["content"][0]["text"].endswith("\n\n(command cancelled)")
    assert out[5] == {"role": "user", "content": [{"type": "text", "text": "note"}], "timestamp": 3}


def test_token_estimates():
    assert estimate_tokens(U("abcd" * 10)) == 10
    assert estimate_tokens(U("abcde")) == 2
    img = {
        "role": "user",
        "content": [
            {"type": "text", "text": "hi"},
            {"type": "image", "data": "x", "mimeType": "image/png"},
        ],
    }
    assert estimate_tokens(img) == -(-(2 + 4800) // 4)
    call = {
        "role": "assistant",
        "content": [{"type": "toolCall", "id": "1", "name": "read", "arguments": {"path": "a"}}],
    }
    assert estimate_tokens(call) == -(-(4 + len('{"path":"a"}')) // 4)
    assert estimate_tokens({"role": "compactionSummary", "summary": "x" * 8}) == 2
    assert estimate_tokens({"role": "bashExecution", "command": "ls", "output": "ab"}) == 1
    assert estimate_tokens({"role": "mystery", "content": "zzzz"}) == 0
    assert estimate_tokens(U("😀")) == 1  # 2 UTF-16 units, as JavaScript counts


def test_context_estimate_uses_last_usage():
    msgs = [
        U("x" * 400),
        A("r", usage=zero_usage(input=1000, output=500, cacheRead=200, cacheWrite=100)),
        U("y" * 40),
    ]
    assert estimate_context_tokens(msgs) == 1800 + 10
    aborted = A("r", usage=zero_usage(totalTokens=5000), stop="aborted")
    assert estimate_context_tokens([U("x" * 8), aborted]) == 2 + estimate_tokens(aborted)
    assert estimate_context_tokens([U("x" * 8)]) == 2


def test_a_usage_reported_before_the_compaction_is_not_the_size_after_it():
    """A kept message's usage measured the context the compaction replaced: the size at the
    compaction and after it said 175k where the compacted context held some 26k (QA). As Pi's
    `getContextUsage` does, such a usage is not trusted: the messages are estimated, until an
    assistant answers after the compaction."""
    summary = {"role": "compactionSummary", "summary": "s" * 400, "tokensBefore": 175_000, "timestamp": 1_000}
    kept = {**A("k" * 40, usage=zero_usage(input=175_000)), "timestamp": 500}
    after = {**U("u" * 80), "timestamp": 2_000}
    messages = [summary, kept, after]
    assert estimate_context_tokens(messages) == sum(estimate_tokens(m) for m in messages)
    answer = {**A("a" * 8, usage=zero_usage(input=30_000)), "timestamp": 3_000}
    assert estimate_context_tokens([*messages, answer, after]) == 30_000 + estimate_tokens(after)
    tally = TokenTally()
    for m in messages:
        tally.add(m)
    assert tally.total == estimate_context_tokens(messages)
