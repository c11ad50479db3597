"""Every SQL statement of mailmortem, as named blocks in `queries/*.sql`, and the one runner for them.

A block looks like::

    -- name: duplicate_people
    -- Recipients with two or more distinct real sends per (campaign, step).
    -- dialect: duckdb
    SELECT ... FROM {ident:table} WHERE campaign = :campaign

Values are `:name` parameters; names and fixed pieces of SQL are typed placeholders
(see `queries.blocks`). The dialect comes from the connection: a DuckDB connection or
a psycopg connection or cursor. `run` executes a block, `rows` and `one` return dicts,
`script` runs a block of several statements; `macros` makes a reading connection's DuckDB macros
(queries/macros.sql) once. This package imports nothing of mailmortem.
"""

from __future__ import annotations

import os
import sys
import time
import weakref
from contextlib import contextmanager

from queries.blocks import (Fragment, Prepared, Query, QueryError, Statement, all_queries, fragment, get, prepared,
                            quote_ident, quote_literal)

__all__ = ["MACROS", "Fragment", "Query", "QueryError", "all_queries", "arrow", "arrow_reader", "copy", "dialect_of",
           "fragment", "get", "macros", "one", "quote_ident", "quote_literal", "rows", "run", "script", "sql"]

# The macro blocks a reading connection keeps for its life, in the order they are made (queries/macros.sql).
MACROS = ("ingest_macros", "envelope_macros", "address_duckdb_macro", "label_duckdb_macro", "provider_macros",
          "report_macros")
_WITH_MACROS: weakref.WeakSet = weakref.WeakSet()  # the connections (and cursors: each has its own) that have them


def dialect_of(conn) -> str:
    """"duckdb" for a DuckDB connection, "postgres" for a psycopg connection or cursor."""
    module = type(conn).__module__ or ""
    if module.startswith(("duckdb", "_duckdb")):
        return "duckdb"
    if module.startswith("psycopg"):
        return "postgres"
    raise QueryError(f"not a DuckDB or psycopg connection: {type(conn).__name__}")


def sql(conn, name: str, **values) -> str:
    """The block's text as it is sent on this connection (one statement)."""
    return _single(prepared(name, dialect_of(conn), values)).text


def run(conn, name: str, params: dict | None = None, **values):
    """Execute a one-statement block; returns the cursor (DuckDB: the connection) to fetch from."""
    dialect = dialect_of(conn)
    block = prepared(name, dialect, values)
    text, bound = _single(block).text, _bound(block, params)
    with _profiled(name):
        if dialect == "postgres":
            return conn.execute(text, bound)
        return conn.execute(text, bound) if bound else conn.execute(text)


def rows(conn, name: str, params: dict | None = None, **values) -> list[dict]:
    """Every row of a block's result, as dicts keyed by column name."""
    cursor = run(conn, name, params, **values)
    columns = [d[0] for d in cursor.description or ()]
    return [dict(zip(columns, row)) for row in cursor.fetchall()]


def one(conn, name: str, params: dict | None = None, **values) -> dict | None:
    """The first row of a block's result as a dict, or None. The result is read to its end: DuckDB refuses to
    register an Arrow stream (the compiled readers') beside an unfinished one."""
    cursor = run(conn, name, params, **values)
    row = cursor.fetchone()
    if row is not None:
        cursor.fetchall()
    return None if row is None else dict(zip([d[0] for d in cursor.description], row))


def script(conn, name: str, params: dict | None = None, **values) -> None:
    """Run every statement of a block in order, each with the parameters it uses."""
    dialect = dialect_of(conn)
    block = prepared(name, dialect, values)
    bound = _bound(block, params)
    with _profiled(name):
        for at, statement in enumerate(block.statements, 1):
            used = {k: v for k, v in bound.items() if k in statement.params}
            with _profiled(f"{name}#{at}"):
                if used or dialect == "postgres":
                    conn.execute(statement.text, used)
                else:
                    conn.execute(statement.text)


def macros(con) -> None:
    """Make the MACROS blocks on a DuckDB connection or cursor the first time it asks; the session then reads and
    shows times in UTC (ingest_macros). TEMP macros belong to the connection that made them."""
    if con in _WITH_MACROS:
        return
    for name in MACROS:
        script(con, name)
    _WITH_MACROS.add(con)


def arrow(con, name: str, params: dict | None = None, **values):
    """A DuckDB block's result as a pyarrow Table."""
    relation = _relation(con, name, params, values)
    fetch = getattr(relation, "to_arrow_table", None) or relation.arrow  # DuckDB 2 / DuckDB 1.x
    return fetch()


def arrow_reader(con, name: str, batch_rows: int, params: dict | None = None, **values):
    """A DuckDB block's result as a pyarrow RecordBatchReader of `batch_rows` rows a batch."""
    relation = _relation(con, name, params, values)
    read = getattr(relation, "to_arrow_reader", None) or relation.fetch_arrow_reader
    return read(batch_rows)


def copy(cursor, name: str, **values):
    """psycopg's COPY context for a `COPY ... FROM STDIN` block."""
    return cursor.copy(_single(prepared(name, dialect_of(cursor), values)).text, {})


def _relation(con, name: str, params: dict | None, values: dict):
    if dialect_of(con) != "duckdb":
        raise QueryError(f"{name}: Arrow results are read from DuckDB only")
    block = prepared(name, "duckdb", values)
    return con.sql(_single(block).text, params=_bound(block, params) or None)


def _single(block: Prepared) -> Statement:
    if len(block.statements) != 1:
        raise QueryError(f"{block.name} holds {len(block.statements)} statements: run it with queries.script")
    return block.statements[0]


def _bound(block: Prepared, params: dict | None) -> dict:
    """The parameters the block uses (others are left out); a missing one is refused."""
    given = params or {}
    missing = [name for name in block.params if name not in given]
    if missing:
        raise QueryError(f"{block.name}: no value for parameter {', '.join(':' + m for m in missing)}")
    return {name: given[name] for name in block.params}


@contextmanager
def _profiled(name: str):
    """With MAILMORTEM_PROFILE set, write each block's wall time and the CPU time of every thread of the
    process to stderr (`profile: NAME SECONDS cpu CPU_SECONDS`; the statements of a script also as NAME#1,
    NAME#2, …), to see which block grows with a case (benchmarks/diagnose_bench.py). CPU time is the steadier
    figure on a shared machine. A SELECT's rows may still be fetched later."""
    if not os.environ.get("MAILMORTEM_PROFILE"):
        yield
        return
    started, cpu = time.perf_counter(), time.process_time()
    try:
        yield
    finally:
        print(f"profile: {name} {time.perf_counter() - started:.3f} cpu {time.process_time() - cpu:.3f}",
              file=sys.stderr, flush=True)
