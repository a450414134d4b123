"""Key → settled frame in the real app, at the sizes that matter (what a user feels).

    python bench/keys.py bench/data/session-1000000.jsonl [--presses 40]

Runs `SessionTreeApp` headless at 160×50 on a private copy of the file (Enter and `b` write),
starting once the app has laid the tree out under each filter, which it does while nobody types
(as a person reads the first screen; the time it took is printed), and times each key twice: its
handler alone (the action method: for a filter, fold, Enter or `b` that includes writing the
entry and rebuilding the rows; with the page faults it took, each a 4 KB page of memory new to
the process or handed back since), and from the press until the app is idle again with the
screen repainted (`pilot.press` + `pilot.pause`, which also waits for the preview and Textual's
compositor; on a machine shared with other work this is the noisy one). `z` and a filter are
timed again 0.1 s after the cursor came to rest, while the preview renders, against the same key
at the same row with the preview idle. Then a writer thread appends entries to the copy at ~20/s
while the app follows, and each is timed from the end of its write to the moment its row exists
in the tree. Last, keys at a person's pace (pauses of
0.2-2 s), in blocks with the app's idle garbage collector on and off, counting Python's full
collection passes that land inside a key. Prints p50/p95/max per key in milliseconds.
"""

from __future__ import annotations

import argparse
import asyncio
import os
import random
import resource
import shutil
import statistics
import sys
import tempfile
import threading
import time
import uuid
from pathlib import Path

import orjson


def pct(samples: list[float], q: float) -> float:
    ordered = sorted(samples)
    return ordered[min(int(len(ordered) * q), len(ordered) - 1)]


def line(name: str, samples: list[float]) -> None:
    ms = [s * 1000 for s in samples]
    print(
        f"{name:40} p50 {statistics.median(ms):8.1f} ms   p95 {pct(ms, 0.95):8.1f} ms"
        f"   max {max(ms):8.1f} ms   (n={len(ms)})",
        flush=True,
    )


class Handlers:
    """Wraps action methods on their instances (Textual looks actions up by attribute, so the
    wrapper is what a key runs) and records how long each call took."""

    def __init__(self) -> None:
        self.last = 0.0
        self.faults = 0  # minor page faults during the last call

    def wrap(self, obj: object, name: str) -> None:
        original = getattr(obj, name)

        def timed(*args, **kwargs):
            f0 = resource.getrusage(resource.RUSAGE_SELF).ru_minflt
            t0 = time.perf_counter()
            try:
                return original(*args, **kwargs)
            finally:
                self.last = time.perf_counter() - t0
                self.faults = resource.getrusage(resource.RUSAGE_SELF).ru_minflt - f0

        setattr(obj, name, timed)


