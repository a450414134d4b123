"""From a path of entries to what the model sees.

Pure functions, no storage: `select_context_entries` applies the compaction cut, `project` turns
entries into AgentMessages, `convert_to_llm` turns those into provider messages (the summary
wrappers are reproduced byte for byte, as pi-coding-agent's `core/messages.ts` writes them), and
the `estimate_*` functions implement Pi's chars/4 token estimate.
"""

from __future__ import annotations

import math
from collections.abc import Callable, Iterable, Iterator, Mapping, Sequence
from dataclasses import dataclass, field
from typing import Any, NamedTuple, TypeGuard

from .model.entries import (
    ActiveToolsChangeEntry,
    BranchSummaryEntry,
    CompactionEntry,
    CustomEntry,
    CustomMessageEntry,
    Entry,
    MessageEntry,
    ModelChangeEntry,
    ThinkingLevelChangeEntry,
)
from .model.ids import iso_to_ms
from .model.messages import count_images, json_compact

Message = dict[str, Any]
Transform = Callable[[list[Entry]], list[Entry]]
Projector = Callable[[CustomEntry, int, list[Entry]], "list[Message] | None"]

BRANCH_SUMMARY_PREFIX = (
    "The following is a summary of a branch that this conversation came back from:\n\n<summary>\n"
)
BRANCH_SUMMARY_SUFFIX = "</summary>"
COMPACTION_SUMMARY_PREFIX = (
    "The conversation history before this point was compacted into the following summary:\n\n<summary>\n"
)
COMPACTION_SUMMARY_SUFFIX = "\n</summary>"

IMAGE_CHARS = 4800


@dataclass(frozen=True, slots=True)
class ModelRef:
    provider: str
    model_id: str

    def __str__(self) -> str:
        return f"{self.provider}/{self.model_id}"


@dataclass(slots=True)
class SessionContext:
    """What the model sees at one leaf: messages plus the state derived from the path."""

    messages: list[Message]
    thinking_level: str = "off"
    model: ModelRef | None = None
    active_tool_names: list[str] | None = None
    entries: list[Entry] = field(default_factory=list)
    omitted: int = 0  # context entries left out by a `limit` (the oldest ones)
    # the messages those would have added, as Pi's projection makes them (counted by entry type,
    # without reading the entries; custom entries a projector would turn into messages are not)
    omitted_messages: int = 0

    @property
    def tokens(self) -> int:
        return estimate_context_tokens(self.messages)

    def to_llm(self) -> list[Message]:
        return convert_to_llm(self.messages)


# --- entries → context entries ------------------------------------------------------------------


def select_indices(
    n: int,
    is_compaction: Callable[[int], bool],
    compaction_info: Callable[[int], tuple[str | None, bool]],
    id_at: Callable[[int], str],
    last: int | None = None,
) -> list[int]:
    """Pi's default compaction transform over a path of `n` items, as indices into the path:
    the newest compaction moves to the front, followed by its retained range (`retainedTail`
    messages travel inside the entry; otherwise the items from `firstKeptEntryId` up to the
    compaction), then everything after it. Works on decoded entries and on index positions.
    `last`: the newest compaction's index (-1: none), when the caller knows it already.

    An older compaction inside the retained range is left out, as Pi's coding agent leaves it
    (`buildSessionContext` in its `core/session-manager.js` sends the newest compaction's
    summary only). Pi's compactor makes such a range: it looks for the next cut from the last
    compaction's `firstKeptEntryId` on, so a second compaction soon after the first keeps
    entries from before it, and its summary was sent twice here."""
    if last is None:
        last = next((k for k in range(n - 1, -1, -1) if is_compaction(k)), -1)
    if last < 0:
        return list(range(n))
    first_kept, has_tail = compaction_info(last)
    after = list(range(last + 1, n))
    if has_tail or first_kept is None:
        return [last, *after]
    start = next((k for k in range(last) if id_at(k) == first_kept), last)
    return [last, *(k for k in range(start, last) if not is_compaction(k)), *after]


def select_context_entries(path: Sequence[Entry]) -> list[Entry]:
    """`select_indices` over decoded entries."""

    def info(k: int) -> tuple[str | None, bool]:
        entry = path[k]
        assert isinstance(entry, CompactionEntry)
        return entry.first_kept_entry_id, entry.retained_tail is not None

    chosen = select_indices(
        len(path), lambda k: isinstance(path[k], CompactionEntry), info, lambda k: path[k].id
    )
    return [path[k] for k in chosen]


