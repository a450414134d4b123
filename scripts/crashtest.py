"""Crash-safety run: SIGKILL a writer at random moments, many times, and verify after each kill.

    python scripts/crashtest.py --kills 1000 --seconds 900            # JSONL and SQLite
    python scripts/crashtest.py --backend jsonl --kills 200
    python scripts/crashtest.py --backend postgres --kills 300    # a throwaway cluster, or --pg-url

Writers are forked from this process (no interpreter start-up per round), so a thousand rounds
take a few minutes. Prints one summary line per backend; exits 1 if any check failed.
"""

from __future__ import annotations

import argparse
import sys
import tempfile
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parents[1] / "tests"))
from harness import pgcluster
from harness.crashtest import run

if __name__ == "__main__":
    parser = argparse.ArgumentParser(
        description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter
    )
    parser.add_argument("--backend", choices=["jsonl", "sqlite", "postgres", "both", "all"], default="both")
    parser.add_argument("--pg-url", help="PostgreSQL database to use (default: a throwaway cluster)")
    parser.add_argument("--kills", type=int, default=1000)
    parser.add_argument("--seconds", type=float, default=900, help="time limit per backend")
    parser.add_argument("--seed", type=int, default=1)
    parser.add_argument(
        "--foreign", action="store_true", help="JSONL: a lock-free writer (as Pi) appends alongside"
    )
    args = parser.parse_args()
    failed = False
    backends = {"both": ("jsonl", "sqlite"), "all": ("jsonl", "sqlite", "postgres")}.get(
        args.backend, (args.backend,)
    )
    cluster = None
    url = args.pg_url
    if "postgres" in backends and url is None:
        cluster = pgcluster.start()
        url = cluster.url
    for backend in backends:
        with tempfile.TemporaryDirectory() as tmp:
            report = run(
                backend,
                Path(tmp),
                kills=args.kills,
                seconds=args.seconds,
                seed=args.seed,
                spawn="fork",
                url=url if backend == "postgres" else None,
                foreign=args.foreign,
            )
        print(report.summary(), flush=True)
        for problem in report.problems[:20]:
            print("  " + problem)
        failed |= bool(report.problems)
    if cluster is not None:
        cluster.stop()
    sys.exit(1 if failed else 0)
