"""The loader and runner of named queries (queries/): names, parameters, typed placeholders, dialects."""

from __future__ import annotations

import duckdb
import pytest

import queries
from queries import QueryError, blocks

HOSTILE_NAMES = ['we"ird', "it's", 'a"; DROP TABLE t; --', "50% off", "two words", "Mixed Case"]


@pytest.fixture()
def install(monkeypatch):
    """Add blocks written in a test to the registry (removed again afterwards)."""
    def add(text: str) -> None:
        for name, query in blocks.load([("test.sql", text)]).items():
            monkeypatch.setitem(queries.all_queries(), name, query)
    return add


@pytest.fixture()
def pg(pg_dsn):
    import psycopg

    with psycopg.connect(pg_dsn, autocommit=True) as conn:
        yield conn


# --- names -------------------------------------------------------------------------------------

def test_every_shipped_block_loads_with_a_name_description_and_dialect():
    found = queries.all_queries()
    assert "incident_rows" in found and found["incident_rows"].dialects == ("duckdb",)
    assert all(q.name == name and q.description and q.dialects for name, q in found.items())


@pytest.mark.parametrize("call", [queries.get, lambda name: queries.run(duckdb.connect(), name),
                                  lambda name: queries.fragment(name)])
def test_an_unknown_name_is_refused_with_a_query_error(call):
    with pytest.raises(QueryError, match="no query named 'no_such_block'"):
        call("no_such_block")


def test_a_name_defined_twice_in_one_file_is_refused():
    block = "-- name: twice\n-- {}.\n-- dialect: duckdb\nSELECT 1\n\n"
    text = block.format("A") + block.format("B")
    with pytest.raises(QueryError, match="twice defined twice in a.sql"):
        blocks.load([("a.sql", text)])


def test_a_name_defined_in_two_files_is_refused():
    text = "-- name: twice\n-- A.\n-- dialect: duckdb\nSELECT 1\n"
    with pytest.raises(QueryError, match="twice defined in a.sql and b.sql"):
        blocks.load([("a.sql", text), ("b.sql", text)])


@pytest.mark.parametrize("header,problem", [("", "no `-- dialect:` line"),
                                            ("-- dialect: sqlite\n", "unknown dialect sqlite")])
def test_a_block_must_declare_known_dialects(header, problem):
    with pytest.raises(QueryError, match=problem):
        blocks.load([("a.sql", f"-- name: b\n-- B.\n{header}SELECT 1\n")])


@pytest.mark.parametrize("body,problem", [
    ("SELECT * FROM {table}", "untyped placeholder {table}"),
    ("SELECT * FROM t WHERE a = $a", r"parameter \$a \(write :a\)"),
    ("SELECT {sql:x}", "unknown placeholder kind 'sql'"),
    ("CREATE {frag:relation} v AS SELECT 1", "no `-- fragments: relation=...` line"),
])
def test_malformed_blocks_are_refused_when_loaded(body, problem):
    with pytest.raises(QueryError, match=problem):
        blocks.load([("a.sql", f"-- name: b\n-- B.\n-- dialect: duckdb\n{body}\n")])


def test_description_and_header_lines_are_kept_apart():
    query = blocks.load([("a.sql", "-- name: b\n-- Says what.\n-- dialect: duckdb postgres\n-- More.\n"
                                   "-- fragments: r=VIEW|TABLE\nCREATE {frag:r} v AS SELECT 1\n")])["b"]
    assert (query.description, query.dialects, query.fragments) == ("Says what. More.", ("duckdb", "postgres"),
                                                                    {"r": ("VIEW", "TABLE")})


# --- parameters --------------------------------------------------------------------------------

PARAMS = """-- name: t_params
-- Parameters, casts and look-alikes inside literals.
-- dialect: duckdb postgres
SELECT CAST(:a AS INTEGER) + 1 AS n, ':b' AS text, '10:30' AS time, CAST(:a AS TEXT)::TEXT AS again
"""


def test_parameters_are_named_once_each_and_literals_are_not_parameters(install):
    install(PARAMS)
    assert queries.get("t_params").params == ["a"]


def test_parameters_translate_for_each_dialect(install, pg):
    install(PARAMS)
    assert "CAST($a AS INTEGER)" in queries.sql(duckdb.connect(), "t_params")
    assert "CAST(%(a)s AS INTEGER)" in queries.sql(pg, "t_params")
    expected = {"n": 42, "text": ":b", "time": "10:30", "again": "41"}
    assert queries.one(duckdb.connect(), "t_params", {"a": 41}) == expected
    assert queries.one(pg, "t_params", {"a": 41, "unused": 1}) == expected


