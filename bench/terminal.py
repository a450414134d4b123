"""What a user feels in a real terminal: sessiontree and Pi's own `/tree`, alternated, in tmux.

    python bench/terminal.py FILE [FILE ...] [--rounds 3] [--presses 10] [--size 160x50]
    python bench/terminal.py FILE --no-pi --before OTHER/src     # this checkout against another

Each round starts every app in a detached tmux window (order alternating between rounds) and
polls the pane (`tmux capture-pane`, a few ms per poll, the same for both) for:

- **first paint**: process start → any text on the screen (our loading screen counts);
- **browsable**: process start → the tree is up (our footer; Pi's title, drawn with its tree);
- **key → frame**: `WARM` seconds after the tree is up, with the screen still, a key is sent and
  the pane polled until it changes (the next frame), then until it has been still for `QUIET`
  (settled: for sessiontree that includes the preview, which Pi does not have). Keys are paired
  by what they do: cursor up, page up, fold at the cursor (Pi's `ctrl+left` folds, or moves up
  where nothing folds), cycle the filter (last: Pi's cycle reaches "labeled only", where
  nothing else moves).

Each round also times the floors under every "key → frame" figure (`FLOORS`), printed under the
table: a program that only redraws a line per key, and one that redraws every cell of the screen
(what a key that changes the whole tree costs tmux and the polling).

Pi's side is `bench/pi_tree.mjs`: the `TreeSelectorComponent` Pi's interactive `/tree` command
shows, drawn by Pi's TUI, on the session opened by `SessionManager.open` (Pi's interactive mode
itself needs an account to start). Prints p50/p95 per measure in milliseconds, with n, and the
ratio of the medians (ours / Pi's: below 1 is faster). Everything is one run on one machine:
compare the columns, not the absolute figures.
"""

from __future__ import annotations

import argparse
import os
import re
import shutil
import signal
import statistics
import subprocess
import sys
import tempfile
import time
import uuid
from dataclasses import dataclass, field, replace
from pathlib import Path

HERE = Path(__file__).resolve().parent
POLL = 0.002  # seconds between pane captures
QUIET = 0.3  # a screen unchanged this long has settled
KEY_TIMEOUT = 3.0  # a key that changes nothing in this long counts as "no frame"
WARM = 2.0  # seconds between the tree coming up and the first timed key


@dataclass(frozen=True)
class App:
    name: str
    command: list[str]
    ready: str  # text on the screen once the tree is browsable
    quit: str
    keys: dict[str, str]  # measure → tmux key name
    # measure → a key sent (untimed) after its presses, back to the state the next measure
    # expects: our filter cycle otherwise ends where its presses leave it ("labeled only" after
    # eight, an empty tree on the bench files), and every key measured after it changed nothing
    reset: dict[str, str] = field(default_factory=dict)


def ours(src: Path | None) -> App:
    # the interpreter's own script first: the bench runs from a virtualenv not activated too
    script = shutil.which("sessiontree", path=str(Path(sys.executable).parent)) or shutil.which("sessiontree")
    command = [script] if script else [sys.executable, "-m", "sessiontree"]
    if src is not None:  # another checkout's code with this interpreter (A/B in one run)
        command = ["env", f"PYTHONPATH={src}", sys.executable, "-m", "sessiontree"]
    return App(
        "before" if src is not None else "sessiontree",
        command,
        "Help",  # the browser's footer names the help key once the tree is up
        "q",
        # `z` toggles (fold every side branch, unfold all); each `b` is a leaf move further back
        # (an entry appended to the bench's private copy).
        {
            "cursor up": "Up",
            "page up": "PPage",
            "fold": "Space",
            "filter cycle": "f",
            "z": "z",
            "back (b)": "b",
        },
        {"filter cycle": "1"},  # the default filter
    )


PI = App(
    "pi /tree",
    ["node", "--max-old-space-size=16384", str(HERE / "pi_tree.mjs")],  # a 1M-entry tree needs the heap
    "Session Tree",  # Pi draws its title and the tree in one frame
    "Escape",
    {"cursor up": "Up", "page up": "Left", "fold": "C-Left", "filter cycle": "C-o"},
)

