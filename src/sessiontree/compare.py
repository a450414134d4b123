"""Comparing what the model sees at two entries.

Two points of one session usually share a beginning (everything before the fork that separates
them) and then differ. `compare_contexts` finds the longest shared prefix of the two contexts,
then lines the two tails up (a compaction can make the tails share messages again: the kept
messages follow a summary on one side and stand alone on the other). `comparison_lines`
renders that as a unified listing — the shared prefix as one line, then `-` for messages only
at A, `+` for messages only at B, ` ` for messages both tails hold — with token totals.
"""

from __future__ import annotations

import difflib
from collections.abc import Sequence
from dataclasses import dataclass
from typing import Any, NamedTuple

from .context import SessionContext, estimate_context_tokens
from .display import counted, message_summary, one_line
from .export.common import resolve_target
from .model.messages import json_compact
from .session import Session

Message = dict[str, Any]


@dataclass(frozen=True, slots=True)
class Side:
    """One of the two points compared."""

    entry_id: str
    context: SessionContext

    @property
    def tokens(self) -> int:
        return self.context.tokens


@dataclass(frozen=True, slots=True)
class Comparison:
    """The two contexts, how many messages they share from the start, and how the tails line
    up (`ops`: difflib opcodes over the tails, A's tail against B's)."""

    a: Side
    b: Side
    shared: int
    ops: Sequence[tuple[str, int, int, int, int]]

    @property
    def shared_messages(self) -> list[Message]:
        return self.a.context.messages[: self.shared]

    @property
    def tail_a(self) -> list[Message]:
        return self.a.context.messages[self.shared :]

    @property
    def tail_b(self) -> list[Message]:
        return self.b.context.messages[self.shared :]

    @property
    def same(self) -> bool:
        """Whether the model would be sent the same: the messages, thinking level, model and
        tools."""
        a, b = self.a.context, self.b.context
        return (
            not self.tail_a
            and not self.tail_b
            and (a.thinking_level, a.model, a.active_tool_names)
            == (b.thinking_level, b.model, b.active_tool_names)
        )

    @property
    def shared_tokens(self) -> int:
        """The shared part's tokens counted as a context's are (`estimate_context_tokens`: the
        last usage an assistant reported, plus estimates after it), so that the part and the
        wholes compare: by length, the part could exceed either whole (QA)."""
        return estimate_context_tokens(self.shared_messages)

    def tail_tokens(self, side: Side) -> int:
        """What `side`'s context adds after the shared part, in the same count."""
        return max(side.context.tokens - self.shared_tokens, 0)

    def to_json(self) -> dict[str, Any]:
        """The comparison as plain data (the CLI's `--json`)."""

        def side(s: Side, tail: list[Message]) -> dict[str, Any]:
            ctx = s.context
            return {
                "id": s.entry_id,
                "messages": len(ctx.messages),
                "tokens": ctx.tokens,
                "tailTokens": self.tail_tokens(s),
                "model": None if ctx.model is None else str(ctx.model),
                "thinkingLevel": ctx.thinking_level,
                "tail": tail,
            }

        return {
            "shared": {"messages": self.shared, "tokens": self.shared_tokens},
            "a": side(self.a, self.tail_a),
            "b": side(self.b, self.tail_b),
            "ops": [
                {
                    "op": tag,
                    "a": [i1 + self.shared, i2 + self.shared],
                    "b": [j1 + self.shared, j2 + self.shared],
                }
                for tag, i1, i2, j1, j2 in self.ops
            ],
        }


def _key(message: Message) -> str:
    """Messages compare by their whole content (two entries saying the same thing are the same
    message to the model)."""
    return json_compact(message)


def compare_contexts(session: Session, a: str, b: str) -> Comparison:
    """Compare the contexts at entries `a` and `b`."""
    for entry_id in (a, b):
        resolve_target(session, entry_id)  # unknown ids and `leaf` entries are refused
    ctx_a = session.build_context(at=a)
    ctx_b = session.build_context(at=b)
    keys_a = [_key(m) for m in ctx_a.messages]
    keys_b = [_key(m) for m in ctx_b.messages]
    shared = 0
    for ka, kb in zip(keys_a, keys_b, strict=False):
        if ka != kb:
            break
        shared += 1
    matcher = difflib.SequenceMatcher(None, keys_a[shared:], keys_b[shared:], autojunk=False)
    return Comparison(Side(a, ctx_a), Side(b, ctx_b), shared, matcher.get_opcodes())


