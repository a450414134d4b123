"""Finding, describing and searching the session files of a directory (the picker's data).

Everything here only reads: files are opened read-only, so a picker pointed at a live agent's
sessions never takes a writer lock or changes a byte. A `Catalog` caches what it read per file,
keyed by size and modification time, so a second search, a re-sort or reopening the picker
re-reads only the files that changed since.
"""

from __future__ import annotations

import os
import stat
import threading
from collections import OrderedDict, deque
from collections.abc import Callable, Iterable, Iterator
from dataclasses import dataclass, field, replace
from pathlib import Path

import msgspec

from .display import counted
from .model.errors import SessionError
from .model.ids import iso_to_ms
from .model.messages import assistant_text, content_text
from .opening import open_session
from .query import Query, Term
from .session import Session
from .storage.index import ASSISTANT, USER, TreeIndex
from .storage.scan import full_decode

PATH_WALK = 100_000  # entries walked up from the leaf for its last user message

__all__ = [
    "Catalog",
    "Hit",
    "MessageText",
    "SessionListing",
    "describe",
    "find_session_files",
    "last_active",
    "listing_match",
    "read_messages",
    "text_match",
]

# (role, text) of one user or assistant message: what full-text search looks through. Tool
# results are left out: they are mostly file contents and command output, which would drown
# what was said in matches nobody is looking for.
MessageText = tuple[str, str]


@dataclass(slots=True)
class SessionListing:
    """One session file as the picker shows it. `described` is False until the file was read;
    until then only the path, size and modification time are known."""

    path: Path
    modified: float  # the file's modification time, seconds since the epoch
    size: int = 0
    active: float = 0.0  # `last_active`: what the list is sorted by, as Pi's is; 0 until looked at
    mtime_ns: int = 0  # with `size`, what tells an unchanged file from a changed one
    session_id: str = ""
    cwd: str = ""
    name: str | None = None
    first_message: str = ""
    last_message: str = ""  # the active path's last user message: where the session was left
    entry_count: int = 0
    leaf_id: str | None = None  # of a v1/v2 file: made up at each read (see `version`)
    version: int = 3  # the file's format; v1/v2 entries get ids only when read or upgraded
    leaf_count: int = 0  # entries without children: one per branch tip
    fork_count: int = 0  # entries with more than one child
    error: str | None = None
    problem: str | None = None  # of a damaged session: its first problem, which the preview says
    described: bool = False

    @property
    def title(self) -> str:
        return self.name or self.first_message or self.path.name


@dataclass(frozen=True, slots=True)
class Hit:
    """Where a query matched a session: the field or message role, its text, and the span of
    the first term found there (for highlighting)."""

    where: str
    text: str
    span: tuple[int, int]


# Characters of the first message a listing keeps: the picker shows one line of it, and its
# search looked through all of a 30 MB message on every key, in every session (QA: a third of
# a second per key among 500 sessions); the whole text is still searched with the messages'.
FIRST_WORDS = 2000


def find_session_files(directory: str | os.PathLike[str]) -> list[Path]:
    """`*.jsonl` files in `directory` and its direct sub-directories (Pi's layout), the most
    recently active first (`last_active`)."""
    return [listing.path for listing in _scan(Path(directory), last_active)[0]]


def _scan(
    root: Path, active: Callable[[Path, os.stat_result], float]
) -> tuple[list[SessionListing], list[Path]]:
    """The session files (most recently active first, as told by `active`) and the
    sub-directories that could not be read: glob passed over those without a word, and their
    sessions were simply missing (QA)."""
    found: list[SessionListing] = []
    unreadable: list[Path] = []
    for directory in (root, *_subdirectories(root)):
        try:
            with os.scandir(directory) as entries:
                names = [e.name for e in entries if e.name.endswith(".jsonl") and e.name[0] != "."]
        except OSError:
            unreadable.append(directory)
            continue
        for name in names:
            path = directory / name
            try:
                st = path.stat()
            except OSError:  # removed between the listing and the stat
                continue
            if stat.S_ISREG(st.st_mode):
                listing = _bare(path, st)
                listing.active = active(path, st)
                found.append(listing)
    found.sort(key=lambda listing: listing.active, reverse=True)
    return found, unreadable


def _subdirectories(root: Path) -> list[Path]:
    try:
        with os.scandir(root) as entries:
            # hidden ones left out and links followed, as glob did
            return [root / e.name for e in entries if e.name[0] != "." and e.is_dir()]
    except OSError:
        return []


def _bare(path: Path, st: os.stat_result) -> SessionListing:
    return SessionListing(path=path, modified=st.st_mtime, size=st.st_size, mtime_ns=st.st_mtime_ns)