def project(entries: list[Entry], projectors: Mapping[str, Projector] | None = None) -> list[Message]:
    """Context entries → AgentMessages, as Pi's `buildSessionContext` projects them."""
    out: list[Message] = []
    for k, entry in enumerate(entries):
        if isinstance(entry, MessageEntry):
            out.append(entry.message)
        elif isinstance(entry, CustomMessageEntry):
            msg: Message = {
                "role": "custom",
                "customType": entry.custom_type,
                "content": entry.content,
                "display": entry.display,
                "timestamp": iso_to_ms(entry.timestamp),
            }
            if entry.details is not None:
                msg["details"] = entry.details
            out.append(msg)
        elif isinstance(entry, CompactionEntry):
            out.append(
                {
                    "role": "compactionSummary",
                    "summary": entry.summary,
                    "tokensBefore": entry.tokens_before,
                    "timestamp": iso_to_ms(entry.timestamp),
                }
            )
            if entry.retained_tail:
                out.extend(entry.retained_tail)
        elif isinstance(entry, BranchSummaryEntry):
            if entry.summary:
                out.append(
                    {
                        "role": "branchSummary",
                        "summary": entry.summary,
                        "fromId": entry.from_id,
                        "timestamp": iso_to_ms(entry.timestamp),
                    }
                )
        elif isinstance(entry, CustomEntry) and projectors:
            projector = projectors.get(entry.custom_type)
            if projector is not None:
                produced = projector(entry, k, entries)
                if isinstance(produced, list):
                    out.extend(produced)
    return out


def derive_state(
    thinking: Entry | None, model_source: Entry | None, tools: Entry | None
) -> tuple[str, ModelRef | None, list[str] | None]:
    """Thinking level, model and active tools from the nearest entries of each kind on the leaf's
    full root path (found by `TreeIndex.state_entries`)."""
    level = thinking.thinking_level if isinstance(thinking, ThinkingLevelChangeEntry) else "off"
    model: ModelRef | None = None
    if isinstance(model_source, ModelChangeEntry):
        model = ModelRef(model_source.provider, model_source.model_id)
    elif isinstance(model_source, MessageEntry):
        msg = model_source.message
        provider, model_id = msg.get("provider"), msg.get("model")
        if isinstance(provider, str) and isinstance(model_id, str):
            model = ModelRef(provider, model_id)
    names = tools.active_tool_names if isinstance(tools, ActiveToolsChangeEntry) else None
    return level, model, names


# --- context messages → provider messages -------------------------------------------------------


def _text_message(text: str, timestamp: Any) -> Message:
    msg: Message = {"role": "user", "content": [{"type": "text", "text": text}]}
    if timestamp is not None:
        msg["timestamp"] = timestamp
    return msg


class BashOutcome(NamedTuple):
    """How a user's command (`bashExecution`) ended, as its text for the model says it."""

    cancelled: bool
    failed_with: Any  # its exit code when not 0 (None: it succeeded, was cancelled or gave none)
    full_output: str | None  # where its whole output is, when the message's was cut


def bash_outcome(msg: Message) -> BashOutcome:
    code = msg.get("exitCode")
    cancelled = bool(msg.get("cancelled"))
    path = msg.get("fullOutputPath") if msg.get("truncated") else None
    return BashOutcome(cancelled, None if cancelled or code in (None, 0) else code, path or None)


def bash_execution_text(msg: Message) -> str:
    command = msg.get("command", "")
    output = msg.get("output")
    text = f"Ran `{command}`\n"
    text += f"```\n{output}\n```" if output else "(no output)"
    outcome = bash_outcome(msg)
    if outcome.cancelled:
        text += "\n\n(command cancelled)"
    elif outcome.failed_with is not None:
        text += f"\n\nCommand exited with code {outcome.failed_with}"
    if outcome.full_output:
        text += f"\n\n[Output truncated. Full output: {outcome.full_output}]"
    return text


def convert_to_llm(messages: Iterable[Message]) -> list[Message]:
    """AgentMessages → the messages a provider receives (Pi's `convertToLlm`)."""
    return list(iter_llm(messages))


