"""One search syntax for every search box (the tree search, the session picker).

    flaky date          words: each must appear somewhere, in any order, ignoring case
    "date parsing"      a phrase: must appear as written, spaces and punctuation included
    re:fl[a-z]+y        a Python regular expression (ignoring case unless it says `(?-i:…)`)
    re:"a b+"           a regular expression that contains spaces
    cwd:weather         a term limited to one field, for the field names a caller declares

Matching is case-insensitive throughout. An unfinished quote runs to the end of the text and an
empty `re:` or `cwd:` is ignored, so the query reads sensibly at every keystroke while it is
typed. A literal word that starts with `re:` is written as a phrase: `"re:foo"`.

Nothing here knows about sessions or Textual: callers decide what text a query is run on.
"""

from __future__ import annotations

import re
from collections.abc import Collection, Iterator
from dataclasses import dataclass
from typing import Literal

__all__ = ["Query", "QueryError", "Term", "compile_query"]

Span = tuple[int, int]
TermKind = Literal["word", "phrase", "regex"]

_FLAGS = re.IGNORECASE


class QueryError(ValueError):
    """A query that cannot be compiled; `str()` is one line, fit to show under a search box."""


@dataclass(frozen=True, slots=True)
class Term:
    """One condition of a query: `text` as typed (without quotes or `re:`), compiled."""

    kind: TermKind
    text: str
    pattern: re.Pattern[str]
    field: str | None = None

    def search(self, text: str) -> Span | None:
        """Where this term first occurs in `text`, or None."""
        found = self.pattern.search(text)
        return found.span() if found else None

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
        return all(term.pattern.search(text) for term in self.terms)

    def find(self, text: str) -> Span | None:
        """The earliest occurrence in `text` of any free term (for highlighting), or None. Each
        term is looked for separately, so this finds a span even where `matches` is False."""
        best: Span | None = None
        for term in self.terms:
            span = term.search(text)
            if span is not None and (best is None or span < best):
                best = span
        return best

    def spans(self, text: str, limit: int = 100) -> list[Span]:
        """Occurrences of every free term in `text`, sorted, overlaps merged, at most `limit`."""
        found: list[Span] = []
        for term in self.terms:
            for n, hit in enumerate(term.pattern.finditer(text)):
                if n >= limit:
                    break
                if hit.end() > hit.start():  # a zero-width match has nothing to highlight
                    found.append(hit.span())
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
        return all(t.pattern.search(value) for t in self.field_terms if t.field == field)

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


def _compile(kind: TermKind, body: str) -> re.Pattern[str]:
    if kind != "regex":
        return re.compile(re.escape(body), _FLAGS)
    try:
        return re.compile(body, _FLAGS)
    except re.error as exc:
        where = f" at position {exc.pos}" if exc.pos is not None else ""
        raise QueryError(f"invalid regular expression {body!r}: {exc.msg}{where}") from None
    except (OverflowError, RecursionError, ValueError) as exc:  # huge repeat counts, deep nesting
        raise QueryError(f"invalid regular expression {body!r}: {exc}") from None


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
