"""`mailmortem requeue-stale` and `mailmortem audit`: thin skins over remediation.claims / .audit."""

from __future__ import annotations

import click

from mailmortem.cli.options import apply_option, db_hint, db_option, format_option
from mailmortem.cli.reading import reading_options
from forensics.errors import ConfigError

PLAN_COLUMNS = ["lead_id", "email", "claimed_by", "claimed_at", "age_s", "in_sent_log", "new_status"]
TABLE_COLUMNS = ["lead_id", "email", "claimed_by", "age", "new_status"]  # fits 80 columns
AUDIT_COLUMNS = ["row_key", "old_values", "new_values", "db_user", "os_user", "changed_at"]
RUN_COLUMNS = ["run_id", "command", "table_name", "rows_changed", "changed_at", "db_user", "os_user", "undoes"]
STATE_COLUMNS = ["table", "row_key", "state"]
HELD_COLUMNS = ["lead_id", "email", "claimed_by", "age"]


def _duration(ctx, param, value):
    from remediation.claims import parse_duration

    try:
        return parse_duration(value)
    except ConfigError as exc:
        raise click.BadParameter(str(exc)) from None


def _say(line: str) -> None:
    from forensics.textsafe import terminal_safe

    click.echo(terminal_safe(line), err=True)


def _open_postgres(db):
    from remediation.store import is_postgres, open_store, resolve_db, safe_label

    target = resolve_db(db)
    if not is_postgres(target):  # checked before opening: opening would create the DuckDB file
        raise ConfigError(f"{safe_label(target)} is a DuckDB file: requeue-stale and audit --undo need PostgreSQL "
                          "(pass --db postgresql://… or set DATABASE_URL)")
    return open_store(target)


@click.command("requeue-stale")
@db_option("The database the workers use.", duckdb=False)
@click.option("--older-than", required=True, callback=_duration, metavar="DURATION",
              help="Stale = in progress with a claim older than this on the server's clock (45m, 2h, 900s).")
@click.option("--table", default="leads", show_default=True, help="The leads table, as table or schema.table.")
@click.option("--col", "cols", multiple=True, metavar="NAME=COLUMN",
              help="Remap a column: lead_id, email, status, claimed_by, claimed_at; or name the leads' campaign and "
                   "step columns (campaign=…, step=…) that --campaign/--step limit the leads by (repeatable).")
@click.option("--status-queued", default="queued", show_default=True, help="Status value of a waiting lead.")
@click.option("--status-in-progress", default="in-progress", show_default=True, help="Status of a claimed lead.")
@click.option("--status-sent", default="sent", show_default=True, help="Status of a lead that was emailed.")
@click.option("--campaign", help="Only this campaign's leads (their campaign column: --col campaign=…), and only its "
                                 "sent-log rows as proof of a send.")
@click.option("--step", help="Only this step's leads where the leads table has a step column, and only sent-log rows "
                             "of this step (rows of unknown step count for every step).")
@click.option("--all-campaigns", is_flag=True,
              help="With --campaign (--step) on a leads table that has no campaign (step) column: re-queue stale "
                   "leads of every campaign (step) (the plan says so); refused without it.")
@click.option("--no-sends-yet", is_flag=True,
              help="Allow a --campaign/--step that matches no sent-log row (a new campaign): the plan says so.")
@click.option("--claimed-at-zone", metavar="ZONE",
              help="The zone a claim time of type timestamp (no zone) is written in, e.g. UTC; required for one.")
@click.option("--logs", multiple=True, type=click.Path(exists=True), metavar="PATH",
              help="Logs to measure the worst batch (claim→release) against --older-than (repeatable); read as "
                   "the reading options below say, as diagnose reads them.")
@reading_options
@click.option("--sample", default=10, show_default=True, type=click.IntRange(0, 10_000),
              help="Planned changes shown in the table view.")
@click.option("--show-sql", is_flag=True, help="Also print the plan's SQL statements (on stderr).")
@click.option("--max-changes", type=click.IntRange(0), metavar="N",
              help="With --apply: refuse (change nothing) if the plan is larger than N rows, e.g. the dry run's.")
