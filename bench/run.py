"""Benchmarks: sessiontree against the parse floor and against Pi, measured in one run.

    python bench/run.py                       # 10k and 100k entries
    python bench/run.py --sizes 10000,100000,1000000
    python bench/run.py --sizes 100000 --repeat 5 --json out.json

Every figure is also printed as a ratio to the *floor* measured in the same run on the same file:
reading the bytes and `orjson.loads` of every line (what any loader that parses everything must
pay). With node and Pi's package installed (`cd bench && npm ci`), a second ratio compares with
Pi's own `SessionManager.open` on the same file; without them that column says "n/a".

Each measurement runs in its own subprocess, so peak RSS is that of the measured work alone.
Times are the best of `--repeat` runs (machines here are noisy; ratios are what to compare).
"""

from __future__ import annotations

import argparse
import asyncio
import json
import os
import random
import resource
import shutil
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path

HERE = Path(__file__).resolve().parent
DATA = HERE / "data"
sys.path.insert(0, str(HERE))


def peak_rss_mb() -> float:
    return resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 1024


# --- measurements (each runs in a fresh process) -----------------------------------------------


def measure_floor(path: str) -> dict:
    import orjson

    start = time.perf_counter()
    with open(path, "rb") as f:
        data = f.read()
    parsed = [orjson.loads(line) for line in data.splitlines() if line.strip()]
    seconds = time.perf_counter() - start
    return {"seconds": seconds, "lines": len(parsed), "rss_mb": peak_rss_mb()}


def measure_open(path: str) -> dict:
    from sessiontree import open_session

    start = time.perf_counter()
    session = open_session(path, read_only=True)
    opened = time.perf_counter() - start
    start = time.perf_counter()
    context = session.build_context()
    build = time.perf_counter() - start
    out = {
        "open_s": opened,
        "build_context_s": build,
        "context_messages": len(context.messages),
        "entries": session.entry_count(),
        "rss_mb": peak_rss_mb(),
    }
    session.close()
    return out


def measure_reopen(path: str) -> dict:
    """Open with the index cache: once to write it (in a private cache directory), then the
    measured open, which reads it and scans nothing (the file did not change)."""
    from sessiontree import open_session

    with tempfile.TemporaryDirectory(prefix="sessiontree-cache-") as home:
        os.environ["XDG_CACHE_HOME"] = home
        open_session(path, read_only=True, verify="later").close()
        start = time.perf_counter()
        session = open_session(path, read_only=True, verify="later")
        seconds = time.perf_counter() - start
        cached = session.storage.index_cached  # type: ignore[attr-defined]
        session.close()
    return {"reopen_s": seconds, "cached_bytes": cached}


def measure_search(path: str) -> dict:
    """A rare word searched for over every entry: the byte scan picks the lines to decode
    (`finding.find`), against decoding every entry as the search did before."""
    from sessiontree import open_session
    from sessiontree.finding import find, haystack
    from sessiontree.query import compile_query

    session = open_session(path, read_only=True, verify="later")
    query = compile_query("zqxjvw")
    start = time.perf_counter()
    found = find(session, query, range(len(session.tree)))
    scanned = time.perf_counter() - start
    assert found is not None
    start = time.perf_counter()
    limit = min(len(session.tree), 100_000)  # decoding everything at 1M takes minutes: extrapolate
    for i in range(limit):
        query.matches(haystack(session, i))
    decode_all = (time.perf_counter() - start) * len(session.tree) / max(limit, 1)
    return {"search_s": scanned, "decode_all_s": decode_all, "candidates": found.candidates}


