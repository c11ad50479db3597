"""`backfill-sentlog` and `sentlog check|unconfirmed|release`: the durable record of who was really emailed."""

from __future__ import annotations

import sys

import click

from mailmortem.cli.options import apply_option, db_hint, db_option, format_option
from mailmortem.cli.reading import export_options


def _say_target(db: str | None) -> None:
    from remediation.store import DEFAULT_DUCKDB

    if not db:
        click.echo(f"writing to ./{DEFAULT_DUCKDB} (no --db or DATABASE_URL given)", err=True)


@click.command("backfill-sentlog")
@export_options(required=True, what="Export")
@click.option("--campaign", "stated_campaign", metavar="NAME",
              help="The campaign of every send the export names none for (a send naming another is refused).")
@click.option("--step", "stated_step", metavar="N",
              help="The step of every send the export names none for (a send naming another is refused).")
@click.option("--no-step", is_flag=True,
              help="The export has no steps: a send without one is stored so that it counts for every step of "
                   "its campaign (every answer that uses it says so).")
@db_option()
@click.option("--format", "fmt", type=click.Choice(("table", "json")), default="table", show_default=True)
@click.option("--dry-run", is_flag=True, help="Read, resolve and print the plan; write nothing.")
def backfill_sentlog(exports, stated_campaign, stated_step, no_step, db, fmt, dry_run):
    """Rebuild who was really emailed from provider history into the durable sent_log table.

    Reads SendGrid, Mailgun, SES, Postmark, Resend, Brevo and Postfix exports (each file
    detected by its provider's own fields), keeps the events that prove a send, and inserts
    one row per (message, recipient) in ONE transaction. Every send needs its campaign, step
    and send time, read from the export (--map, --campaign-key, --step-key, as diagnose reads
    it) or stated (--campaign, --step, --no-step): otherwise nothing is written (exit 1) and
    the refusal counts what is missing and names the options that read it. The plan is printed
    (stderr) before the write. A re-run that reads more fills the blanks of the rows it wrote
    and reports, never overwrites, a stored value that disagrees.

    \b
    Examples:
      mailmortem backfill-sentlog --provider-export sendgrid-events/ --db "$DATABASE_URL"
      mailmortem backfill-sentlog --provider-export ses-firehose-2026-11-28.jsonl.gz --step-key seq_step
      mailmortem backfill-sentlog --provider-export export.csv --provider csv \\
          --map recipient=To --map msg_id="Message ID" --map campaign=Tag --step 1
      mailmortem backfill-sentlog --provider-export /var/log/maillog --year 2026 --tz Europe/Berlin \\
          --campaign c-42 --no-step
    """
    from forensics.providers.resolve import Stated
    from remediation import sentlog_backfill
    from remediation.store import open_store

    if no_step and stated_step is not None:
        raise click.UsageError("--step N and --no-step contradict each other: pass one")
    stated = Stated(_stated(stated_campaign, "--campaign"), _stated(stated_step, "--step"), no_step)
    planned = sentlog_backfill.plan_export(exports.read(), stated)  # refused here: no store opened, none created
    if dry_run:
        summary = sentlog_backfill.write_plan(None, planned, dry_run=True, on_plan=_print_plan)
        summary["target"] = None
    else:
        _say_target(db)
        store = open_store(db)
        try:
            summary = sentlog_backfill.write_plan(store, planned, on_plan=_print_plan)
            summary["target"] = store.label
        finally:
            store.close()
        click.echo(f"Audit: mailmortem audit --run {summary['run_id']}{db_hint(db)}   (the keys it inserted and the "
                   "blanks it filled; not undoable: re-run the backfill to mend)", err=True)
    _render_summary(summary, fmt)


def _stated(value: str | None, flag: str) -> str | None:
    from forensics.addresses import normalize_label

    if value is not None and not normalize_label(value):  # blank as every check compares it (U+200B too)
        raise click.UsageError(f"{flag} must not be empty")
    return value


def _print_plan(plan: dict) -> None:
    """The plan, on stderr before anything is written: what was read from where, and what the write will do."""
    from forensics.textsafe import terminal_safe

    for path, lines in plan["reading"].items():
        click.echo(terminal_safe(f"read {path}: " + "; ".join(lines)), err=True)
    for row in plan["coverage"]:
        how = " (--no-step: none)" if row["field"] == "step" and plan["no_step_rows"] else ""
        stated = f", {row['stated']:,} stated{how}" if row["stated"] else ""
        click.echo(f"  {row['field']}: {row['read']:,} read from the export{stated}", err=True)
    for row in plan["per_campaign_step"]:
        click.echo(terminal_safe(f"  plan: {row['rows']:,} sends of {row['campaign']} step {row['step']}"), err=True)
    if plan["no_step_rows"]:
        click.echo(f"  --no-step: {plan['no_step_rows']:,} sends stored without a step count for every step of "
                   "their campaign", err=True)
    if plan["already_present"] is None:
        click.echo("  dry run: not compared with the sent-log (nothing opened)", err=True)
    else:
        click.echo(f"  already present: {plan['already_present']:,} (blanks to fill: {plan['to_fill']:,}; "
                   f"disagreeing, left as stored: {plan['disagreeing']:,})", err=True)


