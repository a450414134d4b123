"""Branch summaries: which entries a move abandons, the transcript of them, and summarizers.

Collection, transcript and the final text follow Pi's branch summarisation (pi-coding-agent's
`core/compaction/branch-summarization.ts`). Two summarizers ship: an offline extractive draft
(always available, meant to be edited) and any external command that reads the prompt on stdin
and prints the summary, so LLM command-line tools plug in (`--summarizer "llm -m gpt-4o-mini"`).
"""

from __future__ import annotations

import contextlib
import os
import re
import shlex
import signal
import subprocess
import threading
import time
from collections.abc import Iterable, Iterator, Sequence
from dataclasses import dataclass, field
from typing import Any

from .context import Message, convert_to_llm, estimate_tokens
from .model.entries import (
    BranchSummaryEntry,
    CompactionEntry,
    CustomMessageEntry,
    Entry,
    MessageEntry,
)
from .model.ids import iso_to_ms
from .model.messages import (
    assistant_text,
    content_text,
    format_tool_call,
    thinking_text,
    tool_calls,
)
from .session import BranchSummary, Session
from .storage.index import BRANCH_SUMMARY

PREAMBLE = (
    "The user explored a different conversation branch before returning here.\n"
    "Summary of that exploration:\n\n"
)
NO_CONTENT = "No content to summarize"
TOOL_RESULT_LIMIT = 2000
DEFAULT_BUDGET = 128_000 - 16_384

DEFAULT_INSTRUCTIONS = """Summarize the conversation above: it is a branch the user explored and \
is now leaving. The summary is context for when they come back to it later. Output only the \
summary, in this format:

## Goal
What the user was trying to achieve.

## Constraints & Preferences
Requirements and preferences the user stated.

## Progress
### Done
- [x] Completed work
### In Progress
- [ ] Unfinished work
### Blocked
- Anything that stopped progress

## Key Decisions
- **Decision**: rationale

## Next Steps
1. What would come next

Be concise. Keep exact file paths, function names and error messages."""


@dataclass(slots=True)
class FileOps:
    read: set[str] = field(default_factory=set)
    written: set[str] = field(default_factory=set)
    edited: set[str] = field(default_factory=set)

    def add_calls(self, message: dict[str, Any]) -> None:
        for call in tool_calls(message):
            args = call.get("arguments")
            path = args.get("path") if isinstance(args, dict) else None
            if not isinstance(path, str):
                continue
            name = call.get("name")
            if name == "read":
                self.read.add(path)
            elif name == "write":
                self.written.add(path)
            elif name == "edit":
                self.edited.add(path)

    def add_details(self, details: Any) -> None:
        if not isinstance(details, dict):
            return
        for key, target in (("readFiles", self.read), ("modifiedFiles", self.edited)):
            values = details.get(key)
            if isinstance(values, list):
                target.update(v for v in values if isinstance(v, str))

    def details(self) -> dict[str, list[str]]:
        modified = self.edited | self.written
        return {"readFiles": sorted(self.read - modified), "modifiedFiles": sorted(modified)}


@dataclass(slots=True)
class BranchToSummarize:
    """The abandoned part of a move: entries from the old leaf back to the common ancestor."""

    size: int  # how many entries the move leaves behind
    common_ancestor_id: str | None
    messages: list[Message] = field(default_factory=list)
    files: FileOps = field(default_factory=FileOps)

    @property
    def empty(self) -> bool:
        return not self.messages


BATCH = 256  # entries decoded at once, newest first, until the budget is spent


def collect_branch(
    session: Session, target_id: str | None, old_leaf_id: str | None = None
) -> BranchToSummarize:
    """Entries that moving from the leaf (or `old_leaf_id`) to `target_id` leaves behind.

    Common ancestor = the deepest entry on the target's root path that is also on the old
    leaf's root path; the walk goes from the old leaf up to it (exclusive) and, like Pi's
    implementation, does not stop at compactions (they become summary messages). Only what
    the summary reads is decoded: the newest entries within the budget and the branch
    summaries (their file lists), found by the index's entry types. Leaving the start of a
    deep session behind abandons tens of thousands of entries, and decoding them all took a
    second before the dialog showed.
    """
    old = session.leaf_id if old_leaf_id is None else old_leaf_id
    if old is None:
        return BranchToSummarize(0, None)
    index = session.tree
    old_pos = session.position(old)
    old_path = index.path_to_root(old_pos)
    on_old = set(old_path)
    common = -1
    if target_id is not None:
        for k in reversed(index.path_to_root(session.position(target_id))):
            if k in on_old:
                common = k
                break
    cut = old_path.index(common) + 1 if common >= 0 else 0
    left = old_path[cut:]
    branch = BranchToSummarize(len(left), None if common < 0 else index.ids[common])
    storage, kind = session.storage, index.kind
    for entry in storage.load_many([k for k in left if kind[k] == BRANCH_SUMMARY]):
        if isinstance(entry, BranchSummaryEntry) and not entry.from_hook:
            branch.files.add_details(entry.details)

    def newest_first() -> Iterator[Entry]:
        for end in range(len(left), 0, -BATCH):
            yield from reversed(storage.load_many(left[max(0, end - BATCH) : end]))

    branch.messages = _prepare_messages(newest_first(), branch.files, DEFAULT_BUDGET)
    return branch