def message_line(message: Message, width: int = 100) -> str:
    """A message in one inert line: its role and the start of its text."""
    role = message.get("role") if isinstance(message, dict) else None
    if not isinstance(role, str):
        return one_line(f"?: {json_compact(message)}", width)
    # As the tree's row says it: an aborted answer with no text said nothing here (QA).
    return one_line(f"{role}: {message_summary(message)}", width)


class Row(NamedTuple):
    """One line of a comparison, drawn at any width (`line`): a text, or a text followed by a
    message cut to fit."""

    prefix: str
    message: Message | None = None

    def line(self, width: int) -> str:
        if self.message is None:
            return self.prefix
        return self.prefix + message_line(self.message, max(20, width - len(self.prefix)))


def comparison_head(c: Comparison) -> list[Row]:
    """What the comparison is of: a line per context, then what they share."""

    def head(sign: str, side: Side, tail: list[Message]) -> Row:
        # Every count is the model's (Pi's: the last usage an assistant reported, system prompt
        # and tools included, plus estimates after it), the shared part's too: the shared text
        # estimated by its length read larger than either whole context (QA).
        ctx = side.context
        text = (
            f"{sign} {side.entry_id}: {counted(len(ctx.messages), 'message')}, ~{ctx.tokens:,} tokens"
            f" (the model's count) · {len(tail):,} after the shared part, ~{c.tail_tokens(side):,} tokens"
            f" · {ctx.model or 'no model'}, thinking {ctx.thinking_level}"
        )
        return Row(one_line(text, 400))

    rows = [head("---", c.a, c.tail_a), head("+++", c.b, c.tail_b)]
    if c.shared:
        shared = counted(c.shared, "shared message")
        last = c.shared_messages[-1]
        rows.append(Row(f"= {shared}, ~{c.shared_tokens:,} tokens, ending with ", last))
    else:
        rows.append(Row("= nothing shared: the contexts differ from the first message"))
    return rows


def comparison_body(c: Comparison, *, context: int = 2) -> list[Row]:
    """The tails lined up, a row per message (see the module docstring), so a viewer draws
    the ones on screen, at its width. Runs of messages both tails hold, longer than
    2×`context`, are collapsed to their first and last `context`."""
    tail_a, tail_b = c.tail_a, c.tail_b
    rows: list[Row] = []
    for tag, i1, i2, j1, j2 in c.ops:
        if tag == "equal":
            run = tail_a[i1:i2]
            if len(run) > 2 * context:
                rows += [Row(" ", m) for m in run[:context]]
                rows.append(Row(f"  … {len(run) - 2 * context:,} more messages both hold …"))
                rows += [Row(" ", m) for m in run[-context:]]
            else:
                rows += [Row(" ", m) for m in run]
            continue
        rows += [Row("-", m) for m in tail_a[i1:i2]]
        rows += [Row("+", m) for m in tail_b[j1:j2]]
    if not tail_a and not tail_b:
        a, b = c.a.context, c.b.context
        # The messages alone are not the whole of what is sent: "identical" beside a different
        # model, with `--exit-code` saying they differ (QA).
        differ = [
            what
            for what, x, y in (
                ("model", a.model, b.model),
                ("thinking level", a.thinking_level, b.thinking_level),
                ("active tools", a.active_tool_names, b.active_tool_names),
            )
            if x != y
        ]
        if differ:
            rows.append(Row(f"(the same messages; the {' and '.join(differ)} differ)"))
        else:
            rows.append(Row("(the two contexts are identical)"))
    return rows


def comparison_lines(c: Comparison, *, width: int = 100, context: int = 2) -> list[str]:
    """The head and the body as text lines of at most `width` cells (the head's aside)."""
    rows = comparison_head(c) + comparison_body(c, context=context)
    return [row.line(width) for row in rows]


__all__ = [
    "Comparison",
    "Row",
    "Side",
    "compare_contexts",
    "comparison_body",
    "comparison_head",
    "comparison_lines",
    "message_line",
]
