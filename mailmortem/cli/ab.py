"""`mailmortem ab-contamination` and `mailmortem ab-assign`: thin skins over remediation.ab."""

from __future__ import annotations

import click

from mailmortem.cli.options import apply_option, db_option, format_option, output_option
from mailmortem.cli.reading import case_options, note_reading, open_case
from forensics.errors import ConfigError

TABLE_LIMIT = 50  # contaminated people shown in a terminal table; csv/json carry them all
ARM_COLUMNS = ["variant", "weight", "units_all", "units_clean", "expected_clean", "units_first_seen", "sends"]
LIST_COLUMNS = ["unit", "variants", "first_variant", "sends", "first_seen", "last_seen", "recipients"]
CSV_COLUMNS = ["test_id", "unit", "reason", "variants", "first_variant", "sends", "first_seen", "last_seen",
               "recipients"]


def _parsed(parser):
    """A click callback that turns a library parser's ConfigError into a usage error (exit 2)."""
    def callback(ctx, param, value):
        if value is None:
            return None
        try:
            return parser(value)
        except ConfigError as exc:
            raise click.BadParameter(str(exc).split(": ", 1)[-1]) from None
    return callback


def _weights(value):
    from forensics.ab import parse_weights

    return parse_weights(value)


def _arms(value):
    from forensics.ab import parse_arms

    return parse_arms(value)


weights_option = click.option(
    "--weights", callback=_parsed(_weights), metavar="ARM=W,…",
    help="Expected split, e.g. A=50,B=50 (default: equal over the arms seen).")


@click.command("ab-contamination")
@case_options
@click.option("--test-id", required=True, help="The A/B test to check (the logs' test_id / experiment).")
@weights_option
@format_option()
@db_option("Where --apply writes ab_exclusions and ab_assignments.")
@apply_option()
@output_option("the report or exclusion list")
def ab_contamination(paths, read, test_id, weights, fmt, db, apply, out):
    """Find people who received more than one variant of an A/B test, and exclude them.

    The unit is the candidate (its id, else its normalised address). Reports per-arm
    counts of all vs clean people, the contamination rate (a warning at 1 % and 10
    people), a sample-ratio-mismatch chi-squared test on the clean counts (flagged at
    p < 0.001) and the contaminated people. --format csv is a ready exclusion list.
    With --db/--apply it plans (and then writes, in one transaction) ab_exclusions and
    sticky ab_assignments backfilled from each person's first-seen variant; rows already
    there are never changed.

    \b
    Examples:
      mailmortem ab-contamination --test-id subj-2026-11 logs/
      mailmortem ab-contamination --test-id subj-2026-11 logs/ --weights A=90,B=10
      mailmortem ab-contamination --test-id subj-2026-11 logs/ --format csv -o exclude.csv
      mailmortem ab-contamination --test-id subj-2026-11 logs/ --db "$DATABASE_URL"          # plan only
      mailmortem ab-contamination --test-id subj-2026-11 logs/ --db "$DATABASE_URL" --apply
    """
    from forensics.ab import analyse
    from remediation import ab

    from mailmortem.output import to_file

    case = open_case(paths, read)
    note_reading(case)
    if case.window:
        from mailmortem.cli.window import note

        note(case.window.to_json())
    report = analyse(case.con, test_id, weights)
    _warn_about(report)
    plan = applied = None
    if db or apply:
        plan = ab.build_plan(case.con, report, ab.new_run_id())
        plan, applied = _plan_then_apply(plan, db, apply)
    with to_file(out):
        _render_report(report, fmt, plan, applied)


def _warn_about(report) -> None:
    from mailmortem.console import warn

    if report.contamination_warning:
        warn(f"{report.contaminated} of {report.units} people ({report.contamination_rate:.1%}) in test "
             f"{report.test_id} received more than one variant: exclude them before reading the results")
    srm = report.srm
    if srm and srm["mismatch"]:
        warn(f"sample-ratio mismatch in test {report.test_id}: clean counts {_pairs(srm['arms'], srm['observed'])} "
             f"vs expected {_pairs(srm['arms'], srm['expected'])} (chi-squared p = {srm['p_value']:.3g} < 0.001)")
    elif srm and srm["small_sample"]:
        warn("an arm expects fewer than 5 clean people: the chi-squared test is unreliable at this size")
    if report.sends_without_variant or report.sends_without_unit:
        warn(f"{report.sends_without_variant} sends of test {report.test_id} carry no variant and "
             f"{report.sends_without_unit} name no person; they are left out")


def _pairs(arms, values) -> str:
    return ", ".join(f"{arm}={value:.4g}" for arm, value in zip(arms, values))


def _plan_then_apply(plan, db, apply):
    from remediation import ab
    from remediation.store import open_store, resolve_db, safe_label

    plan = _against_store(plan, db)
    _say(_plan_text(plan, safe_label(resolve_db(db))), err=True)
    if not apply:
        _say(["Dry run: nothing was written. Re-run with --apply to carry out exactly this plan."], err=True)
        return plan, None
    store = open_store(db)
    try:
        applied = ab.apply_plan(store, plan)
    finally:
        store.close()
    _say([_applied_text(applied)], err=True)
    return plan, applied


def _against_store(plan, db):
    """The plan without the rows the store already holds (a store that does not exist yet holds none)."""
    from remediation import ab
    from remediation.store import existing_target, open_store

    if existing_target(db) is None:
        return plan
    store = open_store(db, read_only=True)
    try:
        return ab.pending(store, plan)
    finally:
        store.close()


def _say(lines: list[str], err: bool = False) -> None:
    from forensics.textsafe import terminal_safe

    for line in lines:
        click.echo(terminal_safe(line), err=err)


