"""A streamed context (`Session.stream_context`, what `context --json` and `--llm` write) is the
built one: the same messages, state and token estimate, at every point of a session, with
compactions, branch summaries and moves; and it is read a stretch at a time, never whole."""

from __future__ import annotations

from pathlib import Path
from unittest import mock

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from helpers import PI_FIXTURES, A, U, examples, session_from_steps, zero_usage
from sessiontree import MemoryStorage, Session, create_session, open_session
from sessiontree.context import TokenTally, estimate_context_tokens
from sessiontree.storage.index import LEAF

DEMO = Path(__file__).parents[2] / "src/sessiontree/demo/demo.jsonl"


def streamed(session: Session, at: str | None = None) -> tuple[list, tuple, int]:
    stream = session.stream_context(at=at)
    messages = list(stream)
    return messages, (stream.thinking_level, stream.model, stream.active_tool_names), stream.tokens


def built(session: Session, at: str | None = None) -> tuple[list, tuple, int]:
    context = session.build_context(at=at)
    state = (context.thinking_level, context.model, context.active_tool_names)
    return context.messages, state, context.tokens


STEPS = ["u", "a", "a-usage", "compact", "back", "summary", "model"]


@settings(max_examples=examples(120), deadline=None)
@given(steps=st.lists(st.tuples(st.sampled_from(STEPS), st.integers(0, 99)), max_size=40))
def test_a_streamed_context_is_the_built_one(steps):
    s, ids = session_from_steps(steps)
    with mock.patch("sessiontree.session.STREAM_ENTRIES", 3):  # many stretches
        for at in {ids[-1], ids[len(ids) // 2], None}:
            assert streamed(s, at) == built(s, at)


@pytest.mark.parametrize("path", [*sorted(PI_FIXTURES.glob("*.jsonl")), DEMO], ids=lambda p: p.name)
def test_a_streamed_context_of_a_real_file_is_the_built_one(path):
    with open_session(path, read_only=True) as s, mock.patch("sessiontree.session.STREAM_ENTRIES", 7):
        tree = s.tree
        points = [i for i in range(0, len(tree), max(1, len(tree) // 30)) if tree.kind[i] != LEAF]
        for i in points:
            assert streamed(s, tree.ids[i]) == built(s, tree.ids[i])
        assert streamed(s) == built(s)


def test_a_streamed_context_is_decoded_a_stretch_at_a_time(tmp_path):
    path = tmp_path / "chain.jsonl"
    with create_session("/w", path=path) as s:
        for k in range(400):
            s.append_message(U(f"u{k}") if k % 2 == 0 else A(f"a{k}"))
    with open_session(path, read_only=True) as s, mock.patch("sessiontree.session.STREAM_ENTRIES", 100):
        decoded: list[int] = []
        load_many = s.storage.load_many

        def counting(positions):
            decoded.append(len(positions))
            return load_many(positions)

        s.storage.load_many = counting  # type: ignore[method-assign]
        stream = s.stream_context()
        first = next(iter(stream))
        assert first["content"] == "u0"
        assert decoded == [100]  # nothing past the first stretch yet
        rest = list(stream)
        assert decoded == [100] * 4 and len(rest) == 399
        assert stream.tokens == s.build_context().tokens


def test_the_token_estimate_waits_for_the_last_message():
    s = Session(MemoryStorage())
    s.append_message(U("hello"))
    stream = s.stream_context()
    with pytest.raises(RuntimeError, match="iterate"):
        _ = stream.tokens
    assert list(stream) and stream.tokens == s.build_context().tokens


def test_a_session_with_transforms_streams_what_it_builds():
    def last_two(entries):
        return entries[-2:]

    s = Session(MemoryStorage(), transforms=[last_two])
    for k in range(5):
        s.append_message(U(f"u{k}"))
    assert streamed(s) == built(s)
    assert [m["content"] for m in streamed(s)[0]] == ["u3", "u4"]


def test_an_empty_session_streams_nothing():
    s = Session(MemoryStorage())
    assert streamed(s) == built(s) == ([], ("off", None, None), 0)


usages = st.one_of(
    st.none(),
    st.builds(lambda t: zero_usage(totalTokens=t), st.integers(0, 50)),
    st.builds(lambda i, o: zero_usage(input=i, output=o), st.integers(0, 9), st.integers(0, 9)),
)
messages = st.lists(
    st.one_of(
        st.builds(lambda t: U(t), st.text(max_size=12)),
        st.builds(
            lambda t, u, stop: {**A(t, stop=stop), "usage": u},
            st.text(max_size=12),
            usages,
            st.sampled_from(["stop", "aborted", "error", "toolUse"]),
        ),
        st.builds(lambda t: {"role": "branchSummary", "summary": t, "fromId": "x"}, st.text(max_size=12)),
    ),
    max_size=20,
)


@settings(max_examples=examples(300), deadline=None)
@given(messages)
def test_the_tally_is_the_estimate_of_the_whole_list(messages):
    tally = TokenTally()
    for msg in messages:
        tally.add(msg)
    assert tally.total == estimate_context_tokens(messages)
