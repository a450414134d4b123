"""A tree row's text fitted to its room: the fast path for printable ASCII agrees with Rich's
measure, and a cut text ends in `…` right after its last whole character."""

from __future__ import annotations

from hypothesis import given
from hypothesis import strategies as st
from rich.cells import cell_len, set_cell_size

from sessiontree.tui.cells import head, shortened
from sessiontree.tui.tree_view import fit


def expect_fitted(fitted: str, text: str, room: int) -> None:
    """A text that fits is padded to its room; a longer one is cut after its last character
    that fits before a `…`, and padded only where the next one is wide (Rich measures all)."""
    if cell_len(text) <= room:
        assert fitted == set_cell_size(text, room)
        return
    if room == 0:
        assert fitted == ""
        return
    body = fitted.rstrip(" ")
    assert body.endswith("…"), fitted
    kept = body[:-1]
    assert text.startswith(kept)
    pad = len(fitted) - len(body)
    assert cell_len(kept) + 1 + pad == room
    after = text[len(kept) :]
    if pad:  # room for no more than half of the next character
        assert pad == 1 and cell_len(after[:1]) == 2, (fitted, text)


texts = st.one_of(
    st.text(st.characters(min_codepoint=32, max_codepoint=126), max_size=320),  # the fast path
    st.text(max_size=60),  # anything: wide, zero-width and control characters
    st.builds(
        lambda a, b: a + b,
        st.text(st.characters(min_codepoint=32, max_codepoint=126), max_size=120),
        st.sampled_from(["…", "→ exit 0", "界界", "é", "\t", "\x1b", "\u200d", ""]),
    ),
)


@given(text=texts, room=st.integers(0, 130))
def test_fit_agrees_with_rich(text, room):
    fitted, exact = fit(text, room)
    expect_fitted(fitted, text, room)
    if exact:  # said to be exact (Rich counts a lone joiner as no cell at all: not counted)
        assert cell_len(fitted) == len(fitted) == room


def test_a_long_ascii_text_is_cut_with_an_ellipsis():
    assert fit("x" * 300 + "…", 10) == ("x" * 9 + "…", True)
    assert fit("short", 8) == ("short   ", True)
    assert fit("exactly10!", 10) == ("exactly10!", True)
    assert fit("anything", 0) == ("", True)
    assert fit("界界界", 4) == ("界… ", False)  # not "界 …": the cut is right before the `…`


def test_a_cut_never_leaves_half_a_wide_character():
    assert head("my label ✓ 日本語", 12) == "my label ✓ "  # Rich's cut pads: "my label ✓  "
    assert head("日本語", 3) == "日"
    assert head("日本語", 4) == "日本"
    assert head("abc", 0) == ""
    assert shortened("my label ✓ 日本語", 14) == "my label ✓ 日…"
    assert shortened("my label ✓ 日本語", 13) == "my label ✓ …"  # 12 cells: 日 takes two
    assert shortened("日本語", 6) == "日本語"
    assert shortened("日本語", 0) == ""
