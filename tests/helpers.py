"""Builders shared by the tests: Pi-shaped messages and backends."""

from __future__ import annotations

import os
from collections.abc import Callable
from typing import Any

FIXTURES = __import__("pathlib").Path(__file__).parent / "fixtures"
# Property tests run a third of their examples under CI=true (`.ci/run`), keeping the run under
# its 15 minutes on a 2-core machine; `python -m pytest` elsewhere runs them all.
EXAMPLES_UNDER_CI = 3


def examples(n: int) -> int:
    """`max_examples` for a property test of `n` examples (see `EXAMPLES_UNDER_CI`)."""
    return max(10, n // EXAMPLES_UNDER_CI) if os.environ.get("CI") == "true" else n


PI_FIXTURES = FIXTURES / "pi"


def U(text: str, ts: int = 1) -> dict[str, Any]:
    return {"role": "user", "content": text, "timestamp": ts}


def A(
    text: str,
    *,
    model: str = "claude-test",
    usage: dict[str, Any] | None = None,
    stop: str = "stop",
) -> dict[str, Any]:
    return {
        "role": "assistant",
        "content": [{"type": "text", "text": text}],
        "api": "anthropic-messages",
        "provider": "anthropic",
        "model": model,
        "usage": usage or zero_usage(),
        "stopReason": stop,
        "timestamp": 2,
    }


def zero_usage(**over: Any) -> dict[str, Any]:
    usage = {
        "input": 0,
        "output": 0,
        "cacheRead": 0,
        "cacheWrite": 0,
        "totalTokens": 0,
        "cost": {"input": 0, "output": 0, "cacheRead": 0, "cacheWrite": 0, "total": 0},
    }
    usage.update(over)
    return usage


def texts(messages: list[dict[str, Any]]) -> list[str]:
    out = []
    for m in messages:
        c = m.get("content")
        if isinstance(c, str):
            out.append(c)
        elif isinstance(c, list):
            out.append("".join(b.get("text", "") for b in c if isinstance(b, dict)))
        else:
            out.append(m.get("summary", ""))
    return out


def roles(messages: list[dict[str, Any]]) -> list[str]:
    return [m["role"] for m in messages]


def session_from_steps(steps: list[tuple[str, int]]) -> tuple[Any, list[str]]:
    """A session in memory made by `steps` (what, k) from a first user message, for property
    tests of contexts: "u", "a" messages; "a-usage" an answer reporting usage; "compact" a
    compaction kept from an entry on the path (or with nothing kept); "back" a move to an
    earlier entry, "summary" one with a branch summary; "model" a model change. Returns the
    session and the ids of the entries the steps wrote, in order."""
    from sessiontree import MemoryStorage, Session

    s = Session(MemoryStorage())
    ids = [s.append_message(U("start"))]
    for what, k in steps:
        if what == "u":
            ids.append(s.append_message(U(f"u{k}")))
        elif what == "a":
            ids.append(s.append_message(A(f"a{k}")))
        elif what == "a-usage":
            ids.append(s.append_message(A(f"a{k}", usage=zero_usage(totalTokens=k + 1))))
        elif what == "compact":
            path = [s.tree.ids[i] for i in s.tree.path_to_root(s.tree.leaf)]
            ids.append(s.append_compaction(f"sum{k}", path[k % len(path)] if k % 3 else None, 1))
        elif what == "summary":
            s.move_to(ids[k % len(ids)], summary=f"left {k}")
        elif what == "model":
            ids.append(s.append_model_change("p", f"m{k}"))
        elif what == "back":  # compactions on other branches are not on this path
            s.move_to(ids[k % len(ids)])
        else:
            raise ValueError(what)
    return s, ids


def as_nobody(work: Callable[[], object]) -> str:
    """`str(work())`, run in a forked child that dropped to the `nobody` user (the caller is
    root), or "error|<exception>" when it raised: how a file another user owns behaves."""
    read_end, write_end = os.pipe()
    pid = os.fork()
    if pid == 0:  # pragma: no cover - the child
        try:
            os.setgid(65534)
            os.setuid(65534)
            os.write(write_end, str(work()).encode())
        except BaseException as exc:
            os.write(write_end, f"error|{exc!r}".encode())
        finally:
            os._exit(0)
    os.close(write_end)
    os.waitpid(pid, 0)
    answer = os.read(read_end, 1 << 16).decode()
    os.close(read_end)
    return answer