def measure_tui(path: str) -> dict:
    from sessiontree.tui.app import SessionTreeApp
    from sessiontree.tui.launch import open_for_browsing
    from sessiontree.tui.tree_view import SessionTreeView

    first_paint: list[float] = []
    original = SessionTreeView.render_line

    def probe(self, y):
        if not first_paint and len(self.outline):  # the first line of actual rows
            first_paint.append(time.perf_counter())
        return original(self, y)

    SessionTreeView.render_line = probe
    result: dict = {}

    async def run() -> None:
        start = time.perf_counter()
        session, _ = open_for_browsing(path, read_only=True)  # exactly as `sessiontree FILE` opens it
        app = SessionTreeApp(session, follow=False)
        async with app.run_test(size=(160, 50)) as pilot:
            while not first_paint:
                await asyncio.sleep(0.001)
            result["first_paint_s"] = first_paint[0] - start
            tree = app.browser.query_one(SessionTreeView)
            rng = random.Random(7)
            rows = len(tree.outline)
            samples = []
            for _ in range(300):
                tree.set_cursor(rng.randrange(rows), center=True)
                for y in range(tree.size.height):
                    tree.render_line(y)
                t0 = time.perf_counter()
                tree.action_cursor(1 if rng.random() < 0.7 else -1)  # the binding's code path
                for y in range(tree.size.height):  # a full repaint of the visible tree
                    tree.render_line(y)
                samples.append(time.perf_counter() - t0)
            samples.sort()
            result["cursor_p50_ms"] = 1000 * samples[len(samples) // 2]
            result["cursor_p95_ms"] = 1000 * samples[int(len(samples) * 0.95)]
            # The same moves with the context-size column on: the frame draws known sizes and
            # hands the missing ones to a worker, whose cost is measured apart (a screen's worth).
            tree.show_sizes = True
            samples, screens = [], []
            for _ in range(100):
                tree.set_cursor(rng.randrange(rows), center=True)
                top = int(tree.scroll_offset.y)
                t0 = time.perf_counter()
                for r in range(top, min(top + tree.size.height, rows)):
                    tree.sizes.compute(tree.outline.rows_pos[r])
                screens.append(time.perf_counter() - t0)
                for y in range(tree.size.height):
                    tree.render_line(y)
                t0 = time.perf_counter()
                tree.action_cursor(1 if rng.random() < 0.7 else -1)
                for y in range(tree.size.height):
                    tree.render_line(y)
                samples.append(time.perf_counter() - t0)
            tree.show_sizes = False
            samples.sort()
            screens.sort()
            result["cursor_sizes_p95_ms"] = 1000 * samples[int(len(samples) * 0.95)]
            result["sizes_screen_p95_ms"] = 1000 * screens[int(len(screens) * 0.95)]
            page = []
            for _ in range(20):
                t0 = time.perf_counter()
                tree.action_page(1)
                for y in range(tree.size.height):
                    tree.render_line(y)
                page.append(time.perf_counter() - t0)
            result["page_down_p95_ms"] = 1000 * sorted(page)[int(len(page) * 0.95)]
            filters = []
            for _ in range(5):  # default → no-tools → user-only → labeled-only → all → default
                t0 = time.perf_counter()
                app.browser.action_set_filter(tree.filter.next().value)
                filters.append(time.perf_counter() - t0)
            result["filter_ms"] = 1000 * max(filters)
            tree.action_jump_active()
            fork = tree.outline.next_fork_row(tree.cursor_row, -1)
            if fork >= 0:
                tree.set_cursor(fork)
            t0 = time.perf_counter()
            tree.action_fold()
            result["fold_ms"] = 1000 * (time.perf_counter() - t0)
            t0 = time.perf_counter()
            tree.action_fold()
            result["unfold_ms"] = 1000 * (time.perf_counter() - t0)
            await pilot.pause()
        result["rss_mb"] = peak_rss_mb()

    asyncio.run(run())
    return result


def measure_write(path: str) -> dict:
    """move_to and append latency, on a private copy of the file."""
    from sessiontree import open_session

    with tempfile.TemporaryDirectory() as tmp:
        copy = Path(tmp) / "copy.jsonl"
        shutil.copyfile(path, copy)
        session = open_session(copy)
        rng = random.Random(3)
        ids = session.tree.ids
        moves, appends = [], []
        for _ in range(200):
            target = ids[rng.randrange(len(ids))]
            t0 = time.perf_counter()
            session.move_to(target)
            moves.append(time.perf_counter() - t0)
        for n in range(200):
            t0 = time.perf_counter()
            session.append_message({"role": "user", "content": f"benchmark message {n}", "timestamp": n})
            appends.append(time.perf_counter() - t0)
        session.close()
    return {
        "move_to_p50_ms": 1000 * statistics.median(moves),
        "move_to_p95_ms": 1000 * sorted(moves)[int(len(moves) * 0.95)],
        "append_p50_ms": 1000 * statistics.median(appends),
        "rss_mb": peak_rss_mb(),
    }


def measure_durability(_path: str) -> dict:
    """Append latency with and without an fsync per append (JSONL) / synchronous=FULL (SQLite)."""
    from sessiontree import JsonlStorage, Session, SqliteStorage

    out = {}
    with tempfile.TemporaryDirectory(dir=DATA) as tmp:
        for name, make in (
            ("jsonl", lambda d: JsonlStorage.create(Path(tmp) / f"{d}.jsonl", cwd="/b", durable=d)),
            ("sqlite", lambda d: SqliteStorage.create(Path(tmp) / f"{d}.db", cwd="/b", durable=d)),
        ):
            for durable in (False, True):
                with Session(make(durable)) as session:
                    times = []
                    for n in range(300):
                        t0 = time.perf_counter()
                        session.append_message({"role": "user", "content": f"m{n}", "timestamp": n})
                        times.append(time.perf_counter() - t0)
                out[f"{name}_{'durable' if durable else 'default'}_ms"] = 1000 * statistics.median(times)
    return out


PREVIEW_MARKDOWN = """## Goal

Make the **parser** handle *every* time zone, and keep `day_label` stable:

- parse API times as UTC
- keep local time for people, with a `--tz` option
  - nested: the tests pin `TZ=UTC`

| zone | offset | note |
| --- | --- | --- |
| Tokyo | +9 | CI runs here |
| UTC | 0 | laptops |

```python
def parse_date(text: str) -> datetime:
    return datetime.fromisoformat(text.replace("Z", "+00:00"))
```

> A quote, with a [link](https://example.com/docs) in it.

"""


def measure_preview(_path: str) -> dict:
    """Cursor rest → settled preview for Markdown and code entries of 10 KB, 100 KB and 1 MB, in
    both preview scopes, with the render cache emptied before each sample (cold). "visible" is
    the first showing of the rows on screen (what is there is final); "done" the last row of
    the preview rendered (in the worker, while keys are answered)."""
    import inspect

    import rich.console

    from sessiontree import JsonlStorage, Session
    from sessiontree.tui.app import SessionTreeApp
    from sessiontree.tui.launch import open_for_browsing
    from sessiontree.tui.preview_pane import PreviewPane
    from sessiontree.tui.tree_view import SessionTreeView

    code_unit = inspect.getsource(rich.console)
    sizes = {"10KB": 10_000, "100KB": 100_000, "1MB": 1_000_000}

    def cut(unit: str, size: int) -> str:
        return (unit * (size // len(unit) + 1))[:size]

    result: dict = {}
    with tempfile.TemporaryDirectory(dir=DATA) as tmp:
        path = Path(tmp) / "preview.jsonl"
        targets: dict[str, str] = {}
        with Session(JsonlStorage.create(path, cwd="/b")) as session:
            usage = {"input": 0, "output": 0, "cacheRead": 0, "cacheWrite": 0, "totalTokens": 0}
            for label, size in sizes.items():
                session.append_message({"role": "user", "content": f"markdown {label}", "timestamp": 1})
                targets[f"markdown {label}"] = session.append_message(
                    {
                        "role": "assistant",
                        "content": [{"type": "text", "text": cut(PREVIEW_MARKDOWN, size)}],
                        "provider": "anthropic",
                        "model": "bench",
                        "usage": usage,
                        "stopReason": "toolUse",
                        "timestamp": 2,
                    }
                )
                session.append_message({"role": "user", "content": f"code {label}", "timestamp": 1})
                call = {"type": "toolCall", "id": f"w{size}", "name": "write"}
                call["arguments"] = {"path": f"src/big_{size}.py", "content": cut(code_unit, size)}
                targets[f"code {label}"] = session.append_message(
                    {
                        "role": "assistant",
                        "content": [call],
                        "provider": "anthropic",
                        "model": "bench",
                        "usage": usage,
                        "stopReason": "toolUse",
                        "timestamp": 2,
                    }
                )

        async def run() -> None:
            opened, _ = open_for_browsing(str(path), read_only=True)
            app = SessionTreeApp(opened, follow=False)
            async with app.run_test(size=(160, 50)) as pilot:
                await pilot.pause(0.5)  # the first paint, the renderer's warm-up
                await app.workers.wait_for_complete()
                browser = app.browser
                assert browser is not None
                pane = browser.query_one(PreviewPane)
                tree = browser.query_one(SessionTreeView)
                for scope in ("context", "entry"):
                    if scope == "entry":
                        await pilot.press("v")
                    for name, entry_id in targets.items():
                        visible, done = [], []
                        for _ in range(20):
                            tree.go_to_position(opened.tree.pos[entry_id] - 1)  # the entry before
                            await pilot.pause(0.1)
                            await app.workers.wait_for_complete()
                            await pilot.pause(0.1)
                            pane.cache.clear()
                            t0 = time.perf_counter()
                            await pilot.press("j")  # the cursor rests on the entry
                            while pane.timings.get("start", 0) < t0 or "done" not in pane.timings:
                                await asyncio.sleep(0.001)
                            visible.append(pane.timings["first"] - t0)
                            done.append(pane.timings["done"] - t0)
                        visible.sort()
                        done.sort()
                        result[f"{scope} · {name}"] = {
                            "visible_p50_ms": 1000 * visible[len(visible) // 2],
                            "visible_p95_ms": 1000 * visible[int(len(visible) * 0.95)],
                            "done_p50_ms": 1000 * done[len(done) // 2],
                        }

        asyncio.run(run())
    result["rss_mb"] = peak_rss_mb()
    return result


MEASURES = {
    "floor": measure_floor,
    "open": measure_open,
    "tui": measure_tui,
    "reopen": measure_reopen,
    "search": measure_search,
    "write": measure_write,
    "durability": measure_durability,
    "preview": measure_preview,
}


# --- driver -------------------------------------------------------------------------------------


def run_measure(kind: str, path: Path) -> dict:
    # Every measurement but "reopen" scans the file: the index cache (which "reopen" measures)
    # would otherwise turn the second of the best-of-N runs into a cached open.
    env = dict(os.environ)
    if kind != "reopen":
        env["SESSIONTREE_NO_INDEX_CACHE"] = "1"
    done = subprocess.run(
        [sys.executable, __file__, "--measure", kind, str(path)],
        capture_output=True,
        text=True,
        check=False,
        env=env,
    )
    if done.returncode != 0:
        return {"error": (done.stderr.strip().splitlines() or ["failed"])[-1]}
    return json.loads(done.stdout.strip().splitlines()[-1])


def best(kind: str, path: Path, repeat: int, key: str) -> dict:
    runs = [run_measure(kind, path) for _ in range(repeat)]
    ok = [r for r in runs if "error" not in r]
    if not ok:
        return runs[0]
    return min(ok, key=lambda r: r[key])


def pi_open(path: Path, repeat: int) -> dict | None:
    script = HERE / "pi_open.mjs"
    if (
        shutil.which("node") is None
        or not (HERE / "node_modules" / "@mariozechner" / "pi-coding-agent").is_dir()
    ):
        return None
    done = subprocess.run(
        ["node", "--max-old-space-size=16384", str(script), str(path), str(repeat)],
        capture_output=True,
        text=True,
        check=False,
        cwd=HERE,
    )
    if done.returncode != 0:
        lines = done.stderr.strip().splitlines()
        errors = [x.strip() for x in lines if "Error" in x] or lines or ["failed"]
        return {"error": "fails: " + errors[0][:100]}
    return json.loads(done.stdout)


def ensure_file(n: int) -> Path:
    path = DATA / f"session-{n}.jsonl"
    if not path.exists():
        from make_session import generate

        DATA.mkdir(parents=True, exist_ok=True)
        generate(path, n)
    return path


def fmt_ratio(value: float | None, base: float | None) -> str:
    if value is None or not base:
        return "n/a"
    return f"{value / base:.2f}×"


def main() -> None:
    parser = argparse.ArgumentParser(
        description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter
    )
    parser.add_argument("--sizes", default="10000,100000")
    parser.add_argument("--repeat", type=int, default=3)
    parser.add_argument("--json", type=Path, help="also write the raw results here")
    parser.add_argument("--measure", choices=sorted(MEASURES), help=argparse.SUPPRESS)
    parser.add_argument("file", nargs="?", help=argparse.SUPPRESS)
    args = parser.parse_args()
    if args.measure:
        print(json.dumps(MEASURES[args.measure](args.file)))
        return

    results = {}
    for n in (int(s) for s in args.sizes.split(",")):
        path = ensure_file(n)
        size_mb = path.stat().st_size / 1e6
        print(f"\n== {n:,} entries ({size_mb:.0f} MB) ==", flush=True)
        floor = best("floor", path, args.repeat, "seconds")
        opened = best("open", path, args.repeat, "open_s")
        tui = best("tui", path, max(1, args.repeat - 1), "first_paint_s")
        reopen = best("reopen", path, args.repeat, "reopen_s")
        search = best("search", path, 1, "search_s")
        write = best("write", path, 1, "move_to_p50_ms")
        pi = pi_open(path, args.repeat)
        results[n] = {
            "size_mb": size_mb,
            "floor": floor,
            "open": opened,
            "tui": tui,
            "reopen": reopen,
            "search": search,
            "write": write,
            "pi": pi,
        }
        report(n, results[n])
    durability = run_measure("durability", DATA)
    results["durability"] = durability
    if "error" not in durability:
        print("\n== append latency, p50 (a fresh file on this disk) ==")
        for backend in ("jsonl", "sqlite"):
            plain, durable = durability[f"{backend}_default_ms"], durability[f"{backend}_durable_ms"]
            slower = durable / plain
            print(f"{backend:7} default {plain:.3f} ms · durable {durable:.3f} ms ({slower:.0f}× slower)")
    preview = run_measure("preview", DATA)
    results["preview"] = preview
    if "error" not in preview:
        print("\n== preview: cursor rest → settled (160×50, cold render cache) ==")
        print(f"{'':28}  {'visible p50':>11}  {'visible p95':>11}  {'done p50':>9}")
        for name, row in preview.items():
            if isinstance(row, dict):
                shown = (row["visible_p50_ms"], row["visible_p95_ms"], row["done_p50_ms"])
                print(f"{name:28}  {shown[0]:8.0f} ms  {shown[1]:8.0f} ms  {shown[2]:6.0f} ms")
    else:
        print(f"\npreview: {preview['error']}")
    if args.json:
        args.json.write_text(json.dumps(results, indent=2))


def report(n: int, r: dict) -> None:
    floor_s = r["floor"].get("seconds")
    pi = r["pi"] or {}
    pi_s = pi.get("open_ms", 0) / 1000 if "open_ms" in pi else None
    rows = []

    def add(name: str, seconds: float | None, note: str = "") -> None:
        if seconds is None:
            shown = "error"
        elif seconds < 0.01:
            shown = f"{seconds * 1000:.3f} ms"
        elif seconds < 1:
            shown = f"{seconds * 1000:.1f} ms"
        else:
            shown = f"{seconds:.2f} s"
        rows.append((name, shown, fmt_ratio(seconds, floor_s), fmt_ratio(seconds, pi_s), note))

    add("floor: read + orjson every line", floor_s)
    if pi_s is not None:
        add("Pi SessionManager.open (node)", pi_s)
    elif pi:
        rows.append(("Pi SessionManager.open (node)", "", "", "", pi.get("error", "?")))
    add("open (index the file)", r["open"].get("open_s"))
    add(
        "build_context at the leaf",
        r["open"].get("build_context_s"),
        f"{r['open'].get('context_messages')} msgs",
    )
    add("reopen, index cache (unchanged file)", r["reopen"].get("reopen_s"))
    add("open → first paint (headless TUI)", r["tui"].get("first_paint_s"))
    add(
        "search a rare word (byte scan + decode)",
        r["search"].get("search_s"),
        f"{r['search'].get('candidates', '?')} decoded",
    )
    add("search by decoding every entry", r["search"].get("decode_all_s"), "as before the scan")
    t = r["tui"]
    for key, label in (
        ("cursor_p50_ms", "cursor move p50"),
        ("cursor_p95_ms", "cursor move p95"),
        ("cursor_sizes_p95_ms", "cursor move p95, tokens column on"),
        ("sizes_screen_p95_ms", "tokens for a screen of rows (worker) p95"),
        ("page_down_p95_ms", "page down p95"),
        ("filter_ms", "filter change (worst of 5)"),
        ("fold_ms", "fold at a fork"),
        ("unfold_ms", "unfold"),
    ):
        add(label, t[key] / 1000 if key in t else None)
    w = r["write"]
    add("move_to p50", w["move_to_p50_ms"] / 1000 if "move_to_p50_ms" in w else None)
    add("move_to p95", w["move_to_p95_ms"] / 1000 if "move_to_p95_ms" in w else None)
    add("append_message p50", w["append_p50_ms"] / 1000 if "append_p50_ms" in w else None)
    width = max(len(x[0]) for x in rows)
    print(f"{'':{width}}  {'time':>10}  {'÷ floor':>8}  {'÷ Pi':>8}")
    for name, shown, rf, rp, note in rows:
        print(f"{name:{width}}  {shown:>10}  {rf:>8}  {rp:>8}  {note}")
    mem = [
        ("peak RSS: floor (full parse)", r["floor"].get("rss_mb")),
        ("peak RSS: Pi open", pi.get("rss_mb")),
        ("peak RSS: open + build_context", r["open"].get("rss_mb")),
        ("peak RSS: TUI session", r["tui"].get("rss_mb")),
    ]
    floor_mb = r["floor"].get("rss_mb")
    for name, mb in mem:
        if mb is not None:
            print(f"{name:{width}}  {mb:>7.0f} MB  {fmt_ratio(mb, floor_mb):>8}")
    sys.stdout.flush()


if __name__ == "__main__":
    os.environ.setdefault("TZ", "UTC")
    main()