# The floor under every "key → frame" figure: a program that does nothing but redraw one line
# per key, timed the same way. What it takes is tmux's and the polling's share (send-keys, the
# terminal, capture-pane), which no app can go under; an app's own share is what it adds.
FLOOR_SCRIPT = """
import os, sys, tty
tty.setraw(0)
whole = sys.argv[1] == "screen"
os.write(1, b"\\x1b[2J\\x1b[Hfloor: ready")
n = 0
while True:
    data = os.read(0, 64)
    if not data or b"q" in data:
        break
    n += 1
    if not whole:
        os.write(1, b"\\x1b[2J\\x1b[H%d keys" % n)
        continue
    # Every cell of the screen in a few colours per row, about what Textual writes when a key
    # changes the whole tree (10-18 KB at 160x50, measured on its writes).
    cols, rows = os.get_terminal_size(1)
    out = [b"\\x1b[H"]
    for y in range(rows):
        out.append(b"\\x1b[%d;1H" % (y + 1))
        for x in range(0, cols, 20):
            shade = (n * 7 + y * 3 + x) % 200
            out.append(b"\\x1b[38;2;%d;%d;200m" % (shade, 255 - shade))
            out.append((b"%d:%d " % (n, y) * 20)[: min(20, cols - x)])
        out.append(b"\\x1b[0m")
    os.write(1, b"".join(out))
"""
# Two floors under every "key → frame" figure: one redraws a line per key, the other the whole
# screen (what a filter or a fold changes). Their figures are tmux's and the polling's share.
FLOORS = {
    what: App(f"floor {what}", [sys.executable, "-c", FLOOR_SCRIPT, what], "ready", "q", {"cursor up": "Up"})
    for what in ("line", "screen")
}


@dataclass
class Samples:
    values: dict[str, list[float]] = field(default_factory=dict)
    missed: dict[str, int] = field(default_factory=dict)

    def add(self, measure: str, seconds: float | None) -> None:
        if seconds is None:
            self.missed[measure] = self.missed.get(measure, 0) + 1
        else:
            self.values.setdefault(measure, []).append(seconds)


def pane(name: str) -> str:
    """The pane's text with its colours (`-e`): a cursor bar that moves is a change of style."""
    return subprocess.run(
        ["tmux", "capture-pane", "-p", "-e", "-t", name], capture_output=True, text=True, check=False
    ).stdout


def _plain(screen: str) -> str:
    return re.sub(r"\x1b\[[0-9;:]*[A-Za-z]", "", screen)


def settle(name: str, since: str, start: float, timeout: float) -> tuple[float | None, float, str]:
    """(first change after `since`, last change before QUIET of stillness, the final screen),
    in seconds from `start`."""
    first: float | None = None
    last = time.perf_counter() - start
    text = since
    still_since = time.perf_counter()
    while True:
        now = time.perf_counter()
        if now - start > timeout:
            return first, last, text
        screen = pane(name)
        if screen != text:
            text, still_since = screen, now
            last = now - start
            if first is None:
                first = last
        elif first is not None and now - still_since >= QUIET:
            return first, last, text
        time.sleep(POLL)


def run_app(app: App, path: Path, size: str, presses: int, timeout: float, into: Samples) -> None:
    name = f"bench-{uuid.uuid4().hex[:8]}"
    cols, rows = size.split("x")
    start = time.perf_counter()
    subprocess.run(
        ["tmux", "new-session", "-d", "-s", name, "-x", cols, "-y", rows, *app.command, str(path)], check=True
    )
    pid = int(
        subprocess.run(
            ["tmux", "display-message", "-p", "-t", name, "#{pane_pid}"],
            capture_output=True,
            text=True,
            check=True,
        ).stdout
    )
    try:
        first = ready = None
        while time.perf_counter() - start < timeout:
            text = pane(name)
            now = time.perf_counter() - start
            if first is None and _plain(text).strip():
                first = now
            if app.ready in _plain(text):
                ready = now
                break
            time.sleep(POLL)
        into.add("first paint", first)
        into.add("browsable", ready)
        if ready is None:
            return
        screen = settle(name, "", time.perf_counter(), timeout)[2]
        # Keys are timed once the app is idle: the first ones after the first paint otherwise
        # also pay for work started by the paint (our preview's first Markdown and code render
        # imports Pygments' lexers in a thread), which `first paint` already counts.
        time.sleep(WARM)
        for measure, key in app.keys.items():
            for _ in range(presses):
                t0 = time.perf_counter()
                subprocess.run(["tmux", "send-keys", "-t", name, key], check=True)
                frame, settled, screen = settle(name, screen, t0, KEY_TIMEOUT)
                into.add(f"{measure} → frame", frame)
                into.add(f"{measure} → settled", settled if frame is not None else None)
            if measure in app.reset:
                subprocess.run(["tmux", "send-keys", "-t", name, app.reset[measure]], check=True)
                screen = settle(name, screen, time.perf_counter(), KEY_TIMEOUT)[2]
    finally:
        subprocess.run(["tmux", "send-keys", "-t", name, app.quit], check=False)
        time.sleep(0.2)
        subprocess.run(["tmux", "kill-session", "-t", name], capture_output=True, check=False)
        if outlived(pid):  # it would spin on the closed terminal and skew every later figure
            into.add("outlived its terminal", None)


def outlived(pid: int) -> bool:
    """Whether the app's process is still there a second after its terminal closed (then killed)."""
    for _ in range(20):
        try:
            os.kill(pid, 0)
        except ProcessLookupError:
            return False
        time.sleep(0.05)
    os.kill(pid, signal.SIGKILL)
    return True


def pct(values: list[float], q: float) -> float:
    ordered = sorted(values)
    return ordered[min(len(ordered) - 1, round(q * (len(ordered) - 1)))]


