"""Regenerate the bundled demo session (src/sessiontree/demo/demo.jsonl).

A realistic coding-agent session written through the library itself, with fixed ids and clock so
the file (and the screenshots made from it) are reproducible: three branches off one diagnosis,
tool calls and results, a bash execution, a branch summary, a compaction, a custom message,
labels and a session name.

    python scripts/make_demo.py
"""

from __future__ import annotations

import itertools
from collections.abc import Mapping
from datetime import UTC, datetime, timedelta
from pathlib import Path
from typing import Any

from sessiontree import JsonlStorage, Session
from sessiontree.context import estimate_context_tokens, estimate_tokens
from sessiontree.model.ids import format_iso

OUT = Path(__file__).resolve().parent.parent / "src" / "sessiontree" / "demo" / "demo.jsonl"
START = datetime(2026, 3, 14, 9, 0, 0, tzinfo=UTC)

_tick = itertools.count()
_ids = itertools.count(1)


def clock() -> str:
    return format_iso(START + timedelta(seconds=17 * next(_tick)))


def new_id() -> str:
    return f"{0x3A7C0000 + next(_ids) * 0x1F3:08x}"


def ms() -> int:
    return int((START + timedelta(seconds=17 * next(_tick))).timestamp() * 1000)


def usage(inp: int, out: int, read: int = 0) -> dict:
    cost = round(inp * 3e-6 + out * 15e-6 + read * 3e-7, 6)
    return {
        "input": inp,
        "output": out,
        "cacheRead": read,
        "cacheWrite": 0,
        "totalTokens": inp + out + read,
        "cost": {"input": 0, "output": 0, "cacheRead": 0, "cacheWrite": 0, "total": cost},
    }


def user(text: str) -> dict:
    return {"role": "user", "content": [{"type": "text", "text": text}], "timestamp": ms()}


def assistant(text: str = "", *calls: tuple[str, str, dict], thinking: str = "") -> dict:
    content: list[dict] = []
    if thinking:
        content.append({"type": "thinking", "thinking": thinking})
    if text:
        content.append({"type": "text", "text": text})
    for call_id, name, args in calls:
        content.append({"type": "toolCall", "id": call_id, "name": name, "arguments": args})
    return {
        "role": "assistant",
        "content": content,
        "api": "anthropic-messages",
        "provider": "anthropic",
        "model": "claude-sonnet-4-5",
        "usage": usage(0, 0),  # what the call sent and produced: `DemoSession` fills it in
        "stopReason": "toolUse" if calls else "stop",
        "timestamp": ms(),
    }


def result(call_id: str, name: str, text: str, error: bool = False) -> dict:
    return {
        "role": "toolResult",
        "toolCallId": call_id,
        "toolName": name,
        "content": [{"type": "text", "text": text}],
        "isError": error,
        "timestamp": ms(),
    }


DATES_PY = '''"""Parsing of the dates the forecast API returns."""
from datetime import datetime


def parse_date(value: str) -> datetime:
    # The API sends "2026-03-14 07:00" without a zone.
    return datetime.strptime(value, "%Y-%m-%d %H:%M").astimezone()


def day_label(value: str) -> str:
    return parse_date(value).strftime("%a %d %b")
'''

PYTEST_FAIL = """F.............                                                          [100%]
=================================== FAILURES ===================================
_____________________________ test_day_label_utc ______________________________

    def test_day_label_utc():
>       assert day_label("2026-03-14 23:30") == "Sat 14 Mar"
E       AssertionError: assert 'Sun 15 Mar' == 'Sat 14 Mar'

tests/test_dates.py:12: AssertionError
1 failed, 13 passed in 0.21s"""


SYSTEM_TOKENS = 2400  # the system prompt and the tool definitions every call sends


class DemoSession(Session):
    """Each assistant turn reports the usage its call would have: the context it was sent (the
    system prompt and the messages of the path) and what it wrote, so the tokens column (`t`)
    grows along a path as it would in a real session (a constant usage made a turn's own
    figure negative after a long message)."""

    def append_message(self, message: Mapping[str, Any]) -> str:
        if message.get("role") == "assistant":
            sent = SYSTEM_TOKENS + sum(estimate_tokens(m) for m in self.build_context().messages)
            cached = sent * 9 // 10  # prompt caching: most of the context was read from cache
            message = {**message, "usage": usage(sent - cached, estimate_tokens(message), cached)}
        return super().append_message(message)


