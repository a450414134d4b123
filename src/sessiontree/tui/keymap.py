"""Remappable keys: `~/.config/sessiontree/keys.toml` (or `$XDG_CONFIG_HOME/...`) maps binding
ids to keys, applied with Textual's keymap support (`App.set_keymap`). For example:

    [keys]
    move = "enter,l"          # Textual key names, comma-separated
    search = "ctrl+f"

`?` in the app shows the keys in effect, so a remapped key is documented where it is used.
"""

from __future__ import annotations

import os
import tomllib
from collections.abc import Iterable
from pathlib import Path

from textual.binding import Binding


def default_keymap_path() -> Path:
    base = os.environ.get("XDG_CONFIG_HOME") or str(Path.home() / ".config")
    return Path(base) / "sessiontree" / "keys.toml"


def load_keymap(path: Path | None = None) -> tuple[dict[str, str], list[str]]:
    """(binding id → keys, problems). A missing file is no keymap; a broken one is reported
    and ignored, so a typo in the config never stops the app from opening."""
    path = path or default_keymap_path()
    try:
        data = tomllib.loads(path.read_text(encoding="utf-8"))
    except FileNotFoundError:
        return {}, []
    except (OSError, UnicodeDecodeError, tomllib.TOMLDecodeError) as exc:
        return {}, [f"{path}: {exc}; using the default keys"]
    table = data.get("keys", {})
    if not isinstance(table, dict):
        return {}, [f'{path}: [keys] must be a table of binding id = "keys"']
    keymap: dict[str, str] = {}
    problems: list[str] = []
    for binding_id, keys in table.items():
        if isinstance(keys, str) and keys.strip():
            keymap[str(binding_id)] = keys.replace(" ", "")
        else:
            problems.append(f"{path}: keys.{binding_id} must be a non-empty string")
    return keymap, problems


def checked_keymap(keymap: dict[str, str], bindings: Iterable[Binding]) -> tuple[dict[str, str], list[str]]:
    """`keymap` without the ids no binding has and the keys another binding answers to, with
    a problem for each: `quit = "j"` left `q` dead and `j` still moving down (the tree's own
    key comes first), and a misspelt id did nothing, both without a word."""
    bindings = list(bindings)
    by_id = {b.id: b for b in bindings if b.id}
    problems = [
        f"keys.{name}: no binding has this id; the ids: {', '.join(sorted(by_id))}"
        for name in keymap
        if name not in by_id
    ]
    wanted = {name: keys for name, keys in keymap.items() if name in by_id}
    taken: dict[str, Binding] = {}
    for b in bindings:
        if b.id not in wanted:
            for key in b.key.split(","):
                taken.setdefault(key, b)
    kept: dict[str, str] = {}
    for name, keys in wanted.items():
        # A priority binding (`/`, `m`, …) is looked up before the focused widget's: it wins.
        mine = by_id[name].priority
        clash = next((taken[k] for k in keys.split(",") if k in taken and not mine), None)
        if clash is not None:
            default = by_id[name].key.split(",")[0]
            problems.append(
                f'keys.{name} = "{keys}": {clash.description or clash.action} has that key;'
                f" {by_id[name].description or name} stays on {default}"
            )
            continue
        kept[name] = keys
        for key in keys.split(","):
            taken[key] = by_id[name]
    return kept, problems