@format_option()
@apply_option()
def requeue_stale(db, older_than, table, cols, status_queued, status_in_progress, status_sent, campaign, step,
                  all_campaigns, no_sends_yet, claimed_at_zone, logs, read, sample, show_sql, max_changes, fmt,
                  apply):
    """Put stale claims back to queued — or mark them sent when the sent-log proves the email went out.

    Stale means in progress with a claim older than --older-than, on the database
    server's clock. Without --apply it prints the plan and changes nothing; with
    --apply it carries out that plan in one transaction: rows a live worker holds
    are skipped (FOR UPDATE SKIP LOCKED), every update re-checks that the claim is
    unchanged and still old, and each change is audited (see `mailmortem audit`).

    \b
    Examples:
      mailmortem requeue-stale --db "$DATABASE_URL" --older-than 45m
      mailmortem requeue-stale --db "$DATABASE_URL" --older-than 45m --apply --max-changes 40
      mailmortem requeue-stale --older-than 2h --table outreach.leads --col claimed_at=locked_at \\
          --col status=state --status-in-progress claimed
      mailmortem requeue-stale --older-than 45m --logs logs/ --format json
      mailmortem requeue-stale --older-than 45m --logs export.csv --field recipient=To --since 6h
      mailmortem requeue-stale --older-than 45m --show-sql
      mailmortem requeue-stale --older-than 45m --campaign c-42 --col campaign=campaign_id
    """
    from remediation import claims

    leads = claims.leads_table(table, cols, status_queued, status_in_progress, status_sent)
    if not logs and read.given_flags():
        raise click.UsageError(f"{', '.join(read.given_flags())} say how to read --logs, which were not given")
    worst = _check_lease(older_than, logs, read) if logs else None
    store = _open_postgres(db)
    try:
        plan, result = claims.requeue_stale(store.conn, leads, older_than, apply, campaign, step, max_changes,
                                            claimed_at_zone=claimed_at_zone, no_sends_yet=no_sends_yet,
                                            all_campaigns=all_campaigns, on_commit=_report_commit)
        if show_sql:
            _print_sql(claims.plan_statements(store.conn, plan))
    finally:
        store.close()
    _report_plan(plan, store.label, apply)
    if result is not None:
        _report_result(result)
    _render(plan, result, worst, fmt, sample)


def _print_sql(statements: list[dict]) -> None:
    for number, statement in enumerate(statements, 1):
        rows = f" ({statement['rows']} rows)" if statement["rows"] is not None else ""
        _say(f"-- {number}. {statement['query']}{rows}: {statement['description']}")
        for line in statement["sql"].splitlines():
            _say(line)


def _check_lease(older_than: float, logs, read) -> dict | None:
    from mailmortem.console import warn
    from remediation.errors import RefusedError
    from remediation import claims

    try:
        worst = claims.worst_batch_from_logs(list(logs), read)
    except RefusedError as exc:
        warn(f"not checking the lease against the logs: {exc}")
        return None
    if worst is None:
        warn("no claim followed by a release of the same shard in the logs: cannot measure the worst batch")
        return None
    from forensics.jsonfmt import iso_utc

    claimed = iso_utc(worst["claimed_at"]) if hasattr(worst["claimed_at"], "isoformat") else worst["claimed_at"]
    _say(f"Worst batch in the logs: {float(worst['batch_s']):.0f}s (worker {worst['worker']}, "
         f"shard {worst['shard']}, claimed {claimed}).")
    for message in claims.lease_warnings(older_than, worst):
        warn(message)
    return worst


def _report_commit(result) -> None:
    _say(f"Committed {result.run_id}: {len(result.to_sent)} marked sent, {len(result.to_queued)} re-queued.")


