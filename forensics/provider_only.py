"""Diagnose duplicates from provider exports alone, when the app logs are gone (issue 14).

The provider's history is then the only witness: the same person sent one campaign step more than once
under different message ids. A "campaign step" is the provider's campaign and step metadata where the export
carries it, else its template, else its subject (forensics.reconcile.GROUPINGS, chosen by how many sends each
covers and said in the output). An export that carries none of them is refused: grouping by address alone
would call every multi-step sequence a duplicate. What only the logs can tell (the mechanism) is said, not
guessed. What to pass when sends name no campaign step is worded by forensics.providers.resolve, as for a
backfill of the same export.
"""

from __future__ import annotations

import shlex

import queries
from forensics import reconcile
from forensics.errors import InputError
from forensics.kinds import KINDS
from forensics.providers import columns, resolve

CANNOT_TELL = ("Without the app logs the mechanism cannot be told: which of " + ", ".join(KINDS[:-1])
               + f" or {KINDS[-1]} sent these twice needs the workers, claims, leases, restarts and errors "
               "that only the logs hold.")


def diagnose_exports(exports) -> dict:
    """The provider-only document (docs/diagnose-json.md, `provider_only`) for an ExportSpec."""
    import duckdb

    con = duckdb.connect()
    try:
        read = exports.read()
        reconcile.store_provider_sends(con, read)
        queries.run(con, "provider_no_log_sends")
        return _document(con, read, exports.arguments())
    finally:
        con.close()


def _document(con, read, export_args: list[str]) -> dict:
    coverage = reconcile.grouping_coverage(con, reconcile.NO_LOG)
    _refuse_ungroupable(coverage, read)
    grouped_by = reconcile.choose_grouping(coverage, with_log=False)
    if grouped_by is None:
        raise InputError(f"no send in {_files(read)} has both a message id and an address; nothing to compare")
    reconcile.find_provider_duplicates(con, grouped_by, reconcile.NO_LOG)
    grouping = reconcile.grouping_note(coverage, grouped_by, with_log=False)
    section = {
        "exports": [{"path": path, "provider": provider, "reading": columns.described(read.readings.get(path, {}))}
                    for path, provider in read.files.items()],
        "malformed_records": len(read.malformed),
        "grouping": grouping,
        "summary": queries.one(con, "provider_duplicate_summary", provider_table="provider_sends"),
        "cannot_tell": CANNOT_TELL,
        "duplicates": [_without_log_columns(row) for row in reconcile.provider_duplicates(con)],
        "campaigns": [row["campaign"] for row in queries.rows(con, "provider_send_campaigns")],
        "next": [_logs_command(export_args), _affected_command(export_args)],
    }
    complete = grouping["not_grouped"] == 0 and not read.malformed
    return {"version": 1, "complete": complete, "provider_only": section}


def _without_log_columns(row: dict) -> dict:
    row.pop("not_in_log")  # every send is "not in the log" when there is none
    return row


def _refuse_ungroupable(coverage: list[dict], read) -> None:
    """No sends at all, or sends none of which carries a campaign step, template or subject: one line, what to pass.
    (Some files without them beside others with them make the run incomplete instead, the files named.)"""
    if not coverage:
        raise InputError(f"no provider-confirmed send in {_files(read)} (only other events: opens, bounces "
                         "without a send, …); nothing to compare")
    keyed = [row for row in coverage if row["sends"] > row["unkeyed"]]
    if keyed and not any(row["metadata"] or row["template"] or row["subject"] for row in keyed):
        first, more = keyed[0], len(keyed) - 1
        where = f"{first['source_file']}: its" if not more else f"{first['source_file']} and {more} more: their"
        raise InputError(f"{where} sends name no campaign and step, template or subject, and grouping by address "
                         "alone would call every multi-step sequence a duplicate; pass "
                         f"{resolve.grouping_hint([first['provider']])}, or the app logs")


def _files(read) -> str:
    paths = list(read.files)
    return paths[0] if len(paths) == 1 else f"{len(paths)} export files"


def _logs_command(export_args: list[str]) -> str:
    return "find the app logs (container, journal, syslog) and run: mailmortem diagnose LOGS " + shlex.join(export_args)


def _affected_command(export_args: list[str]) -> str:
    return "mailmortem affected " + shlex.join(export_args) + " --format csv -o apology-exclusions.csv"