def _prepare_messages(newest_first: Iterable[Entry], files: FileOps, budget: int) -> list[Message]:
    """Pi's `prepareBranchEntries` past its first pass (the branch summaries' file lists, which
    the caller adds): newest first within the token budget, then chronological. Entries are
    taken from `newest_first` only while the budget lasts."""
    picked: list[Message] = []
    total = 0
    for entry in newest_first:
        msg: Message | None = None
        if isinstance(entry, MessageEntry):
            if entry.role != "toolResult":
                msg = entry.message
                if entry.role == "assistant":
                    files.add_calls(msg)
        elif isinstance(entry, CustomMessageEntry):
            msg = {"role": "custom", "content": entry.content, "display": entry.display}
        elif isinstance(entry, BranchSummaryEntry):
            msg = {"role": "branchSummary", "summary": entry.summary, "fromId": entry.from_id}
        elif isinstance(entry, CompactionEntry):
            msg = {"role": "compactionSummary", "summary": entry.summary}
        if msg is None:
            continue
        if "timestamp" not in msg:
            msg = {**msg, "timestamp": iso_to_ms(entry.timestamp)}
        cost = estimate_tokens(msg)
        if budget > 0 and total + cost > budget:
            if msg["role"] in ("branchSummary", "compactionSummary") and total < 0.9 * budget:
                picked.append(msg)
            break
        picked.append(msg)
        total += cost
    picked.reverse()
    return picked


def transcript(messages: Sequence[Message]) -> str:
    """Pi's serialisation for summarisation: one paragraph per message, blank-line separated."""
    parts: list[str] = []
    for msg in convert_to_llm(messages):
        role = msg.get("role")
        if role == "user":
            text = content_text(msg.get("content"))
            if text:
                parts.append(f"[User]: {text}")
        elif role == "assistant":
            thinking = thinking_text(msg)
            if thinking:
                parts.append(f"[Assistant thinking]: {thinking}")
            text = assistant_text(msg)
            if text:
                parts.append(f"[Assistant]: {text}")
            calls = tool_calls(msg)
            if calls:
                parts.append(
                    "[Assistant tool calls]: "
                    + "; ".join(format_tool_call(c, max_args=10_000) for c in calls)
                )
        elif role == "toolResult":
            text = content_text(msg.get("content"))
            if len(text) > TOOL_RESULT_LIMIT:
                extra = len(text) - TOOL_RESULT_LIMIT
                text = f"{text[:TOOL_RESULT_LIMIT]}\n\n[... {extra} more characters truncated]"
            if text:
                parts.append(f"[Tool result]: {text}")
    return "\n\n".join(parts)


def build_prompt(messages: Sequence[Message], custom_instructions: str = "") -> str:
    prompt = f"<conversation>\n{transcript(messages)}\n</conversation>\n\n{DEFAULT_INSTRUCTIONS}"
    if custom_instructions.strip():
        prompt += f"\n\nAdditional focus: {custom_instructions.strip()}"
    return prompt


def finish_summary(body: str, files: FileOps) -> str:
    """Preamble + body + the `<read-files>` / `<modified-files>` blocks, as Pi writes them."""
    details = files.details()
    blocks = []
    if details["readFiles"]:
        blocks.append("<read-files>\n" + "\n".join(details["readFiles"]) + "\n</read-files>")
    if details["modifiedFiles"]:
        blocks.append("<modified-files>\n" + "\n".join(details["modifiedFiles"]) + "\n</modified-files>")
    text = PREAMBLE + body.strip()
    if blocks:
        text += "\n\n" + "\n\n".join(blocks)
    return text


class SummarizerError(Exception):
    """The external summarizer failed; the message says how."""


def _clip(text: str, limit: int) -> str:
    text = " ".join(text.split())
    return text if len(text) <= limit else text[: limit - 1] + "…"


