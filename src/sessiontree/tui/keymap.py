"""Remappable keys: `~/.config/sessiontree/keys.toml` (or `$XDG_CONFIG_HOME/...`) maps binding
ids to keys, applied with Textual's keymap support (`App.set_keymap`). For example:

    [keys]
    move = "enter,w"          # Textual key names, comma-separated
    search = "ctrl+f"

`?` in the app shows the keys in effect, so a remapped key is documented where it is used.
"""

from __future__ import annotations

import os
import string
import tomllib
from collections.abc import Iterable
from pathlib import Path
from typing import TYPE_CHECKING

from textual.binding import Binding
from textual.keys import Keys, _character_to_key, format_key

if TYPE_CHECKING:
    from textual.app import App


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


def key_of(app: App[object], binding_id: str, default: str) -> str:
    """The key of a binding as the footer shows it: keys.toml's first for it, else `default`.
    For messages that name a key ("5 shows all"): they named the default after a remap (QA)."""
    keys = (app._keymap or {}).get(binding_id, "")
    return app.get_key_display(Binding(keys.split(",")[0].strip() or default, ""))


def checked_keymap(keymap: dict[str, str], bindings: Iterable[Binding]) -> tuple[dict[str, str], list[str]]:
    """`keymap` with its key names as Textual spells them, without the ids no binding has, the
    keys no keyboard sends and the keys another binding answers to, with a problem for each:
    `quit = "j"` left `q` dead and `j` still moving down (the tree's own key comes first),
    `label = "enter"` took Enter from Move, `help = "F1"` showed in the footer but never fired
    (Textual's names are lower case), and a misspelt id did nothing, all without a word."""
    bindings = list(bindings)
    by_id = {b.id: b for b in bindings if b.id}
    # The ids mix Textual's spelling and ours ("page_down", "next-match"): either is taken for
    # either, where it names one binding (a user had to guess which; QA).
    spelled: dict[str, str | None] = {}
    for binding_id in by_id:
        key = binding_id.replace("-", "_")
        spelled[key] = binding_id if key not in spelled else None
    keymap = {
        (name if name in by_id else spelled.get(name.replace("-", "_")) or name): keys
        for name, keys in keymap.items()
    }
    problems = [
        f"keys.{name}: no binding has this id; the ids: {', '.join(sorted(by_id))}"
        for name in keymap
        if name not in by_id
    ]
    wanted: dict[str, str] = {}
    for name, keys in keymap.items():
        if name not in by_id:
            continue
        named = [key_name(k) for k in keys.split(",")]
        unknown = [k for k, n in zip(keys.split(","), named, strict=True) if n is None]
        if unknown:
            problems.append(
                f'keys.{name} = "{keys}": no key is called "{unknown[0].strip()}" (key names look like'
                f' "f1", "ctrl+k", "pageup", "?"); {_stays(by_id[name])}'
            )
        else:
            wanted[name] = ",".join(n for n in named if n is not None)
    taken: dict[str, Binding] = {}
    for b in bindings:
        if b.id not in wanted:
            for key in b.key.split(","):
                taken.setdefault(key, b)
    kept: dict[str, str] = {}
    for name, keys in wanted.items():
        # Whichever of two bindings of one key Textual looks up first, the other goes dead.
        clash = next((taken[k] for k in keys.split(",") if k in taken), None)
        if clash is not None:
            problems.append(
                f'keys.{name} = "{keymap[name]}": {_what(clash)} has that key; {_stays(by_id[name])}'
            )
            continue
        kept[name] = keys
        for key in keys.split(","):
            taken[key] = by_id[name]
    return kept, problems


MODIFIERS = ("ctrl", "alt", "shift", "meta", "super", "hyper")
# Names of keys that are not characters, as Textual's key events name them.
NAMED_KEYS = frozenset(k.value.rpartition("+")[2] for k in Keys if not k.value.startswith("<")) | frozenset(
    _character_to_key(c) for c in string.printable if c.isprintable() and not c.isspace()
)

# The keys that type a character into an `Input` (space included), as Textual names them.
TYPING_KEYS = frozenset(_character_to_key(c) for c in string.printable if c.isprintable())


def key_name(key: str) -> str | None:
    """`key` as Textual names it (`F1` → `f1`, `Ctrl+K` → `ctrl+k`, `?` → `question_mark`), or
    None when no key is called that. A letter alone keeps its case: `B` is shift+b."""
    key = key.strip()
    if len(key) == 1:
        return _character_to_key(key)
    *mods, name = key.split("+")
    mods = [m.strip().lower() for m in mods]
    name = name.strip()
    name = name.lower() if len(name) > 1 else _character_to_key(name.lower() if mods else name)
    if not name or any(m not in MODIFIERS for m in mods) or name not in NAMED_KEYS:
        return None
    return "+".join([*mods, name])


# Textual's bindings without a description, named as help names what the key does.
_UNNAMED = {"help_quit": "Copy (Textual's Ctrl+C)"}


def _what(binding: Binding) -> str:
    """What a binding does, for a user: `help_quit` (Textual's Ctrl+C) meant nothing (QA)."""
    return binding.description or _UNNAMED.get(binding.action, binding.action.replace("_", " "))


def _stays(binding: Binding) -> str:
    default = binding.key.split(",")[0]
    return f"{binding.description or binding.id} stays on {format_key(default)}"