def _render_summary(summary: dict, fmt: str) -> None:
    from mailmortem.output import write_json, write_rows

    if fmt == "json":
        write_json(summary)
        return
    counts = [{"what": k.replace("_", " "), "count": "-" if summary[k] is None else summary[k]}
              for k in ("files", "rows_read", "sends_found", "inserted", "already_present", "filled", "disagreeing")]
    counts.append({"what": "malformed", "count": len(summary["malformed"])})
    write_rows(counts, "table", ["what", "count"], title=f"backfill-sentlog → {summary['target'] or 'dry run'}")
    if summary["differences"]:
        write_rows(summary["differences"], "table", None,
                   title=f"stored rows that disagree with the export ({summary['disagreeing']}; left as stored)")
    if summary["skipped_by_event_type"]:
        write_rows(summary["skipped_by_event_type"], "table", ["provider", "event_type", "verdict", "events"],
                   title="skipped (not a send)")
    if summary["malformed"]:
        rows = [{"where": f"{m['source_file']}:{m['source_line']}", "reason": m["reason"]} for m in summary["malformed"]]
        write_rows(rows[:50], "table", ["where", "reason"], title=f"malformed ({len(rows)})")
    if summary["duplicates_in_export"]:
        write_rows(summary["duplicates_in_export"], "table",
                   ["campaign", "step", "recipient", "sends", "first_sent_at", "last_sent_at"],
                   title="emailed more than once per campaign (per the provider)")
    _render_settled(summary.get("reservations"))


def _render_settled(settled: dict | None) -> None:
    """Reservations the backfill confirmed or released (said only when there were any)."""
    from forensics.textsafe import terminal_safe

    if settled and (settled["confirmed"] or settled["released"]):
        click.echo(f"send reservations: {settled['confirmed']} confirmed (the export shows the send), "
                   f"{len(settled['released'])} released (the export shows no send)", err=True)
        for row in settled["released"]:
            click.echo(terminal_safe(f"  released {row['campaign']} step {row['step']}: {row['recipient']}"), err=True)


@click.group("sentlog")
def sentlog():
    """Ask the durable sent_log before sending; list and release send reservations.

    \b
    Examples:
      mailmortem sentlog check --db "$DATABASE_URL" --campaign c-42 --recipient Jane@Acme.com
      mailmortem sentlog check --campaign c-42 --step 2 --recipient jane@acme.com && echo "not sent: send it"
      mailmortem sentlog unconfirmed --db "$DATABASE_URL"
    """


@sentlog.command("check")
@db_option()
@click.option("--campaign", required=True,
              help="Campaign id; compared in normal form (trimmed, A-Z lower-cased): C-42 is c-42.")
@click.option("--step", help="Sequence step, compared the same way (01 is 1); omitted = any step of the campaign.")
@click.option("--recipient", help="Address; normalised the same way as diagnose does.")
@click.option("--candidate",
              help="Candidate id: answers for every address the sent-log or a reservation holds for them.")
@click.option("--no-sends-yet", is_flag=True,
              help="Answer for a --campaign/--step the sent-log holds no row of (a new one) instead of refusing.")
@click.option("--format", "fmt", type=click.Choice(("table", "json")), default="table", show_default=True,
              help="table: one line; json: the same line and its fields (step_recorded, time_recorded, …).")
def check(db, campaign, step, recipient, candidate, no_sends_yet, fmt):
    """Exit 3 if RECIPIENT (or CANDIDATE) was already sent CAMPAIGN (and STEP), 0 if not; prints one line.

    A read: it never creates a store or a table. No store, no sent_log table, an
    invalid address, or a --campaign/--step that names nothing in the sent-log (the
    refusal names what it holds; --no-sends-yet for a new one) is exit 1, never "not sent".
    A send recorded without a step counts for every step and is said so ("step not
    recorded"); one without a time says where its time should come from.

    \b
    Examples:
      mailmortem sentlog check --db "$DATABASE_URL" --campaign c-42 --recipient Jane@Acme.com
      mailmortem sentlog check --db mailmortem.duckdb --campaign c-42 --step 1 --recipient jane@acme.com
      mailmortem sentlog check --db "$DATABASE_URL" --campaign c-42 --step 1 --candidate cand-8812 --format json
      mailmortem sentlog check --db "$DATABASE_URL" --campaign c-43 --step 1 --recipient jane@acme.com --no-sends-yet
    """
    from forensics.textsafe import terminal_safe
    from mailmortem.output import write_json
    from remediation import sentlog_check
    from remediation.store import open_store

    if recipient is None and not (candidate or "").strip():
        raise click.UsageError("pass --recipient or --candidate")
    if recipient is not None:
        sentlog_check.checked_address(recipient)  # refused before any store is opened
    store = open_store(db, read_only=True)
    try:
        answer = sentlog_check.check_answer(store, campaign, step, recipient, candidate, no_sends_yet)
    finally:
        store.close()
    said = sentlog_check.describe(answer.hit, _who(recipient, candidate, answer.hit), campaign, step,
                                  answer.unmatched)
    if fmt == "json":
        write_json(said)
    else:
        click.echo(terminal_safe(said["line"]))
    if said["sent"]:
        sys.exit(3)


