"""`backfill-sentlog` and `sentlog check`: the durable record of who was really emailed."""

from __future__ import annotations

import sys

import click

from mailmortem.cli.options import db_option, export_options


def _say_target(db: str | None) -> None:
    from remediation.store import DEFAULT_DUCKDB

    if not db:
        click.echo(f"writing to ./{DEFAULT_DUCKDB} (no --db or DATABASE_URL given)", err=True)


@click.command("backfill-sentlog")
@export_options(required=True, what="Export")
@db_option()
@click.option("--format", "fmt", type=click.Choice(("table", "json")), default="table", show_default=True)
@click.option("--dry-run", is_flag=True, help="Read and report; write nothing.")
def backfill_sentlog(exports, db, fmt, dry_run):
    """Rebuild who was really emailed from provider history into the durable sent_log table.

    Reads SendGrid, Mailgun, SES, Postmark, Resend, Brevo and Postfix exports (each file
    detected by its provider's own fields), keeps the events that prove a send, and inserts
    one row per (message, recipient) in ONE transaction; a re-run inserts nothing.

    \b
    Examples:
      mailmortem backfill-sentlog --provider-export sendgrid-events/ --db "$DATABASE_URL"
      mailmortem backfill-sentlog --provider-export ses-firehose-2026-11-28.jsonl.gz
      mailmortem backfill-sentlog --provider-export export.csv --provider csv \\
          --map recipient=To --map msg_id="Message ID"
      mailmortem backfill-sentlog --provider-export /var/log/maillog --year 2026 --tz Europe/Berlin
    """
    from remediation import sentlog
    from remediation.store import open_store

    read = exports.read()
    if dry_run:
        summary = sentlog.backfill_exports(None, read, dry_run=True)
        summary["target"] = None
    else:
        _say_target(db)
        store = open_store(db)
        try:
            summary = sentlog.backfill_exports(store, read)
            summary["target"] = store.label
        finally:
            store.close()
    _render_summary(summary, fmt)


def _render_summary(summary: dict, fmt: str) -> None:
    from mailmortem.output import write_json, write_rows

    if fmt == "json":
        write_json(summary)
        return
    counts = [{"what": k.replace("_", " "), "count": "-" if summary[k] is None else summary[k]}
              for k in ("files", "rows_read", "sends_found", "inserted", "already_present")]
    counts.append({"what": "malformed", "count": len(summary["malformed"])})
    write_rows(counts, "table", ["what", "count"], title=f"backfill-sentlog → {summary['target'] or 'dry run'}")
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


@click.group("sentlog")
def sentlog():
    """Ask the durable sent_log before sending.

    \b
    Examples:
      mailmortem sentlog check --db "$DATABASE_URL" --campaign c-42 --recipient Jane@Acme.com
      mailmortem sentlog check --campaign c-42 --step 2 --recipient jane@acme.com || echo "send it"
    """


@sentlog.command("check")
@db_option()
@click.option("--campaign", required=True, help="Campaign id as recorded in sent_log.")
@click.option("--step", help="Sequence step; omitted = any step of the campaign.")
@click.option("--recipient", required=True, help="Address; normalised the same way as diagnose does.")
def check(db, campaign, step, recipient):
    """Exit 3 if RECIPIENT was already sent CAMPAIGN (and STEP), 0 if not; prints one line.

    \b
    Examples:
      mailmortem sentlog check --db "$DATABASE_URL" --campaign c-42 --recipient Jane@Acme.com
      mailmortem sentlog check --db mailmortem.duckdb --campaign c-42 --step 1 --recipient jane@acme.com
    """
    from forensics.textsafe import terminal_safe
    from remediation import sentlog as store_sentlog
    from remediation.store import open_store

    store = open_store(db)
    try:
        store_sentlog.ensure_schema(store)
        hit = store_sentlog.last_send(store, campaign, step, recipient)
    finally:
        store.close()
    who = terminal_safe(recipient.strip().lower())
    scope = terminal_safe(campaign + (f" step {step}" if step else ""))
    if hit:
        when = hit["sent_at"].isoformat() if hit.get("sent_at") else "unknown time"
        click.echo(f"already sent: {who} got {scope} (msg {terminal_safe(hit['msg_id'])}, {when})")
        sys.exit(3)
    click.echo(f"not sent: {who} has no record for {scope}")
