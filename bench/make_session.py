"""Generate a realistic v3 session file for benchmarks.

    python bench/make_session.py 100000 [-o bench/data/s100k.jsonl] [--seed 1] [--shape deep]

Payloads are Pi's real messages (the two fixture sessions in tests/fixtures/pi, replayed in
order, so user → assistant → tool result turns stay realistic, with their multi-KB tool
outputs). Around them the generator adds what long agent runs produce: model and thinking
changes, labels, compactions (some with a retained tail), and abandoned branches — a `leaf`
entry back up the chain plus a `branch_summary` — every few hundred entries.

`--shape` draws other trees instead, those whose outlines cost the most to lay out: `chain`
(no branches), `wide` (a retry from an early turn every 50 entries) or `deep` (a retry nested
in the last one every 10 entries). Entries are written directly (not through Session) so a
million entries take seconds; the file follows the same append rule, and `sessiontree check`
reports it clean.
"""

from __future__ import annotations

import argparse
import random
import sys
from datetime import UTC, datetime, timedelta
from pathlib import Path

import orjson

FIXTURES = Path(__file__).resolve().parent.parent / "tests" / "fixtures" / "pi"
DATA = Path(__file__).resolve().parent / "data"


def load_pool() -> list[dict]:
    """Messages of both fixtures, the smaller-payload session four times as often, which puts
    the average line near 1.2 KB (~120 MB per 100k entries)."""
    messages = []
    for name, weight in (("large-session.jsonl", 4), ("before-compaction.jsonl", 1)):
        turn = []
        for raw in (FIXTURES / name).read_bytes().splitlines()[1:]:
            obj = orjson.loads(raw)
            if obj.get("type") == "message":
                turn.append(obj["message"])
        messages.extend(turn * weight)
    return messages


class Writer:
    def __init__(self, path: Path, seed: int) -> None:
        self.out = path.open("wb")
        self.rng = random.Random(seed)
        self.count = 0
        self.leaf: str | None = None
        self.chain: list[str] = []  # ids on the current branch, root first
        self.at: dict[str, int] = {}  # id -> its place in `chain` (a move looked it up: O(n) each)
        self.clock = datetime(2026, 1, 5, 9, 0, tzinfo=UTC)
        self.used: set[str] = set()

    def new_id(self) -> str:
        while True:
            candidate = f"{self.rng.getrandbits(32):08x}"
            if candidate not in self.used:
                self.used.add(candidate)
                return candidate

    def stamp(self) -> str:
        self.clock += timedelta(milliseconds=self.rng.randint(50, 4000))
        return self.clock.strftime("%Y-%m-%dT%H:%M:%S.") + f"{self.clock.microsecond // 1000:03d}Z"

    def write(self, etype: str, payload: dict, *, parent: str | None = None, moves_leaf: bool = True) -> str:
        eid = self.new_id()
        entry = {"type": etype, "id": eid, "parentId": self.leaf if parent is None else parent}
        entry["timestamp"] = self.stamp()
        entry.update(payload)
        self.out.write(orjson.dumps(entry) + b"\n")
        self.count += 1
        if moves_leaf:
            self.leaf = eid
            self.at[eid] = len(self.chain)
            self.chain.append(eid)
        return eid

    def move(self, target: str, summary: str | None) -> None:
        """A `leaf` entry back to `target`, then optionally a branch summary under it."""
        old = self.leaf
        self.write("leaf", {"targetId": target}, moves_leaf=False)
        self.leaf = target
        # cut in place: a copy of the chain per move made a deep 1M-entry file take 15 minutes
        keep = self.at[target] + 1
        for gone in self.chain[keep:]:
            del self.at[gone]
        del self.chain[keep:]
        if summary is not None:
            self.write("branch_summary", {"fromId": old, "summary": summary}, parent=target)


SHAPES = ("realistic", "chain", "wide", "deep")