# The first read from a file's end; each further one is four times the last, up to the most.
TAIL_READ = 65_536
TAIL_READ_MOST = 4 << 20
HEADER_TRIES = 8  # lines that are not JSON passed over at a file's start, as Pi's list does


def last_active(path: Path, st: os.stat_result) -> float:
    """When the session was last active, as Pi's session list orders sessions
    (`getLastActivityTime` in Pi's core/session-manager.js): the time of its last user or
    assistant message (the message's own `timestamp`, else its entry's), else its header's
    timestamp, else the file's modification time. Moving the leaf, a label or a name append
    entries and change that time, not this one, so looking at an old session does not bring it
    to the top. Read from the end of the file, usually one read: Pi takes the greatest time of
    all messages, which is the last one's since lines are appended in time order (they differ
    only for a clock set back)."""
    try:
        fd = os.open(path, os.O_RDONLY)
    except OSError:
        return st.st_mtime
    first: deque[bytes] = deque(maxlen=HEADER_TRIES)  # the file's first lines, once reached
    try:
        for line in _lines_from_end(fd, st.st_size):
            when, kind = _activity(line)
            if kind == "message" and when is not None:
                return when
            first.append(line)
    except OSError:
        return st.st_mtime
    finally:
        os.close(fd)
    for line in reversed(first):  # Pi's header is the first line that is JSON, if a session's
        when, kind = _activity(line, decode=True)
        if kind:
            return st.st_mtime if kind != "session" or when is None else when
    return st.st_mtime


# The latest moment a date can show (9999-12-31): a time past it (microseconds written as
# milliseconds, `1e999`) stopped the picker with a traceback (QA). It counts as no time.
LATEST = 253_402_300_799


def _activity(line: bytes, *, decode: bool = False) -> tuple[float | None, str]:
    """(time in seconds or None, the entry's type) of one line; the type is "" for a line that
    is not JSON (Pi's list passes over it), "other" for one not looked into (`decode`: each is)."""
    if not decode:  # most lines are told apart without decoding them
        if b'"message"' not in line and b'"session"' not in line:
            return None, "other"
        if b'"user"' not in line and b'"assistant"' not in line:  # a tool's output: megabytes
            return None, "other"
    try:
        data = full_decode(line.removeprefix(b"\xef\xbb\xbf"))  # a BOM, on the first line
    except (msgspec.DecodeError, RecursionError, ValueError):
        return None, ""
    if not isinstance(data, dict):
        return None, ""
    etype = data.get("type")
    kind = etype if isinstance(etype, str) else "other"
    if etype == "message":
        message = data.get("message")
        if not isinstance(message, dict) or "content" not in message:
            return None, kind
        if message.get("role") not in ("user", "assistant"):
            return None, kind
        stamp = message.get("timestamp")
        if isinstance(stamp, int | float) and not isinstance(stamp, bool):
            return _seconds(stamp), kind
    elif etype != "session":
        return None, kind
    stamp = data.get("timestamp")
    return (_seconds(iso_to_ms(stamp)) if isinstance(stamp, str) else None), kind


def _seconds(ms: float) -> float | None:
    """Milliseconds since the epoch as seconds; None for no time or one past any date."""
    return ms / 1000 if 0 < ms / 1000 <= LATEST else None


def _lines_from_end(fd: int, size: int) -> Iterator[bytes]:
    """The file's non-blank lines, last first, read backwards in growing chunks; a line longer
    than a chunk is put together once (not re-joined at every chunk)."""
    end, step = size, TAIL_READ
    pieces: list[bytes] = []  # the line being read, its last piece first
    while end > 0:
        start = max(0, end - step)
        chunk = os.pread(fd, end - start, start)
        if len(chunk) != end - start:  # the file shrank while read: what is left is unsure
            return
        end, step = start, min(step * 4, TAIL_READ_MOST)
        hi = len(chunk)
        cut = chunk.rfind(b"\n", 0, hi)
        while cut >= 0:
            line = chunk[cut + 1 : hi]
            if pieces:
                pieces.append(line)
                line = b"".join(reversed(pieces))
                pieces = []
            if line.strip():
                yield line
            hi = cut
            cut = chunk.rfind(b"\n", 0, hi)
        pieces.append(chunk[:hi])
    line = b"".join(reversed(pieces))
    if line.strip():
        yield line


def describe(path: Path) -> SessionListing:
    """Header, name, first and last user message, counts and leaf of one file; damage becomes
    `error`."""
    return _read(path, with_text=False)[0]


