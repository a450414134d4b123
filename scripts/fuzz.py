"""Long-running fuzzer for the loader (the check of tests/test_fuzz.py, for as long as you like).

    python scripts/fuzz.py --seconds 600

Mutates real session files (the demo and Pi's fixtures), opens each result and uses it the way
the CLI and the browser do. Prints how many inputs were tried and how they ended; any exception
other than SessionError stops the run and saves the input to fuzz-crash-<n>.jsonl. With
`--atheris` (pip install atheris) the same check runs under coverage-guided fuzzing instead.
"""

from __future__ import annotations

import argparse
import random
import sys
import tempfile
import time
import traceback
from collections import Counter
from importlib import resources
from pathlib import Path

from sessiontree import open_session

sys.path.insert(0, str(Path(__file__).resolve().parents[1] / "tests"))
from harness.fuzzing import exercise, mutate

ROOT = Path(__file__).resolve().parent.parent
SEEDS = [
    resources.files("sessiontree.demo").joinpath("demo.jsonl").read_bytes(),
    b"\n".join((ROOT / "tests/fixtures/pi/large-session.jsonl").read_bytes().split(b"\n")[:80]) + b"\n",
    b"\n".join((ROOT / "tests/fixtures/pi/before-compaction.jsonl").read_bytes().split(b"\n")[:40]) + b"\n",
]


def check(data: bytes, workdir: Path, writable: bool) -> str:
    path = workdir / "input.jsonl"
    path.write_bytes(data)
    for extra in workdir.iterdir():  # sidecars a repair may have written
        if extra != path:
            extra.unlink()
    return exercise(str(path), open_session, writable=writable)


def run_random(seconds: float, seed: int) -> int:
    rng = random.Random(seed)
    outcomes: Counter[str] = Counter()
    deadline = time.monotonic() + seconds
    slowest = 0.0
    with tempfile.TemporaryDirectory() as tmp:
        workdir = Path(tmp)
        while time.monotonic() < deadline:
            data = rng.choice(SEEDS)
            for _ in range(rng.randint(1, 4)):
                data = mutate(data, rng)
            start = time.perf_counter()
            try:
                outcomes[check(data, workdir, rng.random() < 0.3)] += 1
            except Exception:
                n = sum(outcomes.values())
                crash = Path(f"fuzz-crash-{n}.jsonl")
                crash.write_bytes(data)
                traceback.print_exc()
                print(f"crash after {n} inputs; input saved to {crash}", file=sys.stderr)
                return 1
            slowest = max(slowest, time.perf_counter() - start)
    total = sum(outcomes.values())
    print(
        f"{total} inputs in {seconds:.0f} s: {dict(outcomes)};"
        f" slowest input {slowest * 1000:.0f} ms; no crash"
    )
    return 0


def run_atheris() -> int:
    import atheris

    workdir = Path(tempfile.mkdtemp())

    def one(data: bytes) -> None:
        check(data, workdir, writable=False)

    atheris.Setup(sys.argv[:1] + [a for a in sys.argv[1:] if a.startswith("-atheris")], one)
    atheris.Fuzz()
    return 0


if __name__ == "__main__":
    parser = argparse.ArgumentParser(
        description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter
    )
    parser.add_argument("--seconds", type=float, default=60)
    parser.add_argument("--seed", type=int, default=int(time.time()))
    parser.add_argument("--atheris", action="store_true")
    args = parser.parse_args()
    sys.exit(run_atheris() if args.atheris else run_random(args.seconds, args.seed))