def report(path: Path, apps: list[App], results: dict[str, Samples]) -> None:
    print(f"\n{path.name} ({path.stat().st_size / 1e6:.1f} MB)")
    measures: list[str] = []
    for app in apps:
        for m in [*results[app.name].values, *results[app.name].missed]:
            if m not in measures:
                measures.append(m)
    head = "".join(f"{app.name:>28}" for app in apps)
    print(f"  {'ms, p50 / p95 (n)':28}{head}{'  ratio' if len(apps) > 1 else ''}")
    for m in measures:
        cells = []
        medians = []
        for app in apps:
            values = results[app.name].values.get(m, [])
            missed = results[app.name].missed.get(m, 0)
            if values:
                medians.append(statistics.median(values))
                cell = f"{1000 * medians[-1]:.0f} / {1000 * pct(values, 0.95):.0f} ({len(values)})"
            else:
                medians.append(None)
                cell = "n/a"
            if missed:
                cell += f" {missed} none"
            cells.append(f"{cell:>28}")
        ratio = ""
        if len(apps) > 1 and medians[0] and medians[1]:
            ratio = f"  {medians[0] / medians[1]:.2f}×"
        print(f"  {m:28}{''.join(cells)}{ratio}")


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("files", type=Path, nargs="+")
    parser.add_argument("--rounds", type=int, default=3)
    parser.add_argument("--presses", type=int, default=10, help="per key and round")
    parser.add_argument("--size", default="160x50")
    parser.add_argument("--timeout", type=float, default=300.0, help="seconds to wait for the tree")
    parser.add_argument("--no-pi", action="store_true", help="sessiontree only")
    parser.add_argument("--before", type=Path, help="another checkout's src/ to alternate with")
    parser.add_argument(
        "--keys", help="only these of our measures, comma-separated (e.g. 'cursor up,back (b)')"
    )
    args = parser.parse_args()
    if shutil.which("tmux") is None:
        print("needs tmux", file=sys.stderr)
        return 2
    apps = [ours(None)]
    if args.before is not None:
        apps.append(ours(args.before))
    if args.keys:
        wanted = [k.strip() for k in args.keys.split(",")]
        unknown = [k for k in wanted if k not in apps[0].keys]
        if unknown:
            print(f"unknown keys {unknown}; ours are {list(apps[0].keys)}", file=sys.stderr)
            return 2
        apps = [replace(app, keys={k: app.keys[k] for k in wanted}) for app in apps]
        if not args.no_pi:
            print("--keys measures sessiontree only: add --no-pi", file=sys.stderr)
            return 2
    if not args.no_pi:
        if shutil.which("node") is None or not (HERE / "node_modules").is_dir():
            print("Pi's side needs node and `cd bench && npm ci`; use --no-pi", file=sys.stderr)
            return 2
        apps.append(PI)
    # A session that outlives the measured ones: tmux's server exits with its last session, and
    # the next start would race with that exit.
    keeper = f"bench-keep-{uuid.uuid4().hex[:8]}"
    subprocess.run(["tmux", "new-session", "-d", "-s", keeper, "sleep", "86400"], check=True)
    try:
        for path in args.files:
            measure_file(path, apps, args)
    finally:
        subprocess.run(["tmux", "kill-session", "-t", keeper], capture_output=True, check=False)
    print(
        f"\n{args.rounds} rounds alternated, {args.presses} presses per key and round, {args.size},"
        " warm cache"
    )
    return 0


def measure_file(path: Path, apps: list[App], args: argparse.Namespace) -> None:
    # Both apps open a private copy: Pi's SessionManager.open rewrites an older-format file in
    # place (its migrations), which must never happen to a fixture or to the user's file.
    with tempfile.TemporaryDirectory(prefix="bench-terminal-") as tmp:
        copy = Path(tmp) / path.name
        shutil.copyfile(path, copy)
        # An older-format file would be read-only for us and rewritten by Pi's first open: both
        # apps get it in version 3 from the start.
        subprocess.run([*ours(None).command, "upgrade", str(copy)], capture_output=True, check=False)
        floors = list(FLOORS.values())
        results = {app.name: Samples() for app in [*apps, *floors]}
        for round_ in range(args.rounds):
            order = apps if round_ % 2 == 0 else apps[::-1]
            for app in order:
                run_app(app, copy, args.size, args.presses, args.timeout, results[app.name])
            for floor_app in floors:
                run_app(floor_app, copy, args.size, args.presses, args.timeout, results[floor_app.name])
        report(path, apps, results)
        for what, floor_app in FLOORS.items():
            floor = results[floor_app.name].values.get("cursor up → frame", [])
            if floor:
                print(
                    f"  floor, {what}: key → frame {1000 * statistics.median(floor):.0f} /"
                    f" {1000 * pct(floor, 0.95):.0f} ms ({len(floor)}), a program that only redraws"
                    f" {'a line' if what == 'line' else 'the whole screen'} per key"
                )


if __name__ == "__main__":
    sys.exit(main())
