"""Reconcile what the mail-send log says with what the provider really sent (by message id).

Works on a DuckDB connection that has the log's `sends` table (built by ingest) and the
provider rows in `provider_sends` (see `load_provider_sends`). Provider-confirmed duplicates are the
provider's sends grouped per person by one grouping (`GROUPINGS`), the same with or without logs
(forensics.provider_only diagnoses an export alone).
"""

from __future__ import annotations

import queries

SAMPLE = 20
# How provider sends are grouped into "one campaign step", strongest first, and how the output names it.
GROUPINGS = {
    "metadata": "the provider's campaign and step (custom args, tags or metadata)",
    "template": "the template (within the campaign where the provider names one)",
    "subject": "the subject (within the campaign where the provider names one)",
    "log": "the log's campaign and step, by message id",
}
NO_LOG = "provider_no_log"  # the empty stand-in for the log's sends (provider_no_log_sends)


def load_provider_sends(con, exports, provider: str | None = None, window_cut=None, **opts) -> int:
    """Read provider exports and (re)create table provider_sends; returns its row count.

    `exports` is a forensics.providers.ExportSpec (what the commands pass: --provider-export with
    --provider, --map, …), or paths read with `provider` and `opts` (mapping, keys, year, tz).
    `window_cut` (the logs' --since/--until, forensics.ingest.window.Cut): the export is kept to it, so
    it is compared with the logs within the same window.
    """
    from forensics.ingest.window import cut_provider_sends
    from forensics.providers import ExportSpec

    if not isinstance(exports, ExportSpec):
        exports = ExportSpec(tuple(str(p) for p in exports), provider, **opts)
    return store_provider_sends(con, exports.read()) - cut_provider_sends(con, window_cut)


def store_provider_sends(con, read) -> int:
    """(Re)create table provider_sends from a ProviderRead; returns its row count (unsorted: every query orders)."""
    table = read.collapsed()
    con.register("provider_sends_arrow", table)
    try:
        queries.run(con, "reconcile_provider_table_create")
    finally:
        con.unregister("provider_sends_arrow")
    return table.num_rows


def grouping_coverage(con, log_sends: str, provider_table: str = "provider_sends") -> list[dict]:
    """Per export file: its sends, and how many carry each grouping (provider_grouping_coverage)."""
    return queries.rows(con, "provider_grouping_coverage", provider_table=provider_table, log_sends=log_sends)


def choose_grouping(coverage: list[dict], with_log: bool) -> str | None:
    """The grouping that covers the most sends (the stronger on a tie); None when none covers any."""
    totals = _coverage_totals(coverage, with_log)
    best = max(totals, key=lambda name: totals[name])  # max keeps the first (strongest) of equal totals
    return best if totals[best] else None


def grouping_note(coverage: list[dict], grouped_by: str | None, with_log: bool = True) -> dict:
    """What the duplicates were grouped by, and how many sends that grouping could not place."""
    sends = sum(row["sends"] for row in coverage)
    grouped = sum(row[grouped_by] for row in coverage) if grouped_by else 0
    return {"grouped_by": grouped_by, "described": GROUPINGS.get(grouped_by, "nothing: no grouping fits"),
            "sends": sends, "grouped": grouped, "not_grouped": sends - grouped,
            "without_id_or_address": sum(row["unkeyed"] for row in coverage),
            "files_not_grouped": [row["source_file"] for row in coverage
                                  if row["sends"] and not (grouped_by and row[grouped_by])],
            "coverage": _coverage_totals(coverage, with_log)}


def _coverage_totals(coverage: list[dict], with_log: bool) -> dict:
    """Sends each grouping covers over every file (the log's campaign step only when logs were read)."""
    return {name: sum(row[name] for row in coverage) for name in GROUPINGS if with_log or name != "log"}


def find_provider_duplicates(con, grouped_by: str | None, log_sends: str, provider_table: str = "provider_sends"):
    """(Re)create table provider_duplicates for this grouping (empty when there is none)."""
    queries.run(con, "provider_duplicate_groups", {"grouped_by": grouped_by or ""},
                provider_table=provider_table, log_sends=log_sends)


def provider_duplicates(con) -> list[dict]:
    return queries.rows(con, "provider_duplicate_rows")


def _finding(con, name: str, table: str) -> dict:
    return _counted(queries.rows(con, name, provider_table=table))


def _counted(rows: list[dict]) -> dict:
    return {"count": len(rows), "sample": rows[:SAMPLE]}


def _missed(rows: list[dict]) -> dict:
    return {"count": len(rows), "sends_not_in_log": sum(r["not_in_log"] for r in rows), "sample": rows[:SAMPLE]}


def reconcile(con, provider_table: str = "provider_sends") -> dict:
    """Counts and samples: log sends the provider never saw, provider sends missing from the log,
    provider-confirmed duplicates (two or more sends per person and campaign step), and those of them
    the log cannot show (it holds fewer than two of their sends)."""
    coverage = grouping_coverage(con, "sends", provider_table)
    grouped_by = choose_grouping(coverage, with_log=True)
    find_provider_duplicates(con, grouped_by, "sends", provider_table)
    duplicates = provider_duplicates(con)
    return {
        "log_sends_not_at_provider": _finding(con, "reconcile_log_not_at_provider", provider_table),
        "provider_sends_not_in_log": _finding(con, "reconcile_provider_not_in_log", provider_table),
        "provider_confirmed_duplicates": {**_counted(duplicates), "grouping": grouping_note(coverage, grouped_by)},
        "provider_duplicates_missed_by_log": _missed([r for r in duplicates if r["sends"] - r["not_in_log"] < 2]),
        "provider_sends_unplaced": unplaced(con, grouped_by, provider_table),
    }


def unplaced(con, grouped_by: str | None, provider_table: str = "provider_sends") -> dict:
    """Provider sends the log lacks and the grouping cannot place: duplicates among them cannot be seen."""
    by_file = [{**row, "first_lines": list(row["first_lines"])} for row in
               queries.rows(con, "reconcile_provider_unplaced", {"grouped_by": grouped_by or ""},
                            provider_table=provider_table)]
    return {"count": sum(row["sends"] for row in by_file), "by_file": by_file}