def _report_plan(plan, label: str, apply: bool) -> None:
    counts = plan.counts
    _say(f"Plan {plan.run_id} for {label}, table {plan.table.table}: {counts['stale']} claims in "
         f"'{plan.table.in_progress}' older than {plan.older_than_s:g}s (server clock): "
         f"{counts['to_sent']} → '{plan.table.sent}' (in the sent-log), "
         f"{counts['to_queued']} → '{plan.table.queued}'.")
    if plan.without_claim_time:
        from mailmortem.console import warn

        warn(f"{plan.without_claim_time} rows are '{plan.table.in_progress}' with no "
             f"{plan.table.col('claimed_at')}: they have no age, so they are left alone; look at them by hand")
    for note in plan.lead_notes:
        _say(note + ".")
    if _no_step_rows_count(plan):
        _say(f"Sent-log rows without a step (backfilled with --no-step) count as proof of a send for every step, "
             f"--step {plan.filters[1]!r} included.")
    if plan.scope and plan.scope.no_sends_yet:
        _say(f"No sends yet: {plan.scope.no_sends_yet} matches no sent-log row (--no-sends-yet), so no stale "
             "claim is found sent and every one is re-queued.")
    _report_unconfirmed(plan)
    if not apply:
        _say("Dry run: nothing changed. Re-run with --apply to carry out exactly this plan.")


def _no_step_rows_count(plan) -> bool:
    """Does the --step filter's scope take in sent-log rows of unknown step ('')?"""
    from forensics.addresses import normalize_label

    return bool(plan.scope and plan.filters[1] is not None
                and any(normalize_label(s) == "" for s in plan.scope.steps))


def _report_unconfirmed(plan) -> None:
    if not (plan.held or plan.unconfirmed):
        return
    from mailmortem.console import warn

    if plan.held:
        warn(f"{len(plan.held)} stale claims are held, left '{plan.table.in_progress}': their person has an "
             "unconfirmed send reservation (an email may have gone out), so they count as sent but are not "
             "marked sent")
    warn(f"{plan.unconfirmed} unconfirmed send reservations: `mailmortem sentlog unconfirmed` lists them; a "
         "backfill-sentlog that shows no send releases them, or `mailmortem sentlog release` by hand")


def _report_result(result) -> None:
    counts = result.counts
    _say(f"Applied {result.run_id}: {counts['to_sent']} marked sent, {counts['to_queued']} re-queued; "
         f"{counts['skipped_locked']} skipped (locked by a live transaction), "
         f"{counts['left_changed']} left alone (claim renewed or finished since the plan)"
         + (f", {counts['sent_since_plan']} left in progress: sent since the plan (the sent-log now holds them; "
            "the next run marks them sent)." if counts["sent_since_plan"] else "."))
    if counts["to_sent"] or counts["to_queued"]:
        db = click.get_current_context().params.get("db")
        _say(f"Audit: mailmortem audit --run {result.run_id}{db_hint(db)}   (add --undo to revert)")


def _outcomes(result) -> dict:
    if result is None:
        return {}
    outcome = {key: "sent" for key in result.to_sent}
    outcome.update({key: "queued" for key in result.to_queued})
    outcome.update({key: "skipped-locked" for key in result.skipped_locked})
    outcome.update({key: "left-changed" for key in result.left_changed})
    outcome.update({key: "sent-since-plan" for key in result.sent_since_plan})
    return outcome


def _render(plan, result, worst, fmt, sample) -> None:
    from mailmortem.output import write_json, write_rows

    outcome = _outcomes(result)
    rows = plan.rows(None if fmt != "table" else sample)
    columns = (TABLE_COLUMNS if fmt == "table" else PLAN_COLUMNS) + (["outcome"] if result is not None else [])
    for row in rows:
        row["age"] = _age(row["age_s"])
        if result is not None:
            row["outcome"] = outcome.get(row["lead_id"], "")
    if fmt == "json":
        write_json({"run_id": plan.run_id, "applied": result is not None, "table": str(plan.table.table),
                    "older_than_s": plan.older_than_s, "counts": plan.counts,
                    "result": result.counts if result else None, "worst_batch": worst, "changes": rows,
                    "held": plan.held_rows(), "unconfirmed_reservations": plan.unconfirmed})
    elif rows or fmt != "table":
        write_rows(rows, fmt, columns, title=f"Planned changes (first {len(rows)} of {len(plan.leads)})")
    if plan.held and fmt == "table":
        held = [dict(r, age=_age(r["age_s"])) for r in plan.held_rows()[:sample]]
        write_rows(held, fmt, HELD_COLUMNS, title=f"Held: unconfirmed send reservation (first {len(held)} of "
                                                  f"{len(plan.held)})")