def _who(recipient: str | None, candidate: str | None, hit: dict | None) -> str:
    """The person as the answer names them: the address, or the candidate (with the address that matched)."""
    from forensics.addresses import normalize_address

    if recipient is not None and (not candidate or not hit or hit["recipient"] == normalize_address(recipient)):
        return normalize_address(recipient) or recipient
    return f"candidate {candidate.strip()}" + (f" ({hit['recipient']})" if hit else "")


UNCONFIRMED_COLUMNS = ["campaign", "step", "recipient", "candidate", "worker", "reserved_at"]


@sentlog.command("unconfirmed")
@db_option()
@click.option("--campaign", help="Only this campaign.")
@click.option("--step", help="Only this step.")
@format_option()
def unconfirmed(db, campaign, step, fmt):
    """List send reservations with no recorded send: people who may have been emailed.

    A sender reserves a person before calling the provider and confirms after; a
    reservation left unconfirmed (the sender died or lost its session in between)
    counts as sent until `backfill-sentlog` shows no send to that person, or a
    person runs `sentlog release`. Exit 0 with no rows when there are none; a store
    without reservations, or a --campaign/--step that names none, is an error.

    \b
    Examples:
      mailmortem sentlog unconfirmed --db "$DATABASE_URL"
      mailmortem sentlog unconfirmed --db "$DATABASE_URL" --campaign c-42 --step 1 --format csv
    """
    from mailmortem.output import write_rows
    from remediation import reservations
    from remediation.store import open_store

    store = open_store(db, read_only=True)
    try:
        rows = reservations.listed_unconfirmed(store, campaign, step)
    finally:
        store.close()
    if not rows and fmt == "table":
        click.echo("No unconfirmed send reservations.", err=True)
        return
    write_rows(rows, fmt, UNCONFIRMED_COLUMNS if fmt == "table" else None,
               title=f"Unconfirmed send reservations ({len(rows)}): they count as sent")


@sentlog.command("release")
@db_option()
@click.option("--campaign", required=True, help="Campaign of the reservation.")
@click.option("--step", required=True, help="Step of the reservation.")
@click.option("--recipient", help="The person's address (normalised).")
@click.option("--candidate", help="The person's candidate id.")
@click.option("--reason", default="released by hand", show_default=True, help="Kept with the released reservation.")
@apply_option()
def release(db, campaign, step, recipient, candidate, reason, apply):
    """Release a person's unconfirmed send reservation, so they can be emailed again.

    Only when you know no email went out (for example from the provider's own
    dashboard): a released person is sent again by the next claim loop. Refused
    when a send to them is recorded. The released reservation is kept in
    send_reservation_released with your user name and the reason.

    \b
    Examples:
      mailmortem sentlog release --db "$DATABASE_URL" --campaign c-42 --step 1 --recipient jane@acme.com
      mailmortem sentlog release --db "$DATABASE_URL" --campaign c-42 --step 1 --recipient jane@acme.com --apply
    """
    from forensics.textsafe import terminal_safe
    from remediation import audit, reservations
    from remediation.store import open_store

    store = open_store(db, must_exist=True)  # releasing from a store that is not there creates none
    try:
        plan = reservations.release_plan(store, campaign, step, recipient, candidate)
        for row in plan.reservations:
            candidate_note = f" (candidate {row['candidate']})" if row["candidate"] else ""
            click.echo(terminal_safe(f"reservation of {row['recipient']}{candidate_note} for {campaign} step {step} "
                                     f"by {row['worker'] or '?'} at {row['reserved_at']}"), err=True)
        if not apply:
            click.echo("Dry run: nothing changed. Re-run with --apply to release it.", err=True)
            return
        released = reservations.release(store, plan, f"person:{audit.os_user()}", reason)
    finally:
        store.close()
    click.echo(f"released {released} reservation(s): the next claim loop may email this person", err=True)