async def run(path: Path, presses: int) -> None:
    from sessiontree.tui.app import SessionTreeApp
    from sessiontree.tui.launch import open_for_browsing
    from sessiontree.tui.tree_view import SessionTreeView

    start = time.perf_counter()
    session, _ = open_for_browsing(path, read_only=False)
    opened = time.perf_counter() - start
    app = SessionTreeApp(session, follow=True)
    async with app.run_test(size=(160, 50)) as pilot:
        tree = app.browser.query_one(SessionTreeView)
        while not len(tree.outline):
            await pilot.pause()
        print(f"{len(session.tree):,} entries, opened in {opened:.2f} s", flush=True)
        # A person reads the first screen before the first key; meanwhile the app lays the tree
        # out once under each filter (what a filter keeps is then built before its key).
        drawn = time.perf_counter()
        while not getattr(tree, "prepared", True) and time.perf_counter() - drawn < 10:
            await pilot.pause(0.05)
        await pilot.pause(0.5)
        print(f"every filter prepared {time.perf_counter() - drawn:.2f} s after the first layout", flush=True)
        rng = random.Random(3)
        handlers = Handlers()
        for name in (
            "action_cursor",
            "action_page",
            "action_fold",
            "action_fold_sides",
            "action_jump_active",
        ):
            handlers.wrap(tree, name)
        for name in ("action_set_filter", "action_move", "action_leaf_back"):
            handlers.wrap(app.browser, name)
        results: dict[str, tuple[list[float], list[float]]] = {}
        faults: dict[str, list[int]] = {}

        async def timed(name: str, key: str) -> None:
            t0 = time.perf_counter()
            await pilot.press(key)
            await pilot.pause()
            handler, frame = results.setdefault(name, ([], []))
            frame.append(time.perf_counter() - t0)
            handler.append(handlers.last)
            faults.setdefault(name, []).append(handlers.faults)

        for _ in range(presses):
            await timed("down (j)", "j")
        for _ in range(presses // 4):
            await timed("page down", "pagedown")
        for _ in range(presses // 4):
            for key in "12345":
                await timed("filter (1–5)", key)
        await timed("filter (1–5)", "1")
        for _ in range(presses // 4):
            tree.set_cursor(rng.randrange(len(tree.outline)), center=True)
            await pilot.pause()
            row = tree.outline.next_fork_row(tree.cursor_row, -1)
            if row < 0:
                continue
            tree.set_cursor(row, center=True)
            await pilot.pause()
            await timed("fold / unfold at a fork (space)", "space")
            await timed("fold / unfold at a fork (space)", "space")
        for _ in range(4):
            await timed("fold every side branch (z)", "z")
        for _ in range(presses // 4):
            tree.set_cursor(rng.randrange(len(tree.outline)), center=True)
            await pilot.pause()
            await timed("Enter (move the leaf)", "enter")
            await timed("b (back)", "b")
        # The same keys 0.3 s after the cursor came to rest, while the preview's worker renders
        # the rest of the context (a reader who moves, then acts): threads share the interpreter
        # lock, so this is where a background render shows in a handler's time.
        # Each at the same row both ways, in alternating order, then undone (a second `z` unfolds,
        # `1` restores the default filter), timed apart: a `z` that unfolds or a filter change
        # under folds costs another amount, which an earlier version of this loop mixed into one
        # column. 0.1 s after the cursor came to rest the preview's worker is still rendering
        # (planning included) on a deep tree; the count of presses that found it busy is printed.
        busy = 0
        for k in range(presses // 4):
            row = rng.randrange(len(tree.outline))
            for key, undo, name in (("z", "z", "z"), ("2", "1", "filter")):
                ways = [(2.0, f"{name}, the preview idle"), (0.1, f"{name}, the preview rendering")]
                for rest, label in ways if k % 2 else ways[::-1]:
                    tree.set_cursor(row, center=True)
                    await pilot.pause(rest)
                    if rest < 1:
                        busy += any(w.group == "preview" and w.is_running for w in app.workers)
                    await timed(label, key)
                    await timed(f"{name} undone ({undo})", undo)
                    await pilot.pause(0.3)
        if tree.folded:
            await pilot.press("z")
        for _ in range(presses // 4):
            await timed("a (jump to the leaf)", "a")
        for _ in range(presses // 4):  # Textual's own floor: a key nothing is bound to
            await timed("f12 (unbound: the harness's floor)", "f12")
        print(
            f"the preview's worker was rendering at {busy} of {presses // 4 * 2} presses meant to find it so"
        )
        print("handler alone:")
        for name, (handler, _) in results.items():
            line("  " + name, handler)
            counts = faults[name]
            print(
                f"    page faults: p50 {statistics.median(counts):,.0f}, max {max(counts):,},"
                f" {sum(c > 0 for c in counts)} of {len(counts)} presses with any",
                flush=True,
            )
        print("press → idle, screen repainted:")
        for name, (_, frame) in results.items():
            line("  " + name, frame)

        # live follow: entries appended by another writer, timed until their row exists
        await pilot.press("a")
        written: dict[str, float] = {}
        stop = threading.Event()

        def writer() -> None:
            parent = session.leaf_id
            with open(path, "ab") as f:
                while not stop.is_set() and len(written) < presses:
                    eid = uuid.uuid4().hex[:8]
                    entry = {
                        "type": "message",
                        "id": eid,
                        "parentId": parent,
                        "timestamp": "2026-12-03T10:00:00.000Z",
                        "message": {"role": "user", "content": f"follow probe {eid}", "timestamp": 0},
                    }
                    f.write(orjson.dumps(entry) + b"\n")
                    f.flush()
                    written[eid] = time.perf_counter()
                    parent = eid
                    time.sleep(0.05)

        thread = threading.Thread(target=writer, daemon=True)
        thread.start()
        seen: dict[str, float] = {}
        deadline = time.perf_counter() + 60
        while len(seen) < presses and time.perf_counter() < deadline:
            await asyncio.sleep(0.005)
            pos = session.tree.pos
            for eid in list(written):
                if eid not in seen and (i := pos.get(eid)) is not None and tree.outline.row_of[i] >= 0:
                    seen[eid] = time.perf_counter()
        stop.set()
        thread.join()
        line("follow: append → row in the tree", [seen[e] - written[e] for e in seen])
        await human_pace(app, pilot, presses)


async def human_pace(app, pilot, presses: int) -> None:
    """Keys with pauses between them (0.2-2 s), as a person reads: press → idle, and how many
    of Python's full garbage-collection passes ran inside those windows, in alternating blocks
    with the app's idle collector (`sessiontree.tui.collector`) on and off."""
    import gc

    windows: list[tuple[float, float]] = []
    passes: list[float] = []

    def seen(phase: str, info: dict) -> None:
        if phase == "start" and info["generation"] == 2:
            passes.append(time.perf_counter())

    gc.callbacks.append(seen)
    rng = random.Random(7)
    due = app.collector.due
    times: dict[bool, list[float]] = {True: [], False: []}
    hit: dict[bool, int] = {True: 0, False: 0}
    try:
        for block in range(4):
            on = block % 2 == 0
            app.collector.due = due if on else (lambda: False)
            for _ in range(max(presses // 4, 4)):
                await asyncio.sleep(rng.uniform(0.2, 2.0))
                key = rng.choice("jjjkkk5e1")
                key = {"e": "enter"}.get(key, key)
                before = len(passes)
                t0 = time.perf_counter()
                await pilot.press(key)
                await pilot.pause()
                windows.append((t0, time.perf_counter()))
                times[on].append(time.perf_counter() - t0)
                hit[on] += len(passes) > before
    finally:
        gc.callbacks.remove(seen)
        app.collector.due = due
    print("at a human pace (0.2-2 s between keys: j, k, Enter, filters):")
    for on in (True, False):
        what = "idle collector on" if on else "idle collector off"
        line(f"  press → idle, {what}", times[on])
        print(f"    presses with a full GC pass inside: {hit[on]} of {len(times[on])}", flush=True)


def main() -> None:
    parser = argparse.ArgumentParser(
        description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter
    )
    parser.add_argument("file", type=Path)
    parser.add_argument("--presses", type=int, default=40)
    args = parser.parse_args()
    with tempfile.TemporaryDirectory(prefix="sessiontree-keys-") as tmp:
        copy = Path(tmp) / args.file.name
        shutil.copyfile(args.file, copy)
        os.chmod(copy, 0o600)
        asyncio.run(run(copy, args.presses))
    sys.exit(0)


if __name__ == "__main__":
    main()