def _age(seconds: float) -> str:
    minutes = int(seconds // 60)
    return f"{minutes // 60}h{minutes % 60:02d}m" if minutes >= 60 else f"{minutes}m{int(seconds % 60):02d}s"


@click.command("audit")
@db_option("The database the remediation ran against (read; never created).")
@click.option("--run", "run_id", metavar="RUN_ID", help="The run to show (default: list recent runs).")
@click.option("--undo", is_flag=True, help="Restore the run's rows that nobody has touched since (dry run).")
@click.option("--limit", default=20, show_default=True, type=click.IntRange(1, 10_000), help="Runs listed.")
@format_option()
@apply_option()
def audit(db, run_id, undo, limit, fmt, apply):
    """Show what a remediation run changed, and undo it.

    Without --run, lists recent runs. With --run, every row the run changed: key,
    old → new values, database and OS user, when. --undo restores the old values of
    the rows that still hold the run's new values and reports the ones it leaves
    (changed since, already restored, gone); add --apply to do it, in one
    transaction, itself audited. Runs of requeue-stale (PostgreSQL), ab-contamination
    --apply and backfill-sentlog (PostgreSQL or DuckDB) are listed; undoing a backfill
    or an A/B apply is refused (it would make people "not sent" or change their arm).

    \b
    Examples:
      mailmortem audit --db "$DATABASE_URL"
      mailmortem audit --db "$DATABASE_URL" --run 2026-11-30T10:12:03Z-7f3a
      mailmortem audit --db "$DATABASE_URL" --run 2026-11-30T10:12:03Z-7f3a --undo
      mailmortem audit --db "$DATABASE_URL" --run 2026-11-30T10:12:03Z-7f3a --undo --apply
    """
    if (undo or apply) and not run_id:
        raise click.UsageError("--undo and --apply need --run RUN_ID")
    if apply and not undo:
        raise click.UsageError("--apply only goes with --undo")
    from remediation.store import open_store

    store = open_store(db, read_only=True)  # a read (undo needs PostgreSQL and says so)
    try:
        if undo:
            _undo(store.conn, run_id, apply, fmt)
        elif run_id:
            _show_run(store.conn, run_id, fmt)
        else:
            _list_runs(store.conn, limit, fmt)
    finally:
        store.close()


def _list_runs(conn, limit, fmt) -> None:
    from mailmortem.output import write_rows
    from remediation import audit as audit_lib

    runs = audit_lib.recent_runs(conn, limit)
    if not runs and fmt == "table":
        _say("No remediation runs recorded in this database.")
        return
    write_rows(runs, fmt, RUN_COLUMNS, title="Recent remediation runs")


def _show_run(conn, run_id, fmt) -> None:
    from remediation.errors import RefusedError
    from mailmortem.output import to_json, write_rows
    from remediation import audit as audit_lib

    rows = audit_lib.run_rows(conn, run_id)
    if not rows:
        raise RefusedError(f"no audit rows for run {run_id}: list runs with `mailmortem audit`")
    first = rows[0]
    _say(f"Run {run_id}: {first['command']} changed {len(rows)} rows of {first['table_name']} "
         f"(key {first['key_column']}) as {first['db_user']} / {first['os_user']}.")
    if fmt == "table":
        rows = [dict(r, old_values=to_json(r["old_values"], None), new_values=to_json(r["new_values"], None))
                for r in rows]
    write_rows(rows, fmt, AUDIT_COLUMNS if fmt == "table" else list(audit_lib.AUDIT_COLUMNS), title=None)


def _undo(conn, run_id, apply, fmt) -> None:
    from mailmortem.output import write_rows
    from remediation import audit as audit_lib

    result = audit_lib.undo(conn, run_id, apply)
    counts = ", ".join(f"{n} {state}" for state, n in sorted(result.summary.items()))
    if apply:
        _say(f"Undo {result.undo_run_id} of {run_id}: {counts}.")
        rows = result.restored + result.left
    else:
        _say(f"Undo plan for {run_id}: {counts}. Dry run: nothing changed; add --apply to restore.")
        rows = result.preview
    write_rows(rows, fmt, STATE_COLUMNS, title=f"Undo of {run_id}")
