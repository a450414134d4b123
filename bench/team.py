"""Database storages measured against JSONL: import throughput, open, append latency.

    python bench/team.py                      # 100k entries, a throwaway PostgreSQL cluster
    python bench/team.py --entries 20000 --repeat 3 --json out.json
    python bench/team.py --pg-url postgresql://user@host/db    # an existing server instead

- **import**: `sessiontree.importing.import_file` of a generated session file (bench/make_session.py:
  Pi's real messages, branches, summaries, compactions, labels) into a new SQLite file and a
  new PostgreSQL database, as entries per second (then VACUUM ANALYZE, as autovacuum would).
- **open**: `open_session(address, read_only=True)` of that session in a fresh process, per
  storage, as a ratio to opening the JSONL file itself; "+ context" adds `build_context()` at
  the leaf (what `sessiontree context` does), "+ tree" loads the whole tree (what the browser
  needs before its first paint).
- **append**: `append_message` latency, p50 and p95 of 500 appends, per storage, on that session.

The PostgreSQL server is a fresh cluster with default durability settings on loopback (fsync on;
sessiontree's own connections commit without waiting for the WAL flush unless opened `durable`,
the same trade as JSONL without fsync). Each open runs in its own process; times are the best of
`--repeat`. The machine is noisy: compare ratios within one run.
"""

from __future__ import annotations

import argparse
import json
import os
import statistics
import subprocess
import sys
import tempfile
import time
import uuid
from pathlib import Path

HERE = Path(__file__).resolve().parent
DATA = HERE / "data"
sys.path.insert(0, str(HERE.parent / "tests"))  # the throwaway-cluster harness


def make_file(entries: int) -> Path:
    path = DATA / f"team-{entries}.jsonl"
    if not path.exists():
        DATA.mkdir(exist_ok=True)
        subprocess.run(
            [sys.executable, str(HERE / "make_session.py"), str(entries), "-o", str(path)], check=True
        )
    return path


def fresh_database(url: str) -> str:
    import psycopg

    name = f"bench_{uuid.uuid4().hex[:10]}"
    with psycopg.connect(url, autocommit=True) as conn:
        conn.execute(f"CREATE DATABASE {name}")
    return f"{url.rpartition('/')[0]}/{name}"


def settle(url: str) -> None:
    """What autovacuum does within a minute of a bulk load: the first reads after one would
    otherwise pay for setting every row's visibility hint bits, which is not what opening a
    session costs."""
    import psycopg

    with psycopg.connect(url, autocommit=True) as conn:
        conn.execute("VACUUM ANALYZE")
        conn.execute("CHECKPOINT")  # and the bulk load's dirty pages written out now, not mid-run


# --- measurements in a fresh process ------------------------------------------------------------


def measure_open(address: str) -> dict:
    from sessiontree import open_session

    start = time.perf_counter()
    session = open_session(address, read_only=True)
    opened = time.perf_counter() - start
    session.build_context()
    with_context = time.perf_counter() - start
    session.tree  # noqa: B018 - the whole tree, as the browser loads it
    with_tree = time.perf_counter() - start
    entries = session.entry_count()
    session.close()
    return {"open_s": opened, "context_s": with_context, "tree_s": with_tree, "entries": entries}


def in_child(func: str, *args: str) -> dict:
    code = (
        f"import sys, json; sys.path.insert(0, {str(HERE)!r}); import team;"
        f" print(json.dumps(team.{func}(*sys.argv[1:])))"
    )
    done = subprocess.run([sys.executable, "-c", code, *args], capture_output=True, text=True, check=True)
    return json.loads(done.stdout)


def best_opens(addresses: dict[str, str], repeat: int) -> dict:
    """Rounds over every storage in turn (so a noisy moment hits all of them), best per key."""
    runs: dict[str, list[dict]] = {kind: [] for kind in addresses}
    for _ in range(repeat):
        for kind, address in addresses.items():
            runs[kind].append(in_child("measure_open", address))
    return {
        kind: {key: min(r[key] for r in rs) if key.endswith("_s") else rs[0][key] for key in rs[0]}
        for kind, rs in runs.items()
    }