def iter_llm(messages: Iterable[Message]) -> Iterator[Message]:
    """`convert_to_llm` one message at a time."""
    for msg in messages:
        if not isinstance(msg, dict):
            continue
        role = msg.get("role")
        if role in ("user", "assistant", "toolResult"):
            yield msg
        elif role == "bashExecution":
            if not msg.get("excludeFromContext"):
                yield _text_message(bash_execution_text(msg), msg.get("timestamp"))
        elif role == "custom":
            content = msg.get("content")
            if isinstance(content, str):
                content = [{"type": "text", "text": content}]
            converted: Message = {"role": "user", "content": content}
            if "timestamp" in msg:
                converted["timestamp"] = msg["timestamp"]
            yield converted
        elif role == "branchSummary":
            text = BRANCH_SUMMARY_PREFIX + str(msg.get("summary", "")) + BRANCH_SUMMARY_SUFFIX
            yield _text_message(text, msg.get("timestamp"))
        elif role == "compactionSummary":
            text = COMPACTION_SUMMARY_PREFIX + str(msg.get("summary", "")) + COMPACTION_SUMMARY_SUFFIX
            yield _text_message(text, msg.get("timestamp"))


# --- token estimates ----------------------------------------------------------------------------


def _js_len(text: object) -> int:
    """Length in UTF-16 code units, as JavaScript's `.length` counts (Pi's estimate uses it)."""
    if not isinstance(text, str):
        return 0
    if text.isascii():
        return len(text)
    return len(text.encode("utf-16-le", "surrogatepass")) // 2


def _blocks_chars(content: Any) -> int:
    if isinstance(content, str):
        return _js_len(content)
    if not isinstance(content, list):
        return 0
    chars = 0
    for block in content:
        if isinstance(block, dict) and block.get("type") == "text":
            chars += _js_len(block.get("text"))
    return chars + IMAGE_CHARS * count_images(content)


def estimate_tokens(msg: Message) -> int:
    """ceil(chars / 4) per Pi's rules; 0 for unknown roles."""
    if not isinstance(msg, dict):
        return 0
    role = msg.get("role")
    if role in ("user", "custom", "toolResult"):
        chars = _blocks_chars(msg.get("content"))
    elif role == "assistant":
        chars = 0
        content = msg.get("content")
        if isinstance(content, str):
            chars = _js_len(content)
        elif isinstance(content, list):
            for block in content:
                if not isinstance(block, dict):
                    continue
                kind = block.get("type")
                if kind == "text":
                    chars += _js_len(block.get("text"))
                elif kind == "thinking":
                    chars += _js_len(block.get("thinking"))
                elif kind == "toolCall":
                    chars += _js_len(block.get("name")) + _js_len(json_compact(block.get("arguments")))
    elif role == "bashExecution":
        chars = _js_len(msg.get("command")) + _js_len(msg.get("output"))
    elif role in ("branchSummary", "compactionSummary"):
        chars = _js_len(msg.get("summary"))
    else:
        return 0
    return math.ceil(chars / 4)


def usage_number(value: Any) -> TypeGuard[int | float]:
    """Whether a usage figure is a number to count: a JSON number past a double's range (1e400)
    reads as infinity, which no count of tokens is (and `int` of it raised)."""
    return isinstance(value, (int, float)) and not isinstance(value, bool) and math.isfinite(value)


def usage_total(usage: Any) -> int:
    if not isinstance(usage, dict):
        return 0
    total = usage.get("totalTokens")
    if usage_number(total) and total > 0:
        return int(total)
    parts = [usage.get(k) for k in ("input", "output", "cacheRead", "cacheWrite")]
    return int(sum(p for p in parts if usage_number(p)))


def _reported_usage(msg: Any) -> int:
    """The usage total of an assistant message that completed (0: none, or not one): what
    Pi's estimate starts from."""
    if not isinstance(msg, dict) or msg.get("role") != "assistant":
        return 0
    return 0 if msg.get("stopReason") in ("aborted", "error") else usage_total(msg.get("usage"))


