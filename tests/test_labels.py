"""One normaliser for campaign, step and A/B test id: Python, the DuckDB macro and the PostgreSQL function agree,
and a filter is matched against the sent-log's own spellings (remediation.labels)."""

from __future__ import annotations

import re

import duckdb
import psycopg
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

import queries
from forensics.addresses import WHITESPACE, WHITESPACE_CODE_POINTS, install_sql, normalize_label
from remediation import labels
from remediation.errors import RefusedError

_piece = st.one_of(
    st.sampled_from(["0", "00", "1", "7", "C", "c", "-", "step", "Ä", "ß", "İ", "\u212a", "１", "٣"]),
    st.sampled_from(WHITESPACE),
    st.characters(exclude_categories=("Cs",), exclude_characters="\x00"),
)
label_texts = st.lists(_piece, max_size=10).map("".join)


def test_spellings_of_one_label_have_one_normal_form():
    assert {normalize_label(v) for v in ["C1", "c1", " C1", "c1\u00a0", "\ufeffC1\t"]} == {"c1"}
    assert {normalize_label(v) for v in ["1", "01", " 001 ", "1\u3000"]} == {"1"}
    assert (normalize_label("000"), normalize_label("0"), normalize_label(""), normalize_label(None)) == ("0", "0", "", "")
    assert normalize_label("c-042") == "c-042"  # only a label of digits alone loses its leading zeros
    assert normalize_label("０１") == "０１" and normalize_label("ÄB") == "Äb"  # nothing but ASCII changes


def test_the_sql_twin_trims_the_listed_code_points():
    listed = tuple(int(n) for n in re.findall(r"chr\((\d+)\)", queries.get("label_whitespace").sql))
    assert listed == WHITESPACE_CODE_POINTS


@pytest.mark.slow
def test_python_duckdb_and_postgresql_agree(pg_dsn):
    duck = duckdb.connect()
    install_sql(duck)
    with psycopg.connect(pg_dsn, autocommit=True) as conn:
        install_sql(conn)

        @settings(max_examples=400, deadline=None)
        @given(st.lists(label_texts, min_size=1, max_size=8))
        def agree(values):
            expected = [normalize_label(v) for v in values]
            assert [r[0] for r in duck.execute("SELECT mm_label(unnest($1))", [values]).fetchall()] == expected
            got = conn.execute("SELECT pg_temp.mm_label(v) FROM unnest(%s::text[]) WITH ORDINALITY AS u(v, n) "
                               "ORDER BY n", (values,)).fetchall()
            assert [r[0] for r in got] == expected

        agree()
    duck.close()


PAIRS = [("C1", "1"), ("C1", "2"), ("C1", ""), ("c-2", "01")]


@pytest.mark.parametrize("campaign,step,chosen", [
    ("c1", None, {("C1", "1"), ("C1", "2"), ("C1", "")}),
    (" C1", "01", {("C1", "1"), ("C1", "")}),  # a row of unknown step counts for any step
    ("C-2", "1", {("c-2", "01")}),
])
def test_a_filter_selects_the_sent_logs_spellings_compared_in_normal_form(campaign, step, chosen):
    scope = labels.resolve_scope(PAIRS, campaign, step)
    assert scope.unmatched is None
    assert {(c, s) for c, s in PAIRS if c in scope.campaigns and s in scope.steps} == chosen


def test_a_step_that_names_nothing_keeps_the_unknown_step_rows_in_scope():
    scope = labels.resolve_scope(PAIRS, "C1", "7")
    assert scope.unmatched.flag == "--step '7'" and (scope.campaigns, scope.steps) == (("C1",), ("",))


@pytest.mark.parametrize("campaign,step,named", [
    ("C-1", None, "the sent-log's campaigns: 'C1', 'c-2'."),
    ("c1", "3", "the sent-log's steps of campaign 'c1': '', '1', '2'."),
])
def test_a_filter_that_names_nothing_is_refused_on_one_line_naming_what_exists(campaign, step, named):
    scope = labels.resolve_scope(PAIRS, campaign, step)
    with pytest.raises(RefusedError) as refused:
        labels.refuse_unmatched(scope, labels.CHECK)
    message = str(refused.value)
    assert named in message and "\n" not in message and message.startswith(scope.unmatched.flag)


def test_a_refusal_shows_hostile_names_escaped():
    scope = labels.resolve_scope([("c\x1b[31m-1", "1")], "x\n\x1b[2J", None)
    with pytest.raises(RefusedError) as refused:
        labels.refuse_unmatched(scope, labels.CHECK)
    assert "\x1b" not in str(refused.value) and "\n" not in str(refused.value)
