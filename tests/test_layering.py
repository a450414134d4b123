"""The layering the README promises, read from the code's own imports.

`model` → `storage` → `session`/`context` (and the library modules beside them) → `tui`, `cli`
on top. Lower layers never import upper ones, and the two front ends reach sessions only through
`Session` and the opening API (`sessiontree.opening`), never through a storage module.
"""

from __future__ import annotations

import ast
from pathlib import Path

import pytest

SRC = Path(__file__).resolve().parents[1] / "src" / "sessiontree"

# Layer rank of each top-level part of the package: an import may only go to an equal or lower rank.
# `entry` is what the installed script calls.
RANKS = {"model": 0, "storage": 1, "tui": 3, "cli": 3, "__main__": 4, "entry": 4}
LIBRARY = 2  # session.py, context.py, opening.py, outline.py, display.py, ...
FRONT_ENDS = ("tui", "cli")


def _part(module: str) -> str:
    """`sessiontree.storage.jsonl` → `storage`; `sessiontree.session` → `session`."""
    pieces = module.split(".")
    return pieces[1] if len(pieces) > 1 else ""


def _rank(part: str) -> int:
    return RANKS.get(part, LIBRARY)


def _module_name(path: Path) -> str:
    relative = path.relative_to(SRC.parent).with_suffix("")
    parts = list(relative.parts)
    if parts[-1] == "__init__":
        parts.pop()
    return ".".join(parts)


def _imports(path: Path) -> list[tuple[int, str]]:
    """(line, absolute module) of every sessiontree import in `path`, relative ones resolved."""
    tree = ast.parse(path.read_text(), filename=str(path))
    package = _module_name(path) if path.name == "__init__.py" else _module_name(path).rsplit(".", 1)[0]
    found = []
    for node in ast.walk(tree):
        if isinstance(node, ast.Import):
            found += [(node.lineno, a.name) for a in node.names if a.name.startswith("sessiontree")]
        elif isinstance(node, ast.ImportFrom):
            if node.level:
                base = package.split(".")
                base = base[: len(base) - (node.level - 1)]
                module = ".".join(base + ([node.module] if node.module else []))
            else:
                module = node.module or ""
            if module.startswith("sessiontree"):
                names = [module + "." + a.name for a in node.names] if not node.module else [module]
                found += [(node.lineno, name) for name in names]
    return found


SOURCES = sorted(SRC.rglob("*.py"))


def test_the_package_is_found():
    assert len(SOURCES) > 20 and (SRC / "session.py").exists()


@pytest.mark.parametrize("path", SOURCES, ids=lambda p: str(p.relative_to(SRC)))
def test_no_upward_imports(path: Path):
    here = _part(_module_name(path))
    for line, target in _imports(path):
        there = _part(target)
        if there == here or not there:
            continue
        assert _rank(there) <= _rank(here), f"{path.name}:{line} imports {target}, a higher layer"


@pytest.mark.parametrize(
    "path",
    [p for p in SOURCES if _part(_module_name(p)) in FRONT_ENDS],
    ids=lambda p: str(p.relative_to(SRC)),
)
def test_front_ends_use_session_and_the_opening_api(path: Path):
    for line, target in _imports(path):
        assert _part(target) != "storage", (
            f"{path.relative_to(SRC)}:{line} imports {target}: go through Session or sessiontree.opening"
        )
