"""The search syntax shared by the tree search and the session picker."""

from __future__ import annotations

import threading
import time

import pytest

from sessiontree.query import Query, QueryError, QueryTimeout, compile_query


def kinds(query: Query) -> list[tuple[str, str]]:
    return [(t.kind, t.text) for t in query.terms]


def test_empty_and_blank_queries_match_everything():
    for text in ("", "   ", '""', "re:", "re:  "):
        q = compile_query(text)
        assert q.is_empty, text
        assert q.matches("anything") and q.matches("")
        assert q.find("anything") is None


def test_words_are_anded_in_any_order_ignoring_case():
    q = compile_query("Flaky  DATE")
    assert kinds(q) == [("word", "Flaky"), ("word", "DATE")]
    assert q.matches("fix the date parsing that is flaky")
    assert q.matches("FLAKY date")
    assert not q.matches("flaky tests")
    assert not q.matches("")


def test_words_match_inside_longer_words_and_punctuation_is_literal():
    q = compile_query("pars a.b (x")
    assert q.matches("parsing a.b (x)")
    assert not q.matches("parsing axb (x)")  # "." is not a regex wildcard in a word


def test_phrase_matches_literally_with_spaces():
    q = compile_query('"date parsing" weather')
    assert kinds(q) == [("phrase", "date parsing"), ("word", "weather")]
    assert q.matches("weather: Date Parsing is flaky")
    assert not q.matches("weather: parsing date")
    # a space matches any run of whitespace: the tree shows a tab, or two spaces, as one, and
    # `"tabs here"` found no `tabs\there` (QA)
    assert q.matches("weather: date  parsing") and q.matches("weather: date\tparsing")
    assert q.matches("weather: date\nparsing") and not q.matches("weather: dateparsing")


def test_an_accented_letter_matches_composed_or_decomposed():
    """`ééé` typed found nothing in text that spells each `é` as `e` and U+0301 (as macOS
    writes it), and the reverse; the spans are the text's own, for the highlight."""
    decomposed = "x e\u0301te\u0301 y"
    q = compile_query("été")
    assert q.matches(decomposed) and q.spans(decomposed) == [(2, 7)]
    assert compile_query("e\u0301te\u0301").matches("un été chaud")
    assert compile_query('"ÉTÉ chaud"').matches("un e\u0301te\u0301  chaud")  # case and spaces too
    assert not compile_query("été").matches("ete")


def test_phrase_keeps_regex_and_markup_characters_literal():
    q = compile_query('"[@click=app.quit]x[/]"')
    assert q.matches("say [@click=app.quit]x[/] please")
    assert not q.matches("say @click=app.quit x please")
    assert compile_query('"a+b"').matches("a+b") and not compile_query('"a+b"').matches("aab")


def test_unfinished_quote_runs_to_the_end():
    q = compile_query('fix "date pars')
    assert kinds(q) == [("word", "fix"), ("phrase", "date pars")]
    assert q.matches("fix the date parsing")


def test_regex_terms():
    q = compile_query("re:fl[a-z]+y re:^fix")
    assert [t.kind for t in q.terms] == ["regex", "regex"]
    assert q.matches("Fix the FLAKY test")
    assert not q.matches("the flaky fix")  # ^fix anchors at the start
    assert compile_query(r're:"date\s+parsing"').matches("date   parsing")
    assert compile_query(r"re:\d{3}").find("abc 12345") == (4, 7)


def test_regex_can_opt_out_of_ignoring_case():
    q = compile_query("re:(?-i:Fix)")
    assert q.matches("Fix it") and not q.matches("fix it")


@pytest.mark.parametrize("text", ["re:[unclosed", "re:(a", "re:*x", "re:a{2,1}", 'x re:"(?P<1>)"'])
def test_invalid_regex_raises_a_one_line_query_error(text):
    with pytest.raises(QueryError) as caught:
        compile_query(text)
    message = str(caught.value)
    assert isinstance(caught.value, ValueError)
    assert "\n" not in message and message.startswith("invalid regular expression")


def test_invalid_regex_message_with_a_newline_stays_on_one_line():
    with pytest.raises(QueryError) as caught:
        compile_query('re:"(\n"')
    assert "\n" not in str(caught.value)


def test_find_gives_the_earliest_span_of_any_term():
    q = compile_query("date flaky")
    assert q.find("a flaky date") == (2, 7)
    assert q.find("only the date here") == (9, 13)  # one term suffices for a highlight
    assert q.find("nothing") is None