def fork_back(w: Writer, shape: str, k: int) -> str | None:
    """Where the leaf goes back to before turn `k` in the shapes other than `realistic`:
    `wide` retries from one of the first turns every 50 entries (thousands of long sibling
    branches side by side), `deep` retries the last three entries every 10 (each retry nested in
    the one before: hundreds of levels); `chain` never goes back."""
    if shape == "wide" and k % 50 == 0 and len(w.chain) > 60:
        return w.chain[w.rng.randint(6, 40)]
    if shape == "deep" and k % 10 == 0 and len(w.chain) > 8:
        return w.chain[-3]
    return None


def generate(path: Path, n: int, seed: int = 1, shape: str = "realistic") -> Path:
    pool = load_pool()
    w = Writer(path, seed)
    rng = w.rng
    w.out.write(
        orjson.dumps(
            {
                "type": "session",
                "version": 3,
                # the shape in the id: two shapes of one size are two sessions to `import` (QA)
                "id": f"bench-{n}-{seed}" if shape == "realistic" else f"bench-{shape}-{n}-{seed}",
                "timestamp": "2026-01-05T09:00:00.000Z",
                "cwd": "/home/dev/project",
            }
        )
        + b"\n"
    )
    w.write("model_change", {"provider": "anthropic", "modelId": "claude-sonnet-4-5"})
    w.write("thinking_level_change", {"thinkingLevel": "medium"})
    w.write("active_tools_change", {"activeToolNames": ["read", "edit", "write", "bash"]})
    w.write("session_info", {"name": f"benchmark session ({n:,} entries)"})
    k = 0
    since_compaction = 0
    while w.count < n:
        message = pool[k % len(pool)]
        k += 1
        if shape != "realistic":
            target = fork_back(w, shape, k)
            if target is not None:
                w.move(target, None)
            w.write("message", {"message": message})
            continue
        w.write("message", {"message": message})
        since_compaction += 1
        roll = rng.random()
        if w.count >= n:
            break
        if roll < 1 / 400 and len(w.chain) > 40:
            # abandon the last few turns: back up and summarise them
            target = w.chain[-rng.randint(5, 30)]
            w.move(target, "## Goal\nAn approach that was abandoned.\n\n## Progress\n- tried it; reverted")
        elif roll < 1 / 400 + 1 / 1000 and len(w.chain) > 2:
            w.write(
                "label",
                {"targetId": w.chain[-rng.randint(1, min(20, len(w.chain) - 1))], "label": f"mark-{k}"},
            )
        elif roll < 1 / 400 + 1 / 1000 + 1 / 1500:
            w.write("thinking_level_change", {"thinkingLevel": rng.choice(["low", "medium", "high"])})
        elif since_compaction > 2500 and len(w.chain) > 300:
            kept = w.chain[-rng.randint(100, 250)]
            payload = {
                "summary": "## Goal\nContinue the refactoring.\n\n## Progress\n- many steps done",
                "firstKeptEntryId": kept,
                "tokensBefore": rng.randint(150_000, 190_000),
            }
            if rng.random() < 0.3:
                payload["retainedTail"] = pool[k % len(pool) : k % len(pool) + 3]
            w.write("compaction", payload)
            since_compaction = 0
    w.out.close()
    return path


def main() -> None:
    parser = argparse.ArgumentParser(
        description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter
    )
    parser.add_argument("entries", type=int)
    parser.add_argument("-o", "--output", type=Path)
    parser.add_argument("--seed", type=int, default=1)
    parser.add_argument("--shape", choices=SHAPES, default="realistic")
    args = parser.parse_args()
    name = "session" if args.shape == "realistic" else args.shape
    out = args.output or DATA / f"{name}-{args.entries}.jsonl"
    out.parent.mkdir(parents=True, exist_ok=True)
    generate(out, args.entries, args.seed, args.shape)
    size = out.stat().st_size
    print(f"wrote {out} ({args.entries:,} entries, {size / 1e6:.1f} MB)", file=sys.stderr)


if __name__ == "__main__":
    main()
