"""One address normaliser: Python, the DuckDB macro, the PostgreSQL function (on every locale) and the compiled
tokenizer's agree."""

from __future__ import annotations

import re

import duckdb
import psycopg
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st
from psycopg import sql

import queries
from forensics.addresses import WHITESPACE, WHITESPACE_CODE_POINTS, normalize_address
from forensics.ingest.readers.logfmt import _logfmt

VARIANTS = ["jane@acme.com", "Jane Doe <jane@acme.com>", "jane@acme.com\t", "\u00a0jane@acme.com",
            "jane@acme.com\n", " JANE@Acme.com\r\n", "<Jane@ACME.com>", '"Doe, Jane" <jane@acme.com>\u200b',
            "\ufeffJane Doe\u3000< jane@acme.com >"]
# Server locales this PostgreSQL build offers: lower() differs between them, the normal form must not.
LOCALES = {"c": "LC_COLLATE 'C' LC_CTYPE 'C'", "c_utf8": "LC_COLLATE 'C.UTF-8' LC_CTYPE 'C.UTF-8'",
           "builtin": "LOCALE_PROVIDER builtin BUILTIN_LOCALE 'PG_UNICODE_FAST'"}

_piece = st.one_of(
    st.sampled_from(["<", ">", "@", "jane", "JANE", "Doe ", '"', ",", ".", "Ä", "ß", "İ", "\u212a", "Σ", "ǅ"]),
    st.sampled_from(WHITESPACE),
    st.characters(exclude_categories=("Cs",), exclude_characters="\x00"),
)
addresses = st.one_of(st.none(), st.lists(_piece, max_size=12).map("".join))


def compiled(value: str | None) -> str | None:
    """The compiled tokenizer's normaliser (forensics/ingest/readers/_logfmt.c, on UTF-8); Python's where it was not
    built."""
    if _logfmt is None or value is None:
        return normalize_address(value)
    normal = _logfmt.normalize_address(value.encode())
    return None if normal is None else normal.decode()


def test_every_variant_of_one_address_has_one_normal_form():
    assert {normalize_address(v) for v in VARIANTS} == {"jane@acme.com"}
    assert normalize_address("  \u00a0 ") is None and normalize_address("<>") is None
    assert normalize_address("ÄNNE@X.COM") == "Änne@x.com"  # only ASCII A-Z are lower-cased
    assert {compiled(v) for v in VARIANTS} == {"jane@acme.com"} and compiled("ÄNNE@X.COM") == "Änne@x.com"


@pytest.mark.slow
@pytest.mark.skipif(_logfmt is None, reason="the compiled tokenizer was not built")
@settings(max_examples=2000, deadline=None)
@given(addresses)
def test_the_compiled_normaliser_is_pythons_byte_for_byte(value):
    assert compiled(value) == normalize_address(value)


def test_the_sql_twins_trim_the_same_listed_code_points():
    for name in ("address_duckdb_macro", "address_pg_function"):
        listed = tuple(int(n) for n in re.findall(r"chr\((\d+)\)", queries.get(name).sql))
        assert listed == WHITESPACE_CODE_POINTS, name


def _locale_databases(dsn: str, drop: bool = False) -> list[str]:
    """Beside the test's database (named after it): one database per locale."""
    base, _, own = dsn.rpartition("/")
    with psycopg.connect(dsn, autocommit=True) as admin:
        for name, options in LOCALES.items():
            db = sql.Identifier(f"{own}_{name}")
            admin.execute(sql.SQL("DROP DATABASE IF EXISTS {} WITH (FORCE)").format(db))
            if not drop:
                admin.execute(sql.SQL("CREATE DATABASE {} {} ENCODING 'UTF8' TEMPLATE template0")
                              .format(db, sql.SQL(options)))
    return [f"{base}/{own}_{name}" for name in LOCALES]


@pytest.mark.slow
def test_python_duckdb_and_postgresql_agree_on_every_locale(pg_dsn):
    duck = duckdb.connect()
    queries.script(duck, "address_duckdb_macro")
    conns = [psycopg.connect(dsn, autocommit=True) for dsn in _locale_databases(pg_dsn)]
    try:
        for conn in conns:
            queries.run(conn, "address_pg_function")
        lowers = {conn.execute("SELECT lower('ÄİΣ')").fetchone()[0] for conn in conns}
        assert len(lowers) > 1, "the locales should disagree on lower(), or this test proves little"

        @settings(max_examples=400, deadline=None)
        @given(st.lists(addresses, min_size=1, max_size=8))
        def agree(values):
            expected = [normalize_address(v) for v in values]
            assert [compiled(v) for v in values] == expected
            assert [r[0] for r in duck.execute("SELECT mm_address(unnest($1))", [values]).fetchall()] == expected
            for conn in conns:
                got = conn.execute("SELECT pg_temp.mm_address(v) FROM unnest(%s::text[]) WITH ORDINALITY AS u(v, n) "
                                   "ORDER BY n", (values,)).fetchall()
                assert [r[0] for r in got] == expected

        agree()
    finally:
        for conn in conns:
            conn.close()
        duck.close()
        _locale_databases(pg_dsn, drop=True)