def read_messages(path: Path) -> list[MessageText]:
    """The text of every user and assistant message of one file, in file order."""
    return _read(path, with_text=True)[1] or []


def _read(path: Path, *, with_text: bool) -> tuple[SessionListing, list[MessageText] | None]:
    try:
        st = path.stat()  # before reading: a change during the read leaves the cache key stale,
        listing = _bare(path, st)  # so the next look reads again
        listing.described = True
        listing.active = last_active(path, st)
    except OSError as exc:
        return SessionListing(path=path, modified=0.0, error=exc.strerror or str(exc), described=True), None
    texts: list[MessageText] | None = [] if with_text else None
    try:
        with open_session(path, read_only=True) as session:
            listing.session_id = session.session_id
            listing.cwd = session.header.cwd
            listing.name = session.session_name
            listing.entry_count = session.entry_count()
            listing.version = session.format_version
            tree = session.tree
            listing.leaf_id = tree.leaf_id()
            # Counted as `Session.stats` counts them, from the index alone (no entry decoded).
            listing.leaf_count, listing.fork_count = tree.branch_counts()
            listing.first_message = first_words(session)
            last = _last_user_on_path(tree)
            listing.last_message = _text(session, last, USER) if last >= 0 else ""
            if texts is not None:
                for i, role in enumerate(tree.role):
                    if role in (USER, ASSISTANT):
                        text = _text(session, i, role)
                        if text:
                            texts.append(("user" if role == USER else "assistant", text))
            problems = [d for d in session.diagnostics if d.severity == "error"]
            if problems:
                listing.error = counted(len(problems), "problem")
                more = f" (and {len(problems) - 1:,} more)" if len(problems) > 1 else ""
                listing.problem = f"{problems[0].said()}{more}"
    except SessionError as exc:
        listing.error = exc.detail
        if exc.code == "storage":
            _read_again(listing)
    except OSError as exc:
        listing.error = exc.strerror or str(exc)
        _read_again(listing)
    return listing, texts


def _read_again(listing: SessionListing) -> None:
    """A read the system refused (permissions, I/O) is tried again at the next look: a chmod that
    lets it through leaves the file's size and mtime, the cache's key, as they were."""
    listing.mtime_ns = -1


# User messages looked through for the first with text (one decode each).
FIRST_TRIES = 20


def first_words(session: Session) -> str:
    """The text of the session's first user message with text ("" if none): what the picker
    lists an unnamed session by, and the browser's header names it by. One of images only is
    passed over, as Pi's session list passes it over (it was listed as "[image]"; helper)."""
    role = session.tree.role
    at = role.find(USER)
    first = ""
    for _ in range(FIRST_TRIES):
        if at < 0:
            break
        text = _text(session, at, USER)
        words = _text(session, at, USER, images=False)
        if words.strip():
            return words[:FIRST_WORDS]
        first = first or text
        at = role.find(USER, at + 1)
    return first[:FIRST_WORDS]


def _last_user_on_path(tree: TreeIndex) -> int:
    """The last user message on the leaf's path (-1: none): with the leaf moved back, the last
    one in the file is on a branch left behind (QA). Past `PATH_WALK` entries without one (a
    long run of tool calls), the last in the file."""
    i, parent, role = tree.leaf, tree.parent, tree.role
    for _ in range(PATH_WALK):
        if i < 0 or role[i] == USER:
            return i
        i = parent[i]
    return role.rfind(USER)


def _text(session: Session, i: int, role: int, *, images: bool = True) -> str:
    """The text of the message at position `i` (`images`: an image as "[image]"); "" when its
    line cannot be decoded (the damage is already counted among the session's diagnostics)."""
    try:
        entry = session.entry_at(i)
    except SessionError:
        return ""
    message = entry.get("message")
    if not isinstance(message, dict):
        return ""
    if role != USER:
        return assistant_text(message)
    return content_text(message.get("content"), image_placeholder="[image]" if images else "")


# --- matching ---------------------------------------------------------------------------------


def quick_fields(listing: SessionListing) -> list[tuple[str, str]]:
    """The fields searched without reading message text, in the order hits are reported."""
    return [
        ("name", listing.name or ""),
        ("first message", listing.first_message),
        ("cwd", listing.cwd),
        ("id", listing.session_id),
        ("file", listing.path.name),
    ]


def listing_match(query: Query, listing: SessionListing) -> tuple[tuple[Term, ...], Hit | None] | None:
    """Match `query` against what a listing already holds. None: the session cannot match (a
    `cwd:` term fails). Otherwise (terms still missing, first hit): when no term is missing
    the session matches; the missing ones must be looked for in its message text."""
    if not query.matches_field("cwd", listing.cwd):
        return None
    missing: list[Term] = []
    hit: Hit | None = None
    fields = quick_fields(listing)
    for term in query.terms:
        for where, text in fields:
            span = term.search(text)
            if span is not None:
                if hit is None:
                    hit = Hit(where, text, span)
                break
        else:
            missing.append(term)
    return tuple(missing), hit


