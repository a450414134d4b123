"""Builders shared by the tests: Pi-shaped messages and backends."""

from __future__ import annotations

from typing import Any

FIXTURES = __import__("pathlib").Path(__file__).parent / "fixtures"
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
