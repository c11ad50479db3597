"""Reconcile what the mail-send log says with what the provider really sent (by message id).

Works on a DuckDB connection that has the log's `sends` table (built by ingest) and the
provider rows in `provider_sends` (see `load_provider_sends`).
"""

from __future__ import annotations

import re

import queries
from forensics.errors import ConfigError

SAMPLE = 20
_IDENT = re.compile(r"^[A-Za-z_][A-Za-z0-9_]*$")


def load_provider_sends(con, paths, provider: str | None = None, **opts) -> int:
    """Read provider exports and (re)create table provider_sends; returns its row count.

    `opts` go to `forensics.providers.read_events` (mapping, keys, year, tz).
    """
    from forensics.providers import read_events

    table = read_events(paths, provider=provider, **opts).sends()
    con.register("provider_sends_arrow", table)
    try:
        con.execute(queries.get("reconcile_provider_table_create").for_duckdb())
    finally:
        con.unregister("provider_sends_arrow")
    return table.num_rows


def _quoted(name: str) -> str:
    if not _IDENT.match(name):
        raise ConfigError(f"not a table name: {name!r}")
    return f'"{name}"'


def _finding(con, name: str, table: str) -> dict:
    sql = queries.get(name).for_duckdb().format(provider_table=table)
    cursor = con.execute(sql)
    cols = [d[0] for d in cursor.description]
    rows = [dict(zip(cols, r)) for r in cursor.fetchall()]
    return {"count": len(rows), "sample": rows[:SAMPLE]}


def reconcile(con, provider_table: str = "provider_sends") -> dict:
    """Counts and samples: log sends the provider never saw, provider sends missing from the log,
    and provider-confirmed duplicates (two or more sends per person, campaign and step)."""
    table = _quoted(provider_table)
    return {
        "log_sends_not_at_provider": _finding(con, "reconcile_log_not_at_provider", table),
        "provider_sends_not_in_log": _finding(con, "reconcile_provider_not_in_log", table),
        "provider_confirmed_duplicates": _finding(con, "reconcile_provider_duplicates", table),
    }
