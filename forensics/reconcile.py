"""Reconcile what the mail-send log says with what the provider really sent (by message id).

Works on a DuckDB connection that has the log's `sends` table (built by ingest) and the
provider rows in `provider_sends` (see `load_provider_sends`).
"""

from __future__ import annotations

import queries

SAMPLE = 20


def load_provider_sends(con, exports, provider: str | None = None, **opts) -> int:
    """Read provider exports and (re)create table provider_sends; returns its row count.

    `exports` is a forensics.providers.ExportSpec (what the commands pass: --provider-export with
    --provider, --map, …), or paths read with `provider` and `opts` (mapping, keys, year, tz).
    """
    from forensics.providers import ExportSpec

    if not isinstance(exports, ExportSpec):
        exports = ExportSpec(tuple(str(p) for p in exports), provider, **opts)
    table = exports.read().sends()
    con.register("provider_sends_arrow", table)
    try:
        queries.run(con, "reconcile_provider_table_create")
    finally:
        con.unregister("provider_sends_arrow")
    return table.num_rows


def _finding(con, name: str, table: str) -> dict:
    rows = queries.rows(con, name, provider_table=table)
    return {"count": len(rows), "sample": rows[:SAMPLE]}


def reconcile(con, provider_table: str = "provider_sends") -> dict:
    """Counts and samples: log sends the provider never saw, provider sends missing from the log,
    and provider-confirmed duplicates (two or more sends per person, campaign and step)."""
    return {
        "log_sends_not_at_provider": _finding(con, "reconcile_log_not_at_provider", provider_table),
        "provider_sends_not_in_log": _finding(con, "reconcile_provider_not_in_log", provider_table),
        "provider_confirmed_duplicates": _finding(con, "reconcile_provider_duplicates", provider_table),
    }
