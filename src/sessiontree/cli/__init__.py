"""Command line: the browser by default, plus scriptable subcommands.

    sessiontree                      open the bundled demo session in the browser
    sessiontree ADDRESS              browse a session (file.jsonl, db.sqlite[#id], postgresql://…#id)
    sessiontree DIR                  pick a session from a directory (default ~/.pi/agent/sessions)
    sessiontree COMMAND ...          see COMMANDS below; `sessiontree COMMAND --help`

One module per group of commands; each has `register(subparsers)`. Commands open sessions
through `sessiontree.opening` and work on `Session`; they never build a storage themselves.
Text output goes through `output.out`, which makes session text inert; `--json` stays exact.
"""

from __future__ import annotations

import argparse
import contextlib
import difflib
import os
import signal
import sys
from collections.abc import Sequence

from ..model.errors import SessionError
from . import browse, export, importing, inspect, serve, write
from .output import ClosedOutput, OutputError, err, flush_out

GROUPS = (inspect, write, export, importing, serve)
COMMANDS = tuple(name for group in GROUPS for name in group.COMMANDS)


def command_parser() -> tuple[argparse.ArgumentParser, dict[str, argparse.ArgumentParser]]:
    """The parser of the subcommands, and each subcommand's own (for its usage in errors)."""
    parser = argparse.ArgumentParser(prog="sessiontree", description="Tree-shaped LLM sessions.")
    sub = parser.add_subparsers(dest="command", required=True)
    for group in GROUPS:
        group.register(sub)
    return parser, sub.choices


def main(argv: Sequence[str] | None = None) -> int:
    _closed_standard_streams()
    try:
        status = _run(list(sys.argv[1:] if argv is None else argv))
        flush_out()  # a failed write surfaces here, not as Python's complaint at exit
        return status
    except SessionError as exc:
        err(f"sessiontree: {exc} [{exc.code}]")
        return 2
    except BrokenPipeError:
        # The reader went away (`| head`): the status a process killed by SIGPIPE has, as
        # `cat` would, so that a pipeline with `pipefail` does not take a cut-short `check`
        # for a clean one.
        _drop_stdout()
        return 128 + signal.SIGPIPE
    except KeyboardInterrupt:
        return 130
    except OutputError as exc:
        _drop_stdout()
        err(f"sessiontree: cannot write the output: {exc}")
        return 1


def _run(argv: list[str]) -> int:
    if argv and argv[0] in COMMANDS:
        parser, commands = command_parser()
        args, extra = parser.parse_known_args(argv)
        if extra:
            # A word after an option may be a positional argument the first pass had passed
            # (`move FILE --start ID` said "unrecognized arguments: ID"); the command's own
            # parser takes them intermixed, and says what is left with its own usage.
            args = commands[argv[0]].parse_intermixed_args(argv[1:])
        return int(args.func(args))
    typo = _misspelt_command(argv)
    if typo is not None:
        raise SessionError("invalid_argument", typo)
    args = browse.parser(COMMANDS).parse_args(argv)
    return browse.run(args)


def _closed_standard_streams() -> None:
    """A standard stream closed at the start (`>&-`): Python leaves its `sys` stream None (an
    AttributeError traceback at the first print) and its descriptor free, for the next file
    opened to take (a session's, into which a write meant for standard output would go). Each
    gets /dev/null on its descriptor; output then fails as a write to a closed descriptor does
    (`ClosedOutput`: status 1, said on stderr), and what stderr would say is lost, not the
    status."""
    for fd, flags in ((0, os.O_RDONLY), (1, os.O_WRONLY), (2, os.O_WRONLY)):
        try:
            os.fstat(fd)
        except OSError:
            null = os.open(os.devnull, flags)
            if null != fd:
                os.dup2(null, fd)
                os.close(null)
    if sys.stdout is None:
        sys.stdout = ClosedOutput()
    if sys.stderr is None:
        sys.stderr = open(os.devnull, "w")  # noqa: SIM115 - for the process's life


def _drop_stdout() -> None:
    """Send what is still buffered for stdout nowhere: flushing it at exit would fail again."""
    with contextlib.suppress(OSError, ValueError):
        devnull = os.open(os.devnull, os.O_WRONLY)
        os.dup2(devnull, sys.stdout.fileno())
        os.close(devnull)


def _misspelt_command(argv: list[str]) -> str | None:
    """What to say when the first word is no command and no file but close to a command: the
    browser took `sessiontree exprot FILE` as a file to open and said "unrecognized arguments:
    FILE" (QA)."""
    if not argv or argv[0].startswith("-") or "#" in argv[0] or os.path.exists(argv[0]):
        return None
    close = difflib.get_close_matches(argv[0], COMMANDS, n=1)
    if close:
        return f"no command {argv[0]!r}; did you mean {close[0]!r}? (sessiontree --help lists them)"
    if len(argv) > 1 and not argv[1].startswith("-"):
        # a word then another: a command and its argument, as no file is opened with a second
        # word (it said "unrecognized arguments: FILE", of the word that was right, QA)
        return f"no command {argv[0]!r} and no such file (sessiontree --help lists the commands)"
    return None


__all__ = ["COMMANDS", "main"]
