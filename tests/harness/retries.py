"""Sessions shaped like a user who keeps going back: the tree shapes the browser must keep
readable (hundreds of forks along the active path, side branches with retries of their own).

    python tests/harness/retries.py OUT.jsonl [--retries 300] [--nested 40]
"""

from __future__ import annotations

import argparse
import random
from datetime import UTC, datetime, timedelta
from pathlib import Path
from typing import Any

from sessiontree.model.ids import format_iso
from sessiontree.session import Session
from sessiontree.storage.jsonl import JsonlStorage

# Each message's own time is its entry's (the session's clock below, which the next append
# reads): a list of sessions shows it, as Pi's does. It was 1 or 2 ms: the picker said 1970.
_next_tick = [0]
_START = datetime(2026, 11, 2, 9, 0, tzinfo=UTC)


def _at(tick: int) -> datetime:
    return _START + timedelta(seconds=7 * tick)


def _ms() -> int:
    return int(_at(_next_tick[0]).timestamp() * 1000)


def _clock() -> str:
    tick = _next_tick[0]
    _next_tick[0] += 1
    return format_iso(_at(tick))


def _user(text: str) -> dict[str, Any]:
    return {"role": "user", "content": text, "timestamp": _ms()}


def _assistant(text: str) -> dict[str, Any]:
    return {
        "role": "assistant",
        "content": [{"type": "text", "text": text}],
        "api": "anthropic-messages",
        "provider": "anthropic",
        "model": "claude-test",
        "usage": {"input": 0, "output": 0, "cacheRead": 0, "cacheWrite": 0, "totalTokens": 0},
        "stopReason": "stop",
        "timestamp": _ms(),
    }


def write_retries(path: Path, retries: int = 300, nested: int = 40, seed: int = 1) -> Session:
    """A session where each of `retries` turns is tried twice: the user asks, gets an answer,
    goes back to before the question (a fork on the active path) and asks again. Every
    `retries // nested` turns, the abandoned attempt itself is retried once more inside the side
    branch, so side branches fork too. Returns the open session (the caller closes it)."""
    rng = random.Random(seed)
    _next_tick[0] = 0
    storage = JsonlStorage.create(path, cwd="/work/retries", session_id=f"retries-{retries}-{seed}")
    session = Session(  # ids and times fixed by the seed: the same file every time
        storage,
        clock=_clock,
        id_factory=lambda: f"{rng.getrandbits(32):08x}",
    )
    session.append_message(_user("Set up the project"))
    session.append_message(_assistant("Done: the project is set up."))
    every = max(retries // max(nested, 1), 1)
    for turn in range(retries):
        before = session.leaf_id
        session.append_message(_user(f"Attempt A of step {turn}: try approach {rng.randint(1, 99)}"))
        tried = session.append_message(
            _assistant(f"Step {turn}, first attempt: it failed with error {turn}.")
        )
        if turn % every == 0:  # a retry inside the side branch: it will fork off the main path
            session.move_to(session.tree.ids[session.tree.parent[session.tree.pos[tried]]])
            session.append_message(_assistant(f"Step {turn}, first attempt, regenerated: failed again."))
        session.move_to(before)
        session.append_message(_user(f"Attempt B of step {turn}: a different approach"))
        session.append_message(_assistant(f"Step {turn} works now. Moving on to the next step."))
    return session


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__)
    parser.add_argument("out", type=Path)
    parser.add_argument("--retries", type=int, default=300)
    parser.add_argument("--nested", type=int, default=40)
    args = parser.parse_args()
    write_retries(args.out, args.retries, args.nested).close()


if __name__ == "__main__":
    main()
