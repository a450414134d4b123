"""Fuzzing the loader and everything that reads a loaded session: any bytes give a session
(maybe read-only, with diagnostics) or a SessionError — never another exception, never a hang.

Inputs are mutations (bit flips, truncations, invalid UTF-8, huge numbers, deep nesting,
shuffled/duplicated lines, a wrong type in any field) of real files: the demo session and Pi's
fixtures. `scripts/fuzz.py` runs the same check for as long as you like and counts inputs."""

from __future__ import annotations

import os
import random
import tempfile
import time
from importlib import resources
from pathlib import Path

from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from harness.fuzzing import exercise, mutate
from helpers import PI_FIXTURES, examples
from sessiontree import open_session

DEMO = resources.files("sessiontree.demo").joinpath("demo.jsonl").read_bytes()
SMALL_V1 = b"\n".join(PI_FIXTURES.joinpath("large-session.jsonl").read_bytes().split(b"\n")[:60]) + b"\n"
SEEDS = [DEMO, SMALL_V1]


def written_earlier(path: Path, data: bytes) -> None:
    """`data` in a file last written a minute ago. A write after an unfinished last line waits
    until the file has been quiet for a quarter of a second (another writer may be finishing
    it: `JsonlStorage._set_aside_torn_tail`, tested on its own); a file written just now made
    each of these examples wait that long, 50 s of this module's 57."""
    path.write_bytes(data)
    earlier = time.time() - 60
    os.utime(path, (earlier, earlier))


@settings(max_examples=examples(400), deadline=5000, suppress_health_check=[HealthCheck.too_slow])
@given(st.sampled_from(SEEDS), st.integers(0, 2**32), st.integers(1, 3), st.booleans())
def test_mutated_files_never_crash(seed, salt, rounds, writable):
    rng = random.Random(salt)
    data = seed
    for _ in range(rounds):
        data = mutate(data, rng)
    with tempfile.TemporaryDirectory() as tmp:
        path = Path(tmp) / "fuzz.jsonl"
        written_earlier(path, data)
        exercise(str(path), open_session, writable=writable)  # any exception but SessionError fails


@settings(max_examples=examples(200), deadline=5000)
@given(st.binary(max_size=300))
def test_arbitrary_bytes_never_crash(data):
    with tempfile.TemporaryDirectory() as tmp:
        path = Path(tmp) / "bytes.jsonl"
        path.write_bytes(data)
        exercise(str(path), open_session)


@settings(max_examples=examples(200), deadline=5000)
@given(st.binary(max_size=200))
def test_arbitrary_lines_after_a_valid_header(data):
    with tempfile.TemporaryDirectory() as tmp:
        path = Path(tmp) / "lines.jsonl"
        written_earlier(path, DEMO.split(b"\n", 1)[0] + b"\n" + data)
        assert exercise(str(path), open_session, writable=True) in ("opened", "refused-later")


def test_the_mutations_reach_both_outcomes():
    """The mutations above are not all refused (nor all harmless): fixed salts, so this holds in
    whichever process runs it (the tests run in several)."""
    outcomes = set()
    with tempfile.TemporaryDirectory() as tmp:
        path = Path(tmp) / "fuzz.jsonl"
        for salt in range(60):
            rng = random.Random(salt)
            data = SEEDS[salt % 2]
            for _ in range(1 + salt % 3):
                data = mutate(data, rng)
            written_earlier(path, data)
            outcomes.add("opened" if exercise(str(path), open_session) == "opened" else "refused")
    assert outcomes == {"opened", "refused"}