def test_a_missing_parameter_is_refused(install):
    install(PARAMS)
    with pytest.raises(QueryError, match="t_params: no value for parameter :a"):
        queries.run(duckdb.connect(), "t_params", {"b": 1})


def test_percent_signs_reach_postgresql_unchanged(install, pg):
    install("""-- name: t_percent
-- % in literals, operators and quoted names, with and without parameters.
-- dialect: postgres
SELECT '50%' AS lit, 7 % 4 AS modulo, 'x%y' LIKE 'x%' AS matched, CAST(:v AS text) || '%' AS param

-- name: t_percent_plain
-- % without parameters.
-- dialect: postgres
SELECT '100%' AS lit, 9 % 5 AS modulo
""")
    assert queries.one(pg, "t_percent", {"v": "%s"}) == {"lit": "50%", "modulo": 3, "matched": True, "param": "%s%"}
    assert queries.one(pg, "t_percent_plain") == {"lit": "100%", "modulo": 4}


# --- rows, one, script, dialects ---------------------------------------------------------------

SCRIPT = """-- name: t_script
-- Two statements.
-- dialect: duckdb
CREATE TABLE t_s (a INTEGER);
INSERT INTO t_s VALUES (:a), (:a + 1)

-- name: t_rows
-- Rows of t_s.
-- dialect: duckdb
SELECT a FROM t_s ORDER BY a
"""


def test_script_runs_every_statement_and_rows_and_one_give_dicts(install):
    install(SCRIPT)
    con = duckdb.connect()
    queries.script(con, "t_script", {"a": 5})
    assert queries.rows(con, "t_rows") == [{"a": 5}, {"a": 6}]
    assert queries.one(con, "t_rows") == {"a": 5}


def test_run_refuses_a_block_of_several_statements(install):
    install(SCRIPT)
    with pytest.raises(QueryError, match="t_script holds 2 statements: run it with queries.script"):
        queries.run(duckdb.connect(), "t_script", {"a": 1})


def test_one_is_none_without_rows(install):
    install("-- name: t_none\n-- Nothing.\n-- dialect: duckdb\nSELECT 1 AS a WHERE false\n")
    assert queries.one(duckdb.connect(), "t_none") is None


def test_a_block_runs_only_in_its_dialects(install, pg):
    install("-- name: t_duck\n-- DuckDB only.\n-- dialect: duckdb\nSELECT 1\n")
    with pytest.raises(QueryError, match="t_duck is not a postgres query"):
        queries.run(pg, "t_duck")


def test_the_dialect_comes_from_the_connection(pg):
    assert queries.dialect_of(duckdb.connect()) == "duckdb"
    assert queries.dialect_of(pg) == "postgres" and queries.dialect_of(pg.cursor()) == "postgres"
    with pytest.raises(QueryError, match="not a DuckDB or psycopg connection: str"):
        queries.dialect_of("postgresql://x")


# --- typed placeholders ------------------------------------------------------------------------

IDENTS = """-- name: t_create
-- A table with a given name and columns.
-- dialect: duckdb postgres
CREATE TABLE {ident:table} ({ident:column} TEXT, other TEXT)

-- name: t_insert
-- A row into it.
-- dialect: duckdb postgres
INSERT INTO {ident:table} ({idents:columns}) VALUES (:v, :v)

-- name: t_select
-- Its rows.
-- dialect: duckdb postgres
SELECT {ident:column} AS value FROM {ident:table}
"""


def _round_trip(conn, name: str) -> list[dict]:
    queries.run(conn, "t_create", table=name, column=name)
    queries.run(conn, "t_insert", {"v": "ok"}, table=name, columns=[name, "other"])
    return queries.rows(conn, "t_select", table=name, column=name)


@pytest.mark.parametrize("name", HOSTILE_NAMES)
def test_hostile_identifiers_are_quoted_in_duckdb(install, name):
    install(IDENTS)
    assert _round_trip(duckdb.connect(), name) == [{"value": "ok"}]


def test_hostile_identifiers_are_quoted_in_postgresql(install, pg):
    install(IDENTS)
    for name in HOSTILE_NAMES:
        assert _round_trip(pg, name) == [{"value": "ok"}]


def test_identifier_quoting():
    assert queries.quote_ident('a"b') == '"a""b"'
    assert queries.quote_ident(("s", "t")) == '"s"."t"'
    for bad in ("", "a\x00b", 3, None, ["a"]):
        with pytest.raises(QueryError, match="is not an identifier"):
            queries.quote_ident(bad)