def _plan_text(plan, target: str) -> list[str]:
    return [f"Plan {plan.run_id} for {target} (one transaction; rows already there are kept as they are):",
            f"  ab_exclusions   + {plan.exclusions.num_rows} contaminated people of test {plan.test_id}",
            f"  ab_assignments  + {plan.assignments.num_rows} sticky assignments from each person's "
            "first-seen variant" + (f"; {plan.kept} already stored, kept" if plan.kept else "")]


def _applied_text(applied) -> str:
    kept = ""
    if applied.assignments_existing:
        kept = (f"; {applied.assignments_existing} people already had an assignment, kept"
                f" ({applied.assignments_differing} differ from their first-seen variant)")
    return (f"Applied {applied.run_id} to {applied.target}: {applied.exclusions_written} exclusions and "
            f"{applied.assignments_written} assignments written{kept}.")


def _render_report(report, fmt, plan, applied) -> None:
    from mailmortem.output import write_json, write_rows

    if fmt == "json":
        document = report.to_dict()
        document["plan"] = plan.summary() if plan else None
        document["applied"] = applied.to_dict() if applied else None
        write_json(document)
    elif fmt in ("csv", "jsonl"):
        rows = [dict(row, test_id=report.test_id, reason="multiple-variants") for row in report.contaminated_units]
        write_rows([_printable(row) for row in rows] if fmt == "csv" else rows, fmt, CSV_COLUMNS)
    else:
        _render_tables(report)


def _printable(row: dict) -> dict:
    """Escape control characters too: a CSV is often looked at with cat before a spreadsheet opens it."""
    from forensics.textsafe import terminal_safe

    def safe(value):
        if isinstance(value, str):
            return terminal_safe(value)
        return [safe(v) for v in value] if isinstance(value, list) else value

    return {key: safe(value) for key, value in row.items()}


def _render_tables(report) -> None:
    from mailmortem.output import write_rows

    _say([_headline(report)])
    write_rows(report.arms, "table", ARM_COLUMNS, title="Arms (people)")
    shown = report.contaminated_units[:TABLE_LIMIT]
    if shown:
        write_rows(shown, "table", LIST_COLUMNS, title="Contaminated people")
    hidden = report.contaminated - len(shown)
    if hidden > 0:
        _say([f"… and {hidden} more (use --format csv for the full exclusion list)"])


def _headline(report) -> str:
    srm = report.srm
    test = (f"SRM chi-squared {srm['chi2']:.2f}, {srm['dof']} dof, p = {srm['p_value']:.3g}"
            + (" (MISMATCH)" if srm["mismatch"] else "")) if srm else "no SRM test (it needs two arms with clean people)"
    return (f"Test {report.test_id}: {report.units} people, {report.contaminated} contaminated "
            f"({report.contamination_rate:.1%}); {test}")


@click.command("ab-assign")
@click.option("--test-id", required=True, help="The A/B test.")
@click.option("--candidate", required=True, help="Candidate id (or address) to assign.")
@click.option("--arms", callback=_parsed(_arms), metavar="A,B,…", help="Arms (default A,B, or those of --weights).")
@weights_option
@click.option("--salt", default="", show_default=True, help="Extra hash input; a new salt reshuffles everyone.")
@format_option()
@click.option("--db", "db", envvar="DATABASE_URL", show_envvar=True, metavar="URL|PATH",
              help="Consult ab_assignments here first: a stored assignment always wins (read-only; "
                   "default ./mailmortem.duckdb when it exists).")
def ab_assign(test_id, candidate, arms, weights, salt, fmt, db):
    """Give the deterministic arm of a candidate: the same answer every time, on every machine.

    The arm comes from sha256(salt|test|candidate) mapped to [0, 1) and cut by the
    cumulative weights of the arms in sorted order, so it needs no state and never
    flips. An assignment stored in ab_assignments (e.g. backfilled by
    ab-contamination --apply) wins: in --db, or without it in ./mailmortem.duckdb
    when that file exists (the store ab-contamination --apply writes by default).

    \b
    Examples:
      mailmortem ab-assign --test-id subj-2026-11 --candidate cand-8812
      mailmortem ab-assign --test-id subj-2026-11 --candidate jane@acme.com --weights A=90,B=10
      mailmortem ab-assign --test-id subj-2026-11 --candidate cand-8812 --db "$DATABASE_URL" --format json
    """
    from mailmortem.output import write_json, write_rows
    from forensics.ab import normalize_unit, resolve_weights

    if not test_id.strip():
        raise ConfigError("--test-id is empty")
    row = _assignment(test_id.strip(), normalize_unit(candidate), resolve_weights(arms, weights), salt, db)
    if fmt == "json":
        write_json(row)
    else:
        write_rows([_printable(row) if fmt == "csv" else row], fmt, ["test_id", "unit", "variant", "source"])


def _assignment(test_id: str, unit: str, weights: dict, salt: str, db: str | None) -> dict:
    from forensics.ab import arm_for_fraction, hash_fraction

    from remediation.store import existing_target

    # --db (or DATABASE_URL) must be there; without it the default ./mailmortem.duckdb is read when it exists
    stored = _stored(test_id, unit, db) if db or existing_target(None) else None
    if stored:
        return {"test_id": test_id, "unit": unit, "variant": stored["variant"], "source": "stored",
                "assigned_at": stored["assigned_at"], "stored_source": stored["source"]}
    fraction = hash_fraction(salt, test_id, unit)
    return {"test_id": test_id, "unit": unit, "variant": arm_for_fraction(fraction, weights), "source": "hash",
            "fraction": fraction}


def _stored(test_id: str, unit: str, db: str) -> dict | None:
    from remediation import ab
    from remediation.store import open_store

    store = open_store(db, read_only=True)
    try:
        return ab.stored_assignment(store, test_id, unit)
    finally:
        store.close()