def extractive_draft(branch: BranchToSummarize, custom_instructions: str = "") -> str:
    """An offline, deterministic draft in the structured format: the user's words, the tool
    calls made and the last answer, for the user to edit. No model involved."""
    users = [content_text(m.get("content")) for m in branch.messages if m.get("role") == "user"]
    users = [u for u in users if u.strip()]
    answers = [assistant_text(m) for m in branch.messages if m.get("role") == "assistant"]
    answers = [a for a in answers if a.strip()]
    calls: list[str] = []
    for m in branch.messages:
        if m.get("role") == "assistant":
            for call in tool_calls(m):
                text = format_tool_call(call, max_args=60)
                if text not in calls:
                    calls.append(text)
    summaries = [
        m.get("summary", "")
        for m in branch.messages
        if m.get("role") in ("branchSummary", "compactionSummary")
    ]
    lines = ["## Goal", _clip(users[0], 400) if users else "(no user message on this branch)"]
    if len(users) > 1:
        # The user's later messages, as they are: under Pi's "Constraints & Preferences" heading
        # they read as rules the user set, to the model too (QA)
        lines += ["", "## Later requests"]
        lines += [f"- {_clip(u, 200)}" for u in users[1:6]]
    lines += ["", "## Progress", "### Done"]
    lines += [f"- [x] {c}" for c in calls[:12]] or ["- (no tool calls)"]
    if len(calls) > 12:
        lines.append(f"- … and {len(calls) - 12} more tool calls")
    if summaries:
        lines += ["", "### Earlier summaries on this branch"]
        lines += [f"- {_clip(s, 300)}" for s in summaries[-2:]]
    lines += [
        "",
        "## Key Decisions",
        f"- {_clip(answers[-1], 600)}" if answers else "- (no answer)",
    ]
    lines += ["", "## Next Steps", "1. (draft: edit before saving)"]
    if custom_instructions.strip():
        lines += ["", f"Focus requested: {_clip(custom_instructions, 300)}"]
    return "\n".join(lines)


POLL_SECONDS = 0.1  # how often a running summarizer is checked for cancellation


def run_command_summarizer(
    command: str,
    prompt: str,
    *,
    timeout: float = 300.0,
    custom_instructions: str = "",
    cancel: threading.Event | None = None,
) -> str:
    """Run `command` with the prompt on stdin; its stdout is the summary body.

    The command runs in its own process group, so that cancelling (setting `cancel`) or a
    timeout stops it and everything it started (a shell pipeline, an `llm` call), instead of
    leaving it running and making the app wait for it on quit."""
    argv = shlex.split(command)
    if not argv:
        raise SummarizerError("the summarizer command is empty")
    env = dict(os.environ, SESSIONTREE_INSTRUCTIONS=custom_instructions)
    try:
        proc = subprocess.Popen(
            argv,
            stdin=subprocess.PIPE,
            stdout=subprocess.PIPE,
            stderr=subprocess.PIPE,
            text=True,
            env=env,
            start_new_session=True,
        )
    except FileNotFoundError:
        raise SummarizerError(f"summarizer not found: {argv[0]}") from None
    except OSError as exc:
        raise SummarizerError(f"could not run the summarizer: {exc}") from None
    deadline = time.monotonic() + timeout
    pending: str | None = prompt
    while True:
        try:
            out, err = proc.communicate(input=pending, timeout=POLL_SECONDS)
            break
        except subprocess.TimeoutExpired:
            pending = None  # the rest of the input keeps flowing on the next call
            if cancel is not None and cancel.is_set():
                _stop_group(proc)
                raise SummarizerError("the draft was cancelled") from None
            if time.monotonic() > deadline:
                _stop_group(proc)
                raise SummarizerError(f"summarizer did not finish within {timeout:.0f} s") from None
    if proc.returncode != 0:
        tail = (err or "").strip().splitlines()[-3:]
        said = f": {' / '.join(tail)}" if tail else " and printed nothing on stderr"
        raise SummarizerError(f"summarizer exited with code {proc.returncode}{said}")
    out = terminal_codes_removed(out).strip()
    if not out:
        raise SummarizerError("summarizer printed nothing")
    return out


# An escape sequence (CSI such as colours, OSC such as titles and links) or another control
# character a terminal acts on; tabs and line breaks are text.
_TERMINAL_CODES = re.compile(
    r"\x1b\[[0-?]*[ -/]*[@-~]|\x1b\][^\x07\x1b]*(?:\x07|\x1b\\)?|[\x00-\x08\x0b-\x1f\x7f]"
)


def terminal_codes_removed(text: str) -> str:
    """`text` without what a command meant for a terminal: an `llm` wrapper that colours its
    output had `\\u001b[31m` stored in the summary, which Pi and the exports then carry (QA)."""
    return _TERMINAL_CODES.sub("", text.replace("\r\n", "\n"))


def _stop_group(proc: subprocess.Popen[str]) -> None:
    """SIGTERM to the summarizer's process group, SIGKILL if it is still there after a grace."""
    for sig, grace in ((signal.SIGTERM, 0.5), (signal.SIGKILL, 2.0)):
        with contextlib.suppress(ProcessLookupError, PermissionError):
            os.killpg(proc.pid, sig)
        try:
            proc.communicate(timeout=grace)
            return
        except subprocess.TimeoutExpired:
            continue


def summarize_branch(
    branch: BranchToSummarize,
    *,
    command: str | None = None,
    custom_instructions: str = "",
    cancel: threading.Event | None = None,
) -> BranchSummary:
    """A complete branch summary (text + file details) for `Session.move_to`."""
    if branch.empty:
        return BranchSummary(NO_CONTENT, branch.files.details())
    if command:
        body = run_command_summarizer(
            command,
            build_prompt(branch.messages, custom_instructions),
            custom_instructions=custom_instructions,
            cancel=cancel,
        )
    else:
        body = extractive_draft(branch, custom_instructions)
    return BranchSummary(finish_summary(body, branch.files), branch.files.details())
