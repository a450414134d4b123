"""What the app remembers between runs (the theme chosen in the command palette), kept in
`$XDG_STATE_HOME/sessiontree/settings.json` (else `~/.local/state/...`): state the app writes
itself, apart from the keys the user writes in `~/.config/sessiontree/keys.toml`.

Only `sessiontree` run from the command line remembers (`launch`); an app built otherwise (the
tests, the screenshots) keeps the default theme whatever a user chose."""

from __future__ import annotations

import json
import os
import tempfile
from pathlib import Path
from typing import Any


def default_settings_path() -> Path:
    base = os.environ.get("XDG_STATE_HOME") or str(Path.home() / ".local" / "state")
    return Path(base) / "sessiontree" / "settings.json"


def load_settings(path: Path) -> tuple[dict[str, Any], str | None]:
    """(settings, a problem to report). A missing file is no settings; an unreadable one is
    reported and ignored, so the app always opens."""
    try:
        data = json.loads(path.read_text(encoding="utf-8"))
    except (FileNotFoundError, NotADirectoryError):  # nothing remembered yet
        return {}, None
    except (OSError, UnicodeDecodeError, ValueError) as exc:
        return {}, f"{path}: {exc}; using the default settings"
    if not isinstance(data, dict):
        return {}, f"{path}: not a JSON object; using the default settings"
    return data, None


def save_setting(path: Path, key: str, value: Any) -> None:
    """Set `key` in the settings file, keeping the other keys; written whole to a temporary
    file and renamed over the old one, so a crash leaves the old settings or the new, never
    half a file. Raises OSError."""
    data, _ = load_settings(path)
    data[key] = value
    path.parent.mkdir(parents=True, exist_ok=True)
    fd, temporary = tempfile.mkstemp(prefix=".settings-", suffix=".json", dir=path.parent)
    try:
        with os.fdopen(fd, "w", encoding="utf-8") as out:
            json.dump(data, out, indent=2, sort_keys=True)
            out.write("\n")
        os.replace(temporary, path)
    except BaseException:
        Path(temporary).unlink(missing_ok=True)
        raise