def build(path: Path) -> None:
    if path.exists():
        path.unlink()
    storage = JsonlStorage.create(
        path,
        cwd="/home/dev/weather-cli",
        session_id="0b5e2c7a-demo-4c1d-9e6f-weathercli01",
        timestamp=format_iso(START),  # fixed like the entries' clock: the same file at every run
    )
    s = DemoSession(storage, clock=clock, id_factory=new_id)
    s.append_model_change("anthropic", "claude-sonnet-4-5")
    s.append_thinking_level_change("medium")
    s.append_active_tools_change(["read", "edit", "write", "bash"])
    s.append_session_name("Fix flaky date parsing in weather-cli")
    s.append_message(
        user("The tests for `day_label` fail on CI but pass on my laptop. Can you find out why?")
    )
    s.append_message(
        assistant(
            "Let me look at the parser and its tests.",
            ("c1", "read", {"path": "src/weather/dates.py"}),
            thinking="Works locally, fails on CI: usually time zones or locale. Check the parser first.",
        )
    )
    s.append_message(result("c1", "read", DATES_PY))
    s.append_message(
        assistant("", ("c2", "bash", {"command": "TZ=Asia/Tokyo pytest tests/test_dates.py -q"}))
    )
    s.append_message(result("c2", "bash", PYTEST_FAIL, error=True))
    diagnosis = s.append_message(
        assistant(
            "Found it. `parse_date` calls `.astimezone()` on a naive datetime, so Python treats the API's"
            " time as *local* time. CI runs in UTC+9 and your laptop in UTC, so 23:30 lands on a"
            " different day.\n\nTwo ways to fix it:\n1. Treat API times as UTC everywhere.\n"
            "2. Keep local time for users, but pin the time zone in the tests.",
        )
    )
    s.append_label(diagnosis, "diagnosis")

    # Branch A: parse everything as UTC (later abandoned, with a summary)
    s.append_message(user("Fix it by always parsing in UTC."))
    s.append_message(
        assistant(
            "",
            (
                "c3",
                "edit",
                {
                    "path": "src/weather/dates.py",
                    "oldText": ".astimezone()",
                    "newText": ".replace(tzinfo=timezone.utc)",
                },
            ),
        )
    )
    s.append_message(result("c3", "edit", "Edited src/weather/dates.py (1 replacement)."))
    s.append_message(assistant("", ("c4", "bash", {"command": "pytest -q"})))
    s.append_message(
        result("c4", "bash", "..............                                [100%]\n14 passed in 0.19s")
    )
    s.append_message(
        assistant(
            "All 14 tests pass. Note that users outside UTC will now see forecast days in UTC, which"
            " shifts evening forecasts to the next day for them."
        )
    )
    s.move_to(
        diagnosis,
        {
            "summary": (
                "The user explored a different conversation branch before returning here.\n"
                "Summary of that exploration:\n\n## Goal\nFix `day_label` by parsing API times as UTC.\n\n"
                "## Progress\n### Done\n- [x] edit src/weather/dates.py: `.astimezone()` →"
                " `.replace(tzinfo=timezone.utc)`\n- [x] pytest: 14 passed\n\n## Key Decisions\n"
                "- **Rejected**: users outside UTC would see shifted forecast days.\n\n"
                "<modified-files>\nsrc/weather/dates.py\n</modified-files>"
            ),
            "details": {"readFiles": [], "modifiedFiles": ["src/weather/dates.py"]},
        },
    )

    # Branch B: keep local time, make the tests deterministic
    s.append_message(user("Let's keep local time for users and pin the time zone in the tests instead."))
    s.append_message(
        assistant(
            "I'll add an autouse fixture that sets `TZ=UTC` for the date tests.",
            (
                "c5",
                "edit",
                {
                    "path": "tests/conftest.py",
                    "oldText": "import pytest\n",
                    "newText": (
                        "import os, time\nimport pytest\n\n\n@pytest.fixture(autouse=True)\n"
                        "def utc(monkeypatch):\n    monkeypatch.setenv('TZ', 'UTC')\n    time.tzset()\n"
                    ),
                },
            ),
        )
    )
    s.append_message(result("c5", "edit", "Edited tests/conftest.py (1 replacement)."))
    s.append_message(assistant("", ("c6", "bash", {"command": "TZ=Asia/Tokyo pytest -q"})))
    s.append_message(
        result("c6", "bash", "..............                                [100%]\n14 passed in 0.20s")
    )
    fixed = s.append_message(
        assistant("Done: the suite now passes in any time zone, and users keep seeing their local days.")
    )
    s.append_custom_message_entry("ci-status", "CI run #482 on main: all checks passed.", True, {"run": 482})
    s.append_label(fixed, "fixed")

    # Branch C: a detour, abandoned without a summary
    s.append_message(user("Actually, could we drop the time zone handling entirely?"))
    s.append_message(
        assistant(
            "We could, but the API sends local station times, so the days would be wrong for most users."
        )
    )
    s.move_to(fixed)

    # Continue on branch B: a long stretch, then a compaction
    s.append_message(user("Now add a `--tz` option to the CLI so users can choose the zone."))
    s.append_message(assistant("", ("c7", "read", {"path": "src/weather/cli.py"})))
    s.append_message(
        result(
            "c7",
            "read",
            'import argparse\n\n\ndef main():\n    parser = argparse.ArgumentParser(prog="weather")\n'
            '    parser.add_argument("city")\n    args = parser.parse_args()\n',
        )
    )
    s.append_message(
        assistant(
            "",
            (
                "c8",
                "edit",
                {
                    "path": "src/weather/cli.py",
                    "oldText": 'parser.add_argument("city")',
                    "newText": 'parser.add_argument("city")\n    parser.add_argument("--tz", default=None)',
                },
            ),
        )
    )
    s.append_message(result("c8", "edit", "Edited src/weather/cli.py (1 replacement)."))
    s.append_message(
        {
            "role": "bashExecution",
            "command": "git status --short",
            "output": " M src/weather/cli.py\n M tests/conftest.py",
            "exitCode": 0,
            "cancelled": False,
            "truncated": False,
            "timestamp": ms(),
        }
    )
    docs = s.append_message(user("Good. Document the option in the README as well."))
    s.append_message(
        assistant(
            "",
            (
                "c9",
                "edit",
                {
                    "path": "README.md",
                    "oldText": "## Usage\n",
                    "newText": "## Usage\n\n`--tz ZONE` shows days in ZONE.\n",
                },
            ),
        )
    )
    s.append_message(result("c9", "edit", "Edited README.md (1 replacement)."))
    s.append_compaction(
        "## Goal\nMake weather-cli's date handling correct in every time zone.\n\n"
        "## Progress\n### Done\n- [x] Found the bug: `parse_date` treated API times as local time\n"
        "- [x] Tests pin `TZ=UTC` (tests/conftest.py)\n- [x] `--tz` option in src/weather/cli.py\n"
        "### In Progress\n- [ ] README section for `--tz`\n\n## Key Decisions\n"
        "- **Keep local time for users**: UTC everywhere shifted evening forecasts\n\n"
        "## Next Steps\n1. Finish the README\n2. Release 1.4.0",
        docs,
        estimate_context_tokens(s.build_context().messages),  # what Pi records: the context it replaces
        details={
            "readFiles": ["src/weather/dates.py"],
            "modifiedFiles": ["README.md", "src/weather/cli.py", "tests/conftest.py"],
        },
    )
    s.append_message(user("Thanks! Prepare the changelog entry for 1.4.0."))
    final = s.append_message(
        assistant(
            "",
            (
                "c10",
                "write",
                {
                    "path": "CHANGELOG.md",
                    "content": "## 1.4.0\n- Fix day labels in non-UTC zones\n- Add `--tz`\n",
                },
            ),
        )
    )
    s.append_message(result("c10", "write", "Wrote CHANGELOG.md (3 lines)."))
    last = s.append_message(assistant("Changelog written. Ready to tag 1.4.0."))
    s.append_label(final, "release")
    s.move_to(last)
    storage.close()


if __name__ == "__main__":
    OUT.parent.mkdir(parents=True, exist_ok=True)
    build(OUT)
    print(f"wrote {OUT} ({OUT.stat().st_size} bytes)")
