"""`backfill-sentlog` from provider exports: read, resolve, plan, then write only what the export proves.

Every send's campaign, step and send time are resolved by forensics.providers.resolve, the rules `diagnose
--provider-export` words its hints with: a send missing any of them is refused (nothing written) unless the user
states it for the whole export (`Stated`). The plan (rows per campaign and step, what each field was read from,
rows already present, blanks to fill, disagreements) goes to `on_plan` before the write; the write itself is
remediation.sentlog.backfill (one transaction, audited; a re-run fills the blanks a richer reading can fill).
"""

from __future__ import annotations

from dataclasses import dataclass

import queries
from forensics.errors import InputError
from forensics.providers import columns, resolve
from forensics.providers.resolve import Stated
from remediation import reservations
from remediation.errors import RefusedError
from remediation.sentlog import STAGE_COLUMNS, backfill


def summarize_export(read) -> dict:
    """Counts and findings of a provider read (no database): what a backfill would record."""
    import duckdb
    import pyarrow.compute as pc

    sends = read.collapsed()  # the same rows as read.sends(), without its presentation sort
    con = duckdb.connect()
    try:
        queries.script(con, "label_duckdb_macro")  # the export's own duplicates compare labels in normal form
        con.register("provider_events_view", read.events)
        con.register("provider_sends_view", sends)
        summary = {
            "files": len(read.files),
            "rows_read": read.events.num_rows,
            "skipped_by_event_type": queries.rows(con, "sent_log_export_skipped"),
            "malformed": read.malformed + queries.rows(con, "sent_log_export_incomplete"),
            "duplicates_in_export": queries.rows(con, "sent_log_export_duplicates"),
        }
    finally:
        con.close()
    usable = pc.and_(pc.equal(sends.column("verdict"), "sent"),
                     pc.and_(pc.is_valid(sends.column("msg_id")), pc.is_valid(sends.column("recipient"))))
    summary["sends"] = sends.select(list(STAGE_COLUMNS)).filter(usable)
    summary["sends_found"] = summary["sends"].num_rows
    summary["reading"] = {path: columns.described(reading) for path, reading in read.readings.items()}
    return summary


def _one_provider(sends) -> bool:
    import pyarrow.compute as pc

    return pc.count_distinct(sends.column("provider")).as_py() <= 1


def per_campaign_step(sends) -> list[dict]:
    """The plan's rows per (campaign, step), step '' shown as every step (--no-step)."""
    grouped = sends.group_by(["campaign", "step"]).aggregate([("recipient", "count")])
    rows = [{"campaign": r["campaign"], "step": r["step"] or "(none: counts for every step)",
             "rows": r["recipient_count"]} for r in grouped.to_pylist()]
    return sorted(rows, key=lambda r: (r["campaign"] or "", r["step"] or ""))


@dataclass
class ExportPlan:
    """A backfill resolved and ready to write: the summary shown so far and the sends to store."""

    summary: dict
    sends: object  # pyarrow Table of STAGE_COLUMNS, campaign, step and time resolved


def plan_export(read, stated: Stated = Stated()) -> ExportPlan:
    """Read, count and resolve (no database): refused (RefusedError) while any send lacks a campaign, step or
    send time that neither the export nor `stated` gives; an export without sends is an InputError."""
    summary = summarize_export(read)
    if summary["sends_found"] == 0:
        kinds = ", ".join(f"{s['events']} {s['event_type']}" for s in summary["skipped_by_event_type"][:5])
        raise InputError(f"no send events in the export ({summary['rows_read']} events read"
                         + (f": {kinds}" if kinds else "") + ")")
    resolution = resolve.resolve(summary.pop("sends"), stated)
    summary.update(coverage=resolution.coverage(), no_step_rows=_no_step_rows(resolution, stated),
                   per_campaign_step=per_campaign_step(resolution.sends))
    ambiguous = _ambiguous(read)
    # a stated value fills what the export leaves blank, never a field it holds in columns it could not tell apart
    if resolution.refused or any(stated.value(f) is not None for f, _line in ambiguous):
        raise RefusedError(resolve.refusal(resolution, sorted(set(read.files.values())), stated,
                                           [line for _f, line in ambiguous] + _unread_in(read, resolution)))
    return ExportPlan(summary, resolution.sends)


def _ambiguous(read) -> list[tuple[str, str]]:
    """(field, line) of each required field two columns fitted equally (columns.infer): the refusal names them."""
    return [(f, f"{path}: {columns.described({f: r})[0]}") for path, reading in read.readings.items()
            for f, r in reading.items() if f in resolve.REQUIRED and not r[0]]


_BLANK_OR = {"sent_at": "blank or not a time in some rows (ISO 8601, or epoch seconds or milliseconds)",
             "campaign": "blank in some rows", "step": "blank in some rows"}


def _unread_in(read, resolution) -> list[str]:
    """The columns a lacking field was read from: the refusal says what they hold, not to --map them again."""
    return [f"{path}: {f} ← {r[0]}, {_BLANK_OR[f]}" for path, reading in read.readings.items()
            for f, r in reading.items() if f in resolve.REQUIRED and r[0] and resolution.missing[f]]


def backfill_exports(store, read, dry_run: bool = False, clock_margin_s: float = reservations.CLOCK_MARGIN_S,
                     stated: Stated = Stated(), on_plan=None) -> dict:
    """Record every send of a provider read in sent_log (one transaction); returns the summary.

    `plan_export`, then `write_plan`: refused, nothing written, while a send lacks what it needs."""
    return write_plan(store, plan_export(read, stated), dry_run, clock_margin_s, on_plan)


def write_plan(store, planned: ExportPlan, dry_run: bool = False,
               clock_margin_s: float = reservations.CLOCK_MARGIN_S, on_plan=None) -> dict:
    """Write a resolved plan. `on_plan(summary)` sees it before anything is written (a dry run: without what
    the store holds). The same transaction confirms or releases send reservations (see `backfill`)."""
    summary, sends = dict(planned.summary), planned.sends
    plan = on_plan or (lambda shown: None)
    if dry_run:
        summary.update(inserted=None, already_present=None, filled=None, disagreeing=None, differences=[],
                       dry_run=True)
        plan(summary)
        return summary
    # collapsed rows of ONE provider are already one per (msg_id, recipient): the collapse was the dedupe
    result = backfill(store, sends, unique_keys=_one_provider(sends), clock_margin_s=clock_margin_s,
                      on_plan=lambda compared: plan({**summary, "already_present": compared["present"],
                                                     "to_fill": compared["to_fill"],
                                                     "disagreeing": compared["disagreeing"]}))
    summary.update(inserted=result.inserted, already_present=result.already_present, filled=result.filled,
                   disagreeing=result.disagreeing, differences=result.differences, dry_run=False,
                   reservations=result.extra["reservations"], run_id=result.extra["run_id"])
    return summary


def _no_step_rows(resolution, stated: Stated) -> int:
    """Rows stored without a step because the user said the export has none (--no-step)."""
    return resolution.stated["step"] if stated.no_step else 0
