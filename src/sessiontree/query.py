r"""One search syntax for every search box (the tree search, the session picker).

    flaky date          words: each must appear somewhere, in any order, ignoring case
    "date parsing"      a phrase: must appear as written, punctuation included (a space
                        matches any run of whitespace: a tab, a line break)
    re:fl[a-z]+y        a Python regular expression (ignoring case unless it says `(?-i:…)`;
                        `^` and `$` match at the start and end of each line)
    re:"a b+"           a regular expression that contains spaces
    cwd:weather         a term limited to one field, for the field names a caller declares

Matching is case-insensitive throughout, and an accented letter of a word or phrase matches it
composed (`é`) or decomposed (`e` and U+0301, as text from macOS often is). An unfinished quote
runs to the end of the text and an empty `re:` or `cwd:` is ignored, so the query reads sensibly
at every keystroke while it is typed. A literal word that starts with `re:` is written as a
phrase: `"re:foo"`.

Nothing here knows about sessions or Textual: callers decide what text a query is run on.

A regular expression runs under the `regex` module, not `re`: with `re`, an expression that
backtracks without end (`re:(\w+\s?)+!$` on a long message) held the interpreter lock for good,
so the app froze and not even SIGTERM stopped it. `regex` reads the same syntax, lets other
threads run while it matches and gives up after `REGEX_SECONDS` on one text, which stops the
search with `QueryTimeout`. Words and phrases are escaped literals, which cannot backtrack: `re`.
"""

from __future__ import annotations

import re
import unicodedata
from collections.abc import Collection, Iterator
from dataclasses import dataclass
from typing import Any, Literal

__all__ = ["Query", "QueryError", "QueryTimeout", "Term", "compile_query"]

Span = tuple[int, int]
TermKind = Literal["word", "phrase", "regex"]

_FLAGS = re.IGNORECASE
REGEX_SECONDS = 1.0  # a regular expression's time on one text before the search gives up


class QueryError(ValueError):
    """A query that cannot be compiled; `str()` is one line, fit to show under a search box."""


class QueryTimeout(QueryError):
    """A regular expression that ran past `REGEX_SECONDS` on one text: the search stops."""


@dataclass(frozen=True, slots=True)
class Term:
    """One condition of a query: `text` as typed (without quotes or `re:`), compiled."""

    kind: TermKind
    text: str
    pattern: Any  # `re.Pattern[str]`, or `regex.Pattern[str]` for a regular expression
    field: str | None = None

    def search(self, text: str) -> Span | None:
        """Where this term first occurs in `text`, or None. Raises `QueryTimeout`."""
        found = self.first(text)
        return found.span() if found else None

    def first(self, text: str) -> Any:
        """The first match in `text` (a match object), or None. Raises `QueryTimeout`."""
        if self.kind != "regex":
            return self.pattern.search(text)
        try:
            return self.pattern.search(text, concurrent=True, timeout=REGEX_SECONDS)
        except TimeoutError:
            raise self._too_slow() from None

    def every(self, text: str, limit: int, timeout: float = REGEX_SECONDS) -> list[Span]:
        """The spans of its first `limit` matches in `text`. Raises `QueryTimeout`."""
        found: list[Span] = []
        hits = (
            self.pattern.finditer(text)
            if self.kind != "regex"
            else self.pattern.finditer(text, concurrent=True, timeout=timeout)
        )
        try:
            for hit in hits:
                if len(found) >= limit:
                    break
                found.append(hit.span())
        except TimeoutError:
            raise self._too_slow() from None
        return found

    def _too_slow(self) -> QueryTimeout:
        return QueryTimeout(
            f"re:{self.text} gave up after {REGEX_SECONDS:g} s on one text (too much backtracking)"
        )

    def __str__(self) -> str:
        body = {"word": self.text, "phrase": f'"{self.text}"', "regex": f"re:{self.text}"}[self.kind]
        return f"{self.field}:{body}" if self.field else body


@dataclass(frozen=True, slots=True)
class Query:
    """A compiled query. `terms` are the free terms (all must match); `field_terms` the ones
    written `field:value`, which a caller tests against that field with `matches_field`."""

    source: str
    terms: tuple[Term, ...] = ()
    field_terms: tuple[Term, ...] = ()

    @property
    def is_empty(self) -> bool:
        return not self.terms and not self.field_terms

    def matches(self, text: str) -> bool:
        """Every free term occurs in `text` (an empty query matches everything)."""
        return all(term.first(text) for term in self.terms)

    def find(self, text: str) -> Span | None:
        """The earliest occurrence in `text` of any free term (for highlighting), or None. Each
        term is looked for separately, so this finds a span even where `matches` is False."""
        best: Span | None = None
        for term in self.terms:
            span = term.search(text)
            if span is not None and (best is None or span < best):
                best = span
        return best

    def spans(self, text: str, limit: int = 100, timeout: float = REGEX_SECONDS) -> list[Span]:
        """Occurrences of every free term in `text`, sorted, overlaps merged, at most `limit`
        (none of a regular expression that runs past `timeout` seconds: this never raises)."""
        found: list[Span] = []
        for term in self.terms:
            try:
                spans = term.every(text, limit, timeout)
            except QueryTimeout:
                continue  # highlights are a courtesy: the search itself says it gave up
            # a zero-width match has nothing to highlight
            found += [(start, end) for start, end in spans if end > start]
        merged: list[Span] = []
        for start, end in sorted(found):
            if merged and start <= merged[-1][1]:
                merged[-1] = (merged[-1][0], max(end, merged[-1][1]))
            else:
                merged.append((start, end))
        return merged[:limit]

    def for_field(self, field: str) -> tuple[Term, ...]:
        return tuple(t for t in self.field_terms if t.field == field)

    def matches_field(self, field: str, value: str) -> bool:
        """Every `field:` term for this field occurs in `value`."""
        return all(t.first(value) for t in self.field_terms if t.field == field)

    def __str__(self) -> str:
        return " ".join(str(t) for t in (*self.terms, *self.field_terms))


