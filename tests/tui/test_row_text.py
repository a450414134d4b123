"""A tree row's text fitted to its room: the fast path for printable ASCII agrees with Rich."""

from __future__ import annotations

from hypothesis import given
from hypothesis import strategies as st
from rich.cells import cell_len, set_cell_size

from sessiontree.tui.tree_view import fit


def by_rich(text: str, room: int) -> str:
    """What rows were drawn with before: Rich measures and cuts every text."""
    if cell_len(text) > room:
        text = set_cell_size(text, max(room - 1, 0)) + "…"
    return set_cell_size(text, room)


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
    assert fitted == by_rich(text, room)
    if exact:  # said to be exact (Rich counts a lone joiner as no cell at all: not counted)
        assert cell_len(fitted) == len(fitted) == room


def test_a_long_ascii_text_is_cut_with_an_ellipsis():
    assert fit("x" * 300 + "…", 10) == ("x" * 9 + "…", True)
    assert fit("short", 8) == ("short   ", True)
    assert fit("exactly10!", 10) == ("exactly10!", True)
    assert fit("anything", 0) == ("", True)
    assert fit("界界界", 4) == ("界 …", False)