def estimate_context_tokens(messages: Sequence[Message]) -> int:
    """The last usable assistant usage total plus estimates of the messages after it; the sum of
    all estimates when no assistant reported usage. A usage reported before the latest
    compaction is not usable: it measured the context the compaction replaced (175k where the
    compacted context held 26k; QA). Pi says so too (`getContextUsage` in pi-coding-agent's
    `core/agent-session.ts` shows the size as unknown until an assistant entry after the
    compaction entry reports one): the messages are estimated instead. A list of messages does
    not say which came after the compaction entry, so their timestamps do: an answer dated
    before its compaction (a skewed clock) is taken for an older one, where Pi and the `t`
    column (`sizes`) go by the entries' order."""
    since = _compacted_at(messages)
    for k in range(len(messages) - 1, -1, -1):
        total = _reported_usage(messages[k])
        if total > 0:
            if not _reported_since(messages[k], since):
                break
            return total + sum(estimate_tokens(m) for m in messages[k + 1 :])
    return sum(estimate_tokens(m) for m in messages)


def _stamp(msg: Any) -> float | None:
    """A message's `timestamp` (Unix milliseconds), None if it has none."""
    value = msg.get("timestamp") if isinstance(msg, dict) else None
    return value if isinstance(value, int | float) and not isinstance(value, bool) else None


def _compacted_at(messages: Sequence[Message]) -> float | None:
    """When the compaction that starts `messages` was made (its summary's timestamp): the
    first summary, as a retained tail may carry an older one after it."""
    for msg in messages:
        if _is_compaction(msg):
            return _stamp(msg)
    return None


def _is_compaction(msg: Any) -> bool:
    return isinstance(msg, dict) and msg.get("role") == "compactionSummary"


def _reported_since(msg: Message, since: float | None) -> bool:
    """Whether an assistant's usage was reported after the compaction made at `since` (true
    when either time is unknown: nothing says it is older)."""
    at = _stamp(msg)
    return since is None or at is None or at > since


def reports_usage(messages: Sequence[Message]) -> bool:
    """Whether an assistant among `messages` reported its usage: then the estimate of a context
    ending with them does not depend on what came before (see `estimate_context_tokens`)."""
    return any(_reported_usage(m) > 0 for m in reversed(messages))


class TokenTally:
    """`estimate_context_tokens` of messages seen one at a time, holding only those after the
    last reported usage (a streamed context never holds them all)."""

    def __init__(self) -> None:
        self._usage = 0
        self._after: list[Message] = []
        # After a compaction (`estimate_context_tokens`): its time, every message's estimate
        # since, and whether the last usage reported was older than it (then that sum counts).
        self._compacted = False
        self._since: float | None = None
        self._all = 0
        self._stale = False

    def add(self, msg: Message) -> None:
        if not self._compacted and _is_compaction(msg):
            self._compacted, self._since = True, _stamp(msg)
        if self._compacted:
            self._all += estimate_tokens(msg)
        total = _reported_usage(msg)
        if total > 0:
            self._stale = not _reported_since(msg, self._since)
            if not self._stale:
                self._usage, self._after = total, []
                return
        self._after.append(msg)

    @property
    def total(self) -> int:
        if self._stale:
            return self._all
        return self._usage + sum(estimate_tokens(m) for m in self._after)


class ContextStream:
    """What the model sees at one leaf, its messages read a stretch of entries at a time
    (`Session.stream_context`) as it is iterated, once: the state is known at once, `tokens`
    once every message has been taken (it is Pi's estimate, which needs the last of them)."""

    def __init__(
        self,
        messages: Iterable[Message],
        thinking_level: str = "off",
        model: ModelRef | None = None,
        active_tool_names: list[str] | None = None,
    ) -> None:
        self.thinking_level = thinking_level
        self.model = model
        self.active_tool_names = active_tool_names
        self._source = iter(messages)
        self._tally = TokenTally()
        self._done = False

    def __iter__(self) -> Iterator[Message]:
        if self._done:  # a second pass found nothing, silently (library QA); a pass left
            # part-way goes on where it stopped
            raise RuntimeError("a context stream is read once: call stream_context again")
        for msg in self._source:
            self._tally.add(msg)
            yield msg
        self._done = True

    @property
    def tokens(self) -> int:
        if not self._done:
            raise RuntimeError("the token estimate needs every message: iterate the stream first")
        return self._tally.total
