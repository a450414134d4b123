"""The `sessiontree` command's entry point (`pyproject.toml`). Ctrl-C while the command line's
modules load, its first tenth of a second, ends as quietly as later (status 130), where the
import in the script pip writes would print a traceback."""

from __future__ import annotations


def run() -> int:
    try:
        from .cli import main
    except KeyboardInterrupt:
        return 130
    return main()
