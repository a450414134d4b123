"""Building the context (what goes to the model) against Pi's `buildSessionContext`.

    python bench/context.py FILE [FILE ...] [--runs 5]

For each file, in one run, alternating the two: Pi opens the file once (`SessionManager.open`
parses every line) and then builds the context `--runs` times (`node bench/pi_context.mjs`);
sessiontree opens it (the index only) and builds the context as many times, each from a
fresh open so that no decoded entry is reused. Also prints both as whole processes (start →
context built: `python -m sessiontree context FILE --json` and Pi's open + build +
`JSON.stringify`), and the message counts, which agree except where a compaction carries a
`retainedTail` (an extension Pi's coding agent 0.73 does not read: it keeps the messages from
`firstKeptEntryId` instead; see ../shared/reference/pi-session-format.md). Medians in ms.
"""

from __future__ import annotations

import argparse
import json
import statistics
import subprocess
import sys
import time
from pathlib import Path

HERE = Path(__file__).resolve().parent


def ours(path: Path, runs: int) -> tuple[list[float], int]:
    from sessiontree import open_session

    times, count = [], 0
    for _ in range(runs):
        session = open_session(path, read_only=True)
        start = time.perf_counter()
        context = session.build_context()
        times.append((time.perf_counter() - start) * 1000)
        count = len(context.messages)
        session.close()
        # Freed here, not by the next run's assignment, which the next timing would include:
        # freeing a deep context's objects takes a fifth as long as building them.
        del context
    return times, count


def pi(path: Path, runs: int) -> tuple[list[float], int]:
    out = subprocess.run(
        ["node", str(HERE / "pi_context.mjs"), str(path), str(runs)],
        capture_output=True,
        text=True,
        check=True,
        cwd=HERE,
    )
    data = json.loads(out.stdout)
    return data["times_ms"], data["messages"]


def process(cmd: list[str]) -> float:
    start = time.perf_counter()
    subprocess.run(cmd, stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL, check=False, cwd=HERE)
    return (time.perf_counter() - start) * 1000


PI_WHOLE = (
    "import {SessionManager} from '@mariozechner/pi-coding-agent';"
    "const m = SessionManager.open(process.argv[1]);"
    "process.stdout.write(JSON.stringify(m.buildSessionContext().messages));"
)


def main() -> None:
    parser = argparse.ArgumentParser(
        description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter
    )
    parser.add_argument("files", nargs="+", type=Path)
    parser.add_argument("--runs", type=int, default=5)
    args = parser.parse_args()
    head = f"{'file':28} {'ours':>9} {'Pi':>9} {'ratio':>6}   {'ours (process)':>14}"
    print(f"{head} {'Pi (process)':>12}  messages")
    for path in args.files:
        mine, theirs, mine_p, theirs_p = [], [], [], []
        counts = set()
        for _ in range(2):  # alternated
            t, c = ours(path, args.runs)
            mine += t
            counts.add(c)
            t, c = pi(path, args.runs)
            theirs += t
            counts.add(c)
            mine_p.append(process([sys.executable, "-m", "sessiontree", "context", str(path), "--json"]))
            theirs_p.append(process(["node", "--input-type=module", "-e", PI_WHOLE, str(path.resolve())]))
        a, b = statistics.median(mine), statistics.median(theirs)
        agree = "equal" if len(counts) == 1 else f"DIFFER {sorted(counts)}"
        print(
            f"{path.name:28} {a:9.1f} {b:9.1f} {a / b:6.2f}   {statistics.median(mine_p):14.0f}"
            f" {statistics.median(theirs_p):12.0f}  {counts.pop() if agree == 'equal' else agree}",
            flush=True,
        )


if __name__ == "__main__":
    main()