def text_match(terms: Iterable[Term], texts: Iterable[MessageText]) -> Hit | None:
    """Every term occurs in some message (not necessarily the same one): the first message
    where one was found, else None."""
    missing = list(terms)
    hit: Hit | None = None
    if not missing:
        return None
    for role, text in texts:
        still: list[Term] = []
        for term in missing:
            span = term.search(text)
            if span is None:
                still.append(term)
            elif hit is None:
                hit = Hit(role, text, span)
        missing = still
        if not missing:
            return hit
    return None


# --- the cache --------------------------------------------------------------------------------


@dataclass
class Catalog:
    """Listings and message text of the session files of one directory, cached per file by
    (size, mtime). Safe to use from worker threads."""

    directory: Path
    text_budget: int = 64_000_000  # characters of message text kept between searches
    _listings: dict[Path, tuple[tuple[int, int], SessionListing]] = field(default_factory=dict)
    _texts: OrderedDict[Path, tuple[tuple[int, int], list[MessageText]]] = field(default_factory=OrderedDict)
    _text_chars: int = 0
    _active: dict[Path, tuple[tuple[int, int], float]] = field(default_factory=dict)
    _lock: threading.Lock = field(default_factory=threading.Lock)
    unreadable: list[Path] = field(default_factory=list)  # directories the last scan could not read

    def scan(self) -> list[SessionListing]:
        """The session files there now, the most recently active first; a file unchanged since
        it was last described comes back described."""
        found = _scan(self.directory, self._last_active) if self.directory.is_dir() else ([], [])
        listings, self.unreadable = found
        with self._lock:
            out = []
            for listing in listings:
                cached = self._listings.get(listing.path)
                if cached is not None and cached[0] == listing_key(listing):
                    out.append(replace(cached[1]))
                else:
                    out.append(listing)
            return out

    def _last_active(self, path: Path, st: os.stat_result) -> float:
        """`last_active`, read again only for a file changed since (the list looks at the
        directory every few seconds)."""
        key = (st.st_size, st.st_mtime_ns)
        with self._lock:
            known = self._active.get(path)
        if known is not None and known[0] == key:
            return known[1]
        when = last_active(path, st)
        with self._lock:
            self._active[path] = (key, when)
        return when

    def cached(self, path: Path) -> SessionListing | None:
        """The described listing of `path` if it was described and has not changed since."""
        key = _stat_key(path)
        with self._lock:
            cached = self._listings.get(path)
        return replace(cached[1]) if cached is not None and cached[0] == key else None

    def describe(self, path: Path) -> SessionListing:
        found = self.cached(path)
        if found is not None:
            return found
        listing = describe(path)
        self._keep_listing(listing)
        return replace(listing)

    def messages(self, path: Path) -> tuple[SessionListing, list[MessageText]]:
        """The (described) listing and message text of `path`, from the cache when unchanged."""
        key = _stat_key(path)
        with self._lock:
            text = self._texts.get(path)
            listing = self._listings.get(path)
            if text is not None and text[0] == key and listing is not None and listing[0] == key:
                self._texts.move_to_end(path)
                return replace(listing[1]), text[1]
        read, texts = _read(path, with_text=True)
        texts = texts or []
        self._keep_listing(read)
        size = sum(len(t) for _, t in texts)
        with self._lock:
            old = self._texts.pop(path, None)
            if old is not None:
                self._text_chars -= sum(len(t) for _, t in old[1])
            if size <= self.text_budget:
                self._texts[path] = (listing_key(read), texts)
                self._text_chars += size
            while self._text_chars > self.text_budget and self._texts:
                _, (_, dropped) = self._texts.popitem(last=False)
                self._text_chars -= sum(len(t) for _, t in dropped)
        return replace(read), texts

    def _keep_listing(self, listing: SessionListing) -> None:
        with self._lock:
            self._listings[listing.path] = (listing_key(listing), listing)


def listing_key(listing: SessionListing) -> tuple[int, int]:
    """(size, mtime_ns): a file unchanged since it was listed has the same."""
    return (listing.size, listing.mtime_ns)


def _stat_key(path: Path) -> tuple[int, int]:
    try:
        st = path.stat()
    except OSError:
        return (-1, -1)
    return (st.st_size, st.st_mtime_ns)