def test_literal_quoting(install):
    install("-- name: t_lit\n-- A literal.\n-- dialect: duckdb\nSELECT {lit:v} AS v\n")
    con = duckdb.connect()
    assert queries.one(con, "t_lit", v="it's '; --") == {"v": "it's '; --"}
    assert queries.one(con, "t_lit", v=7) == {"v": 7}
    assert queries.one(con, "t_lit", v=None) == {"v": None}
    with pytest.raises(QueryError, match="is not a text or an integer"):
        queries.sql(con, "t_lit", v=True)


def test_a_missing_placeholder_value_is_refused(install):
    install(IDENTS)
    with pytest.raises(QueryError, match="t_select: no value for column"):
        queries.rows(duckdb.connect(), "t_select", table="x")


FRAGMENTS = """-- name: t_relation
-- A view or a table over the union of its parts.
-- dialect: duckdb
-- fragments: relation=VIEW|TABLE
-- fragments: parts=t_part
CREATE {frag:relation} t_rel AS {union:parts}

-- name: t_part
-- Template: one part.
-- dialect: duckdb
SELECT {lit:n} AS n

-- name: t_other
-- Template: a block that is not a part.
-- dialect: duckdb
SELECT 99 AS n
"""


def test_fragments_from_the_declared_set_are_filled(install):
    install(FRAGMENTS)
    con = duckdb.connect()
    parts = [queries.fragment("t_part", n=1), queries.fragment("t_part", n=2)]
    queries.run(con, "t_relation", relation="TABLE", parts=parts)
    assert con.execute("SELECT n FROM t_rel ORDER BY n").fetchall() == [(1,), (2,)]


@pytest.mark.parametrize("relation,parts", [
    ("VIEW; DROP TABLE x", None),
    ("view", None),
    ("t_part", None),  # a block name as text: a fragment must be made by queries.fragment
    ("VIEW", "SELECT 1"),
    ("VIEW", []),
    ("VIEW", ["t_other"]),
    ("VIEW", "other fragment"),
])
def test_fragments_outside_the_declared_set_are_refused(install, relation, parts):
    install(FRAGMENTS)
    if parts is None:
        parts = [queries.fragment("t_part", n=1)]
    elif parts == "other fragment":
        parts = [queries.fragment("t_other")]
    with pytest.raises(QueryError, match=r"t_relation: \{(frag:relation|union:parts)\}"):
        queries.run(duckdb.connect(), "t_relation", relation=relation, parts=parts)


def test_a_block_with_parameters_is_not_a_fragment(install):
    install(PARAMS)
    with pytest.raises(QueryError, match="t_params has parameters"):
        queries.fragment("t_params")


def test_a_block_is_included_where_named():
    found = blocks.load([("a.sql", "-- name: outer\n-- Outer.\n-- dialect: duckdb\nSELECT * FROM ({block:inner})\n\n"
                                   "-- name: inner\n-- Inner.\n-- dialect: duckdb postgres\nSELECT :x AS x\n")])
    assert found["outer"].sql == "SELECT * FROM (SELECT :x AS x)" and found["outer"].params == ["x"]


@pytest.mark.slow
def test_the_cli_turns_a_query_error_into_one_line(cli, monkeypatch):
    from forensics import classify

    def broken(con, *args, **kwargs):
        raise QueryError("no query named 'x' in queries/*.sql")

    monkeypatch.setattr(classify, "classify", broken)
    result = cli("diagnose", "sample_logs/retry")
    assert result.exit_code == 1
    assert result.stderr == "Error: no query named 'x' in queries/*.sql\n"


def test_a_session_function_is_qualified_as_each_engine_finds_it(install):
    install("-- name: t_twin\n-- A twin.\n-- dialect: duckdb postgres\nSELECT {twin:mm_label}(x) FROM t\n")
    duckdb_text, postgres_text = (blocks.prepared("t_twin", d, {}).statements[0].text for d in ("duckdb", "postgres"))
    assert (duckdb_text, postgres_text) == ("SELECT mm_label(x) FROM t", "SELECT pg_temp.mm_label(x) FROM t")
    with pytest.raises(QueryError, match=r"\{twin:mm_lower\} is not one of mm_address, mm_label"):
        blocks.load([("a.sql", "-- name: t_bad\n-- Bad.\n-- dialect: duckdb\nSELECT {twin:mm_lower}(x)\n")])