def append_latency(address: str, count: int = 500) -> dict:
    from sessiontree import open_session

    message = {"role": "user", "content": "a short user message, about as long as most", "timestamp": 1}
    samples = []
    with open_session(address) as session:
        for _ in range(20):  # warm up: connection caches, prepared statements
            session.append_message(message)
        for _ in range(count):
            start = time.perf_counter()
            session.append_message(message)
            samples.append(time.perf_counter() - start)
    samples.sort()
    return {
        "p50_ms": 1000 * statistics.median(samples),
        "p95_ms": 1000 * samples[int(len(samples) * 0.95)],
    }


def import_rate(path: Path, target: str) -> dict:
    from sessiontree.importing import import_file

    start = time.perf_counter()
    result = import_file(path, target)
    seconds = time.perf_counter() - start
    if result.status != "new":
        raise SystemExit(f"import into {target}: {result.status} {result.message}")
    return {
        "entries": result.added,
        "seconds": seconds,
        "per_s": result.added / seconds,
        "sid": result.session_id,
    }


# --- the run ------------------------------------------------------------------------------------


def main() -> int:
    parser = argparse.ArgumentParser(
        description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter
    )
    parser.add_argument("--entries", type=int, default=100_000)
    parser.add_argument("--repeat", type=int, default=3)
    parser.add_argument("--pg-url", help="an existing server's database to create bench databases from")
    parser.add_argument("--json", type=Path, help="also write the figures here")
    args = parser.parse_args()

    cluster = None
    url = args.pg_url
    if url is None:
        from harness import pgcluster

        cluster = pgcluster.start()
        url = cluster.url
    work = Path(tempfile.mkdtemp(prefix="sessiontree-bench-"))
    try:
        source = make_file(args.entries)
        print(f"session file: {source.name}, {source.stat().st_size / 1e6:.0f} MB", flush=True)
        results: dict = {"entries": args.entries}

        sqlite_path = work / "bench.sqlite"
        pg_db = fresh_database(url)
        results["import"] = {
            "sqlite": import_rate(source, str(sqlite_path)),
            "postgres": import_rate(source, pg_db),
        }
        settle(pg_db)
        sid = results["import"]["sqlite"]["sid"]
        addresses = {
            "jsonl": str(source),
            "sqlite": f"{sqlite_path}#{sid}",
            "postgres": f"{pg_db}#{sid}",
        }
        results["open"] = best_opens(addresses, args.repeat)
        copy = work / "append.jsonl"
        copy.write_bytes(source.read_bytes())
        appendable = {**addresses, "jsonl": str(copy)}
        results["append"] = {kind: append_latency(address) for kind, address in appendable.items()}
    finally:
        if cluster is not None:
            cluster.stop()
        for leftover in work.iterdir():
            leftover.unlink()
        work.rmdir()

    report(results)
    if args.json:
        args.json.write_text(json.dumps(results, indent=2))
    return 0


def report(results: dict) -> None:
    n = results["entries"]
    print(f"\nimport of {n:,} entries (entries/s):")
    for kind, r in results["import"].items():
        print(f"  {kind:9} {r['per_s']:>9,.0f}/s   ({r['seconds']:.1f} s)")
    base = results["open"]["jsonl"]
    print(f"\nopen of {n:,} entries, read-only, fresh process (best of runs; × = ratio to JSONL):")
    print(f"  {'':9} {'open':>17} {'+ context':>17} {'+ whole tree':>17}")
    for kind, r in results["open"].items():
        cells = [f"{1000 * r[k]:8.0f} ms {r[k] / base[k]:5.2f}×" for k in ("open_s", "context_s", "tree_s")]
        print(f"  {kind:9} " + " ".join(cells))
    print("\nappend_message latency (500 appends on that session):")
    for kind, r in results["append"].items():
        print(f"  {kind:9} p50 {r['p50_ms']:.3f} ms   p95 {r['p95_ms']:.3f} ms")


if __name__ == "__main__":
    os.environ.setdefault("PYTHONHASHSEED", "0")
    sys.exit(main())
