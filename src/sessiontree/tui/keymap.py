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
from pathlib import Path


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
