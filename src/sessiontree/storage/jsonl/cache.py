"""An index cache: reopening a large session reads what the last open indexed instead of
scanning every line again, then scans only what was appended since.

The cache lives in the user's cache directory (`$XDG_CACHE_HOME/sessiontree/index/`, else
`~/.cache/sessiontree/index/`), one private file per session file, named by a hash of its
path, device and inode, written to a temporary file and renamed into place. It is trusted only
for the same file (device and inode), at least as long as the bytes it covers, whose
fingerprint still matches: a hash of the first and last 64 KB it covers and of 32 blocks of
4 KB spread between them. That catches a replaced, truncated, or rewritten file, but not every
same-size edit inside a line; those are caught where they matter, since reading an entry checks
its id and type against the index (`JsonlStorage._load`) and reports damage otherwise. The
cache file carries a checksum of its own; any doubt (another format, a bad checksum, another
file) means a full scan, which then rewrites it. `SESSIONTREE_NO_INDEX_CACHE=1` turns it off.

What is cached is the index of complete lines (`LineIndex`) as the scan left it, before the end
of loading adds what only the whole log can tell (parents that never appeared).

The directory is kept under `MAX_TOTAL` bytes: a cache is about 53 bytes per entry, and one is
made for every large file opened, including copies and files deleted since. After each write the
least recently used caches go first (a cache's modification time is set whenever it is used),
never the one just written.
"""

from __future__ import annotations

import contextlib
import hashlib
import os
from array import array
from pathlib import Path
from typing import Any

import orjson

from ...model.errors import Diagnostic
from ..atomic import private_temp, write_all
from .indexer import LineIndex

FORMAT = b"sessiontree-index 1\n"
MIN_BYTES = 8 << 20  # smaller files scan in well under a tenth of a second: no cache
EDGE = 64 << 10
SAMPLES, SAMPLE = 32, 4096
MAX_TOTAL = 1 << 30  # bytes of cache files kept: twenty sessions of a million entries
_INT_ARRAYS = ("parent", "first_child", "last_child", "next_sibling")
_BYTE_ARRAYS = ("kind", "role", "flags")


def enabled() -> bool:
    return os.environ.get("SESSIONTREE_NO_INDEX_CACHE", "") in ("", "0")


def cache_dir() -> Path:
    base = os.environ.get("XDG_CACHE_HOME") or os.path.join(os.path.expanduser("~"), ".cache")
    return Path(base) / "sessiontree" / "index"


def cache_path(path: str, st: os.stat_result) -> Path:
    key = f"{os.path.realpath(path)}\0{st.st_dev}\0{st.st_ino}".encode("utf-8", "surrogateescape")
    return cache_dir() / (hashlib.sha256(key).hexdigest()[:32] + ".idx")


def fingerprint(fd: int, end: int) -> str:
    """A hash of the bytes [0, end) at its edges and at evenly spread blocks (module docstring)."""
    digest = hashlib.sha256(str(end).encode())
    digest.update(os.pread(fd, min(EDGE, end), 0))
    for k in range(1, SAMPLES + 1):
        at = end * k // (SAMPLES + 1)
        digest.update(os.pread(fd, min(SAMPLE, end - at), at))  # never past `end`: appends may follow
    digest.update(os.pread(fd, min(EDGE, end), max(0, end - EDGE)))
    return digest.hexdigest()


def save(path: str, fd: int, lines: LineIndex, end: int, next_line: int, header_end: int) -> None:
    """Write the cache for the lines indexed up to byte `end`. Never raises: a cache that cannot
    be written is simply not there next time."""
    with contextlib.suppress(OSError, ValueError, TypeError):
        st = os.fstat(fd)
        target = cache_path(path, st)
        target.parent.mkdir(parents=True, exist_ok=True, mode=0o700)
        blobs, meta = _encode(lines)
        meta.update(
            dev=st.st_dev,
            ino=st.st_ino,
            end=end,
            next_line=next_line,
            header_end=header_end,
            fingerprint=fingerprint(fd, end),
            sizes=[len(b) for b in blobs],
        )
        head = orjson.dumps(meta)
        body = b"".join(blobs)
        check = hashlib.sha256(head + body).hexdigest().encode()
        out, tmp = private_temp(str(target), "idx")
        try:
            write_all(out, FORMAT + check + b"\n" + str(len(head)).encode() + b"\n" + head + body)
            os.replace(tmp, target)
        except BaseException:
            with contextlib.suppress(OSError):
                os.unlink(tmp)
            raise
        finally:
            os.close(out)
        prune(target)


def prune(keep: Path) -> None:
    """Remove the least recently used caches next to `keep` until they total at most
    `MAX_TOTAL` bytes; `keep` stays whatever its size. Other files are left alone."""
    found = []
    with os.scandir(keep.parent) as entries:
        for entry in entries:
            with contextlib.suppress(OSError):  # removed meanwhile by another process
                if entry.name.endswith(".idx") and entry.is_file(follow_symlinks=False):
                    st = entry.stat(follow_symlinks=False)
                    found.append((st.st_mtime_ns, st.st_size, entry.path))
    total = sum(size for _, size, _ in found)
    for _, size, path in sorted(found):
        if total <= MAX_TOTAL:
            break
        if path != str(keep):
            with contextlib.suppress(OSError):
                os.unlink(path)
            total -= size