def compile_query(text: str, *, fields: Collection[str] = ()) -> Query:
    """Parse and compile `text` (see the module docstring). `fields` names the `field:` prefixes
    the caller understands; any other `name:value` is an ordinary word. Raises `QueryError` for
    an invalid regular expression."""
    free: list[Term] = []
    scoped: list[Term] = []
    for field, kind, body in _tokens(text, frozenset(f.lower() for f in fields)):
        if not body:
            continue  # `""`, `re:` or `cwd:` still being typed
        term = Term(kind, body, _compile(kind, body), field)
        (scoped if field else free).append(term)
    return Query(text, tuple(free), tuple(scoped))


# Counted repeats (`a{1000}`) are compiled into the pattern, about 280 bytes each with case
# folding: `re:a{1000000000}` took the app's memory by gigabytes, on the UI thread, before any
# time limit applies. Their product over the expression is capped instead.
REPEATS_MOST = 100_000
_COUNTED = re.compile(r"(?<!\\)\{(\d+)(?:,(\d*))?\}")


def _compile(kind: TermKind, body: str) -> Any:
    if kind != "regex":
        return re.compile(_literal(body), _FLAGS)
    repeats = 1
    for low, high in _COUNTED.findall(body):
        repeats *= max(int(low), int(high or 0), 1)
        if repeats > REPEATS_MOST:
            raise QueryError(
                f"invalid regular expression {body!r}: its counted repeats come to more than {REPEATS_MOST:,}"
            )
    import regex  # on the first regular expression: its import takes ~12 ms

    try:
        # V0: the syntax and behaviour of `re`, which the help and the picker describe;
        # MULTILINE: `^` and `$` at each line's ends, as grep reads them (an entry's text is
        # followed by its label and id on lines of their own: `why\?$` found nothing)
        return regex.compile(body, regex.IGNORECASE | regex.MULTILINE | regex.V0)
    except regex.error as exc:  # its message ends "at position N"
        raise QueryError(f"invalid regular expression {body!r}: {exc}") from None
    except (OverflowError, RecursionError, ValueError) as exc:  # huge repeat counts, deep nesting
        raise QueryError(f"invalid regular expression {body!r}: {exc}") from None


def _literal(body: str) -> str:
    """A word or phrase as a pattern that finds it however the text spells it: its whitespace
    as any run of whitespace (the tree shows a tab as a space, and `"tabs here"` found nothing),
    each accented letter composed or decomposed (`ééé` typed found no `e\u0301e\u0301e\u0301`).
    The pattern runs on the text as it is, so the spans it gives are the text's own."""
    parts: list[str] = []
    for ch in unicodedata.normalize("NFC", body):
        if ch.isspace():
            if not parts or parts[-1] != r"\s+":
                parts.append(r"\s+")
            continue
        decomposed = unicodedata.normalize("NFD", ch)
        parts.append(re.escape(ch) if decomposed == ch else f"(?:{re.escape(ch)}|{re.escape(decomposed)})")
    return "".join(parts)


def _tokens(text: str, fields: frozenset[str]) -> Iterator[tuple[str | None, TermKind, str]]:
    """(field or None, kind, body) for each term of `text`, left to right."""
    i, n = 0, len(text)
    while i < n:
        if text[i].isspace():
            i += 1
            continue
        field = None
        head = re.match(r"([A-Za-z_]+):", text[i:])
        if head and head.group(1).lower() in fields:
            field = head.group(1).lower()
            i += head.end()
            if i >= n or text[i].isspace():
                yield field, "word", ""  # `cwd:` with nothing after it yet
                continue
        kind: TermKind = "word"
        if text.startswith("re:", i):
            kind, i = "regex", i + 3
        if i < n and text[i] == '"':
            close = text.find('"', i + 1)
            end = n if close < 0 else close
            body = text[i + 1 : end]
            i = end + 1
            yield field, "phrase" if kind == "word" else kind, body
            continue
        end = i
        while end < n and not text[end].isspace():
            end += 1
        yield field, kind, text[i:end]
        i = end