def test_spans_merge_and_skip_zero_width():
    q = compile_query("ab bc re:x*")
    assert q.spans("abc ab xx") == [(0, 3), (4, 6), (7, 9)]
    assert compile_query("a").spans("a " * 500, limit=10) == [(2 * i, 2 * i + 1) for i in range(10)]
    assert compile_query("a").spans("aaa") == [(0, 3)]  # touching spans draw as one


def test_fields_are_only_those_declared():
    q = compile_query("cwd:weather fix", fields={"cwd"})
    assert kinds(q) == [("word", "fix")]
    assert [(t.field, t.text) for t in q.field_terms] == [("cwd", "weather")]
    assert q.matches_field("cwd", "/home/dev/Weather-cli")
    assert not q.matches_field("cwd", "/home/dev/other")
    assert q.matches_field("name", "anything")  # no terms for that field
    assert q.matches("fix it")  # field terms do not take part in matches()
    plain = compile_query("cwd:weather")  # without declaring the field: an ordinary word
    assert kinds(plain) == [("word", "cwd:weather")] and not plain.field_terms


def test_field_values_can_be_phrases_or_regexes_and_empty_ones_are_ignored():
    q = compile_query('CWD:"dev a" cwd:re:^/home cwd:', fields={"cwd"})
    assert [(t.kind, t.text) for t in q.for_field("cwd")] == [("phrase", "dev a"), ("regex", "^/home")]
    assert q.matches_field("cwd", "/home/dev a") and not q.matches_field("cwd", "/srv/dev a")
    assert not q.is_empty and q.terms == ()
    assert compile_query("cwd:", fields={"cwd"}).is_empty


def test_quoted_re_prefix_is_a_phrase():
    q = compile_query('"re:foo"')
    assert kinds(q) == [("phrase", "re:foo")]
    assert q.matches("see re:foo")


def test_str_round_trips_the_terms():
    q = compile_query('a  "b c"   re:d+ cwd:e', fields={"cwd"})
    assert str(q) == 'a "b c" re:d+ cwd:e'
    assert str(compile_query(str(q), fields={"cwd"})) == str(q)


def test_the_module_does_not_import_textual():
    import ast
    import inspect

    import sessiontree.query as module

    tree = ast.parse(inspect.getsource(module))
    names = [a.name for n in ast.walk(tree) if isinstance(n, ast.Import) for a in n.names]
    names += [n.module or "" for n in ast.walk(tree) if isinstance(n, ast.ImportFrom)]
    assert not [n for n in names if n.startswith(("textual", "rich"))]


def test_a_regular_expression_that_backtracks_without_end_gives_up_and_lets_others_run():
    """Under `re`, `re:(a|aa)+c` on a run of a's held the interpreter lock for good: the app
    froze, and not even SIGTERM stopped it."""
    query = compile_query("re:(a|aa)+c")
    text = "a" * 60 + "b"
    ran: list[int] = []
    outcome: list[BaseException] = []

    def match() -> None:
        try:
            query.matches(text)
        except QueryTimeout as exc:
            outcome.append(exc)

    worker = threading.Thread(target=match)
    worker.start()
    while worker.is_alive():  # this thread runs while the other one matches
        ran.append(1)
        time.sleep(0.01)
    assert outcome and "gave up" in str(outcome[0]) and "re:(a|aa)+c" in str(outcome[0])
    assert len(ran) > 10
    assert query.spans(text) == []  # highlighting never raises
    assert compile_query("re:a+c").matches("aaac")  # the same syntax as before


def test_regular_expressions_keep_the_syntax_of_re():
    for source, text in (
        ("re:(?P<w>ab)(?P=w)", "xABAB"),
        ("re:\\bfl[a-z]+y\\b", "a Flaky test"),
        ("re:(?-i:Ab)", "Ab"),
    ):
        assert compile_query(source).matches(text), source
    assert not compile_query("re:(?-i:Ab)").matches("ab")


def test_counted_repeats_past_a_limit_are_refused_before_compiling():
    """`re:a{1000000000}` took the app's memory by gigabytes while it compiled (QA)."""
    for source in ("re:a{1000000000}", "re:(a{500}){500}", "re:x{99999,1000000}"):
        with pytest.raises(QueryError, match="counted repeats come to more than 100,000"):
            compile_query(source)
    assert compile_query("re:a{2,50}b{10}").matches("aab" + "b" * 9)
    assert compile_query(r"re:\{1000000\}").matches("{1000000}")  # braces written as text


def test_dollar_and_caret_match_at_each_line():
    r"""An entry's text is followed by its label and id on lines of their own: `why\?$` found
    nothing at the end of a message (QA)."""
    haystack = "Can you find out why?\n\n3a7c0bb2"
    assert compile_query(r"re:why\?$").matches(haystack)
    assert compile_query("re:^3a7c").matches(haystack)