def load(path: str, fd: int, header_end: int) -> tuple[LineIndex, int, int] | None:
    """(the cached index, the byte it covers up to, the next line number), or None if there is
    no cache for this file or any reason to doubt it."""
    try:
        st = os.fstat(fd)
        kept = cache_path(path, st)
        data = kept.read_bytes()
    except OSError:
        return None
    try:
        if not data.startswith(FORMAT):
            return None
        rest = data[len(FORMAT) :]
        check, rest = rest.split(b"\n", 1)
        size, rest = rest.split(b"\n", 1)
        if hashlib.sha256(rest).hexdigest().encode() != check:
            return None
        head, body = rest[: int(size)], rest[int(size) :]
        meta = orjson.loads(head)
        end = meta["end"]
        if (meta["dev"], meta["ino"]) != (st.st_dev, st.st_ino) or st.st_size < end:
            return None
        if meta["header_end"] != header_end or meta["fingerprint"] != fingerprint(fd, end):
            return None
        lines = _decode(meta, body)
        with contextlib.suppress(OSError):
            os.utime(kept)  # used now: the last to go when the directory is pruned
        return lines, end, meta["next_line"]
    except (ValueError, KeyError, TypeError, IndexError, OSError, orjson.JSONDecodeError):
        return None


def _encode(lines: LineIndex) -> tuple[list[bytes], dict[str, Any]]:
    index = lines.index
    blobs = [orjson.dumps(index.ids)]
    blobs += [getattr(index, name).tobytes() for name in _INT_ARRAYS]
    blobs += [bytes(getattr(index, name)) for name in _BYTE_ARRAYS]
    blobs.append(array("i", index.roots).tobytes())
    blobs += [lines.offsets.tobytes(), lines.lengths.tobytes(), array("q", lines.lines).tobytes()]
    meta: dict[str, Any] = {
        "leaf": index.leaf,
        "labels": index.labels,
        "session_name": index.session_name,
        "compactions": [[k, *v] for k, v in index.compactions.items()],
        "leaf_targets": list(index.leaf_targets.items()),
        "unknown_types": list(index.unknown_types.items()),
        "orphans": index.missing_parents,
        "relinks": index.relinks,
        "index_diagnostics": [_diag(d) for d in index.diagnostics],
        "line_diagnostics": [_diag(d) for d in lines.diagnostics],
    }
    return blobs, meta


def _decode(meta: dict[str, Any], body: bytes) -> LineIndex:
    sizes = meta["sizes"]
    parts, at = [], 0
    for size in sizes:
        parts.append(body[at : at + size])
        at += size
    if at != len(body) or len(parts) != 1 + len(_INT_ARRAYS) + len(_BYTE_ARRAYS) + 4:
        raise ValueError("cache parts do not add up")
    lines = LineIndex()
    index = lines.index
    ids = orjson.loads(parts[0])
    n = len(ids)
    index.ids = ids
    index.pos = dict(zip(ids, range(n), strict=True))  # a repeated id: the later entry wins
    k = 1
    for name in _INT_ARRAYS:
        values = array("i")
        values.frombytes(parts[k])
        setattr(index, name, values)
        k += 1
    for name in _BYTE_ARRAYS:
        setattr(index, name, bytearray(parts[k]))
        k += 1
    roots = array("i")
    roots.frombytes(parts[k])
    index._roots = dict.fromkeys(roots)
    lines.offsets.frombytes(parts[k + 1])
    lines.lengths.frombytes(parts[k + 2])
    numbers = array("q")
    numbers.frombytes(parts[k + 3])
    lines.lines.fromlist(numbers.tolist())
    columns = [index.parent, index.first_child, index.last_child, index.next_sibling, index.kind]
    if any(
        len(c) != n for c in [*columns, index.role, index.flags, lines.offsets, lines.lengths, lines.lines]
    ):
        raise ValueError("cache columns differ in length")
    index.leaf = meta["leaf"]
    index.labels = dict(meta["labels"])
    index.session_name = meta["session_name"]
    index.compactions = {k: (first_kept, has_tail) for k, first_kept, has_tail in meta["compactions"]}
    index.leaf_targets = {k: v for k, v in meta["leaf_targets"]}
    index.unknown_types = {k: v for k, v in meta["unknown_types"]}
    index._orphans = {k: list(v) for k, v in meta["orphans"].items()}
    index.relinks = meta["relinks"]
    index.diagnostics = [Diagnostic(*d) for d in meta["index_diagnostics"]]
    lines.diagnostics = [Diagnostic(*d) for d in meta["line_diagnostics"]]
    return lines


def _diag(d: Diagnostic) -> list[Any]:
    return [d.severity, d.code, d.message, d.line, d.entry_id]
