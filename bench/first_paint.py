"""Process start → first screen with content, in a real terminal (tmux), for sessiontree.

    python bench/first_paint.py FILE [--runs 5] [--size 80x24] [--pi] [--before OTHER/src]

Starts `sessiontree FILE` in a detached tmux window and polls the pane every 5 ms until it
shows any non-blank text ("first paint": our loading screen), then until it shows the
browser's footer ("browsable"), then sends `q`. With `--pi`, also times Pi's side as a whole
process (`node bench/pi_open.mjs FILE`: Node start, Pi's import, SessionManager.open), since
Pi's interactive TUI cannot be started here without an account; runs alternate ours/Pi's.
Prints p50/p95 per column, in seconds.
"""

from __future__ import annotations

import argparse
import shutil
import statistics
import subprocess
import sys
import time
import uuid
from pathlib import Path

HERE = Path(__file__).resolve().parent
BROWSABLE = "Help"  # the browser's footer names the help key once the tree is up


def pane(name: str) -> str:
    return subprocess.run(
        ["tmux", "capture-pane", "-p", "-t", name], capture_output=True, text=True, check=False
    ).stdout


def ours(path: Path, size: str, timeout: float, src: Path | None) -> tuple[float, float]:
    name = f"fp-{uuid.uuid4().hex[:8]}"
    cols, rows = size.split("x")
    # `--src` runs another checkout's code with this interpreter (A/B in one run).
    command = [shutil.which("sessiontree") or "sessiontree", str(path)]
    if src is not None:
        command = ["env", f"PYTHONPATH={src}", sys.executable, "-m", "sessiontree", str(path)]
    start = time.perf_counter()
    subprocess.run(["tmux", "new-session", "-d", "-s", name, "-x", cols, "-y", rows, *command], check=True)
    first = ready = float("nan")
    try:
        while time.perf_counter() - start < timeout:
            text = pane(name)
            now = time.perf_counter() - start
            if first != first and text.strip():
                first = now
            if BROWSABLE in text:
                ready = now
                break
            time.sleep(0.005)
    finally:
        subprocess.run(["tmux", "send-keys", "-t", name, "q"], check=False)
        time.sleep(0.3)
        subprocess.run(["tmux", "kill-session", "-t", name], capture_output=True, check=False)
    return first, ready


def pi(path: Path) -> float:
    start = time.perf_counter()
    subprocess.run(["node", str(HERE / "pi_open.mjs"), str(path)], capture_output=True, check=True)
    return time.perf_counter() - start


def summary(values: list[float]) -> str:
    values = sorted(v for v in values if v == v)
    if not values:
        return "n/a"
    p95 = values[min(len(values) - 1, round(0.95 * (len(values) - 1)))]
    return f"p50 {statistics.median(values):.3f}  p95 {p95:.3f}"


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("file", type=Path)
    parser.add_argument("--runs", type=int, default=5)
    parser.add_argument("--size", default="80x24")
    parser.add_argument("--timeout", type=float, default=120.0)
    parser.add_argument("--pi", action="store_true")
    parser.add_argument("--before", type=Path, help="another checkout's src/ to alternate with")
    args = parser.parse_args()
    firsts: list[float] = []
    readies: list[float] = []
    pis: list[float] = []
    before_first: list[float] = []
    before_ready: list[float] = []
    for _ in range(args.runs):
        first, ready = ours(args.file, args.size, args.timeout, None)
        firsts.append(first)
        readies.append(ready)
        if args.before is not None:
            first, ready = ours(args.file, args.size, args.timeout, args.before)
            before_first.append(first)
            before_ready.append(ready)
        if args.pi:
            pis.append(pi(args.file))
    print(f"{args.file.name}: {args.runs} runs, warm cache, {args.size}")
    print(f"  sessiontree first paint   {summary(firsts)}")
    print(f"  sessiontree browsable     {summary(readies)}")
    if args.before is not None:
        print(f"  before: first paint       {summary(before_first)}")
        print(f"  before: browsable         {summary(before_ready)}")
    if args.pi:
        print(f"  pi process+open (no TUI)  {summary(pis)}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
