"""`mailmortem diagnose` and `mailmortem affected`."""

from __future__ import annotations

import functools
import sys

import click

from mailmortem.cli.options import READING, TZ_HELP, YEAR_HELP, export_options, format_option, given_reading
from mailmortem.cli.window import given_window, note as note_window, window_options
from forensics.ingest.envelopes import NAMES as ENVELOPES, NONE as NO_ENVELOPE
from forensics.ingest.sources import SYNTAXES
from forensics.kinds import KINDS



def case_options(func=None, *, logs_required: bool = True, window: bool = True):
    """The options every command that reads logs shares. How to read envelopes and times (--envelope, --tz,
    --year) reaches open_case through the click context, so the commands' own signatures stay as they are.
    `logs_required=False` (`@case_options(logs_required=False)`): LOGS may be left out, for a command that then
    reads --provider-export alone (mailmortem.cli.provider_only). `window=False`: no --since/--until, for a
    command whose --since means something else (`watch`: which lines already written count)."""
    if func is None:
        return functools.partial(case_options, logs_required=logs_required, window=window)
    decorators = [
        click.argument("paths", nargs=-1, required=logs_required,
                       metavar="LOGS..." if logs_required else "[LOGS]..."),
        click.option("--syntax", type=click.Choice(SYNTAXES), help="Force the syntax of every file (default: detect per file)."),
        click.option("--field", "fields", multiple=True, metavar="CANONICAL=NAME",
                     help="Map one of your keys to a canonical field, e.g. --field recipient=To (repeatable)."),
        click.option("--config", "config", type=click.Path(dir_okay=False), help="TOML file with a [fields] table of the same mappings."),
        click.option("--strict", is_flag=True, help="Stop at the first line that is not a record."),
        click.option("--memory-limit", default=None, metavar="SIZE", help="DuckDB memory limit; spills to disk beyond it (default 1GB)."),
        click.option("--skip-unreadable", is_flag=True,
                     help="Read what can be read and list the files and folders that cannot (default: refuse)."),
        click.option("--envelope", type=click.Choice(ENVELOPES + (NO_ENVELOPE,)), metavar="NAME",
                     help="Read every file as wrapped in this envelope (default: detect per file; none: no "
                          f"envelope). One of: {', '.join(ENVELOPES)}, {NO_ENVELOPE}."),
        click.option("--tz", metavar="ZONE", help=TZ_HELP),
        click.option("--year", type=click.IntRange(1970, 2200), metavar="YEAR", help=YEAR_HELP),
    ]

    @functools.wraps(func)
    def command(*args, envelope=None, tz=None, year=None, **kwargs):
        from forensics.ingest.load import Reading

        click.get_current_context().meta[READING] = Reading(envelope, tz or "UTC", year)
        return func(*args, **kwargs)

    if window:
        command = window_options(command)  # --since/--until: the same on every command that reads logs
    for decorator in reversed(decorators):
        command = decorator(command)
    return command


def open_case(paths, syntax, fields, config, strict, memory_limit, skip_unreadable=False, save=None):
    from forensics.ingest.case import load_case
    from mailmortem.cli.progress import delayed_status
    from forensics.ingest.fields import load_config, parse_overrides

    overrides = load_config(config) if config else {}
    overrides.update(parse_overrides(fields))
    reading = given_reading()
    with delayed_status("reading logs") as progress:
        return load_case(paths, syntax=syntax, field_map=overrides, strict=strict, database=save,
                         memory_limit=memory_limit, progress=progress, skip_unreadable=skip_unreadable,
                         reading=reading, limits=given_window())


@click.command()
@case_options(logs_required=False)
@format_option(choices=("table", "json"))
@click.option("--save", type=click.Path(dir_okay=False), help="Keep the loaded case in this DuckDB file (query it with `mailmortem sql`).")
@export_options(what="Provider send history to reconcile with the log", times=False)
@click.option("--fail-on-duplicates", is_flag=True,
              help="Exit 3 when any duplicate was found, 4 when evidence was lost (4 wins: for scripts and CI).")
def diagnose(paths, syntax, fields, config, strict, memory_limit, skip_unreadable, fmt, save, exports, fail_on_duplicates):
    """Name the cause of every duplicate send in LOGS and list who was hit.

    LOGS are files, folders, globs, .gz files, or - for standard input; many
    files (e.g. one per worker) form one case. A file wrapped by a platform
    (Docker, Kubernetes, journald, syslog, Loki, Cloud Logging, CloudWatch,
    Datadog, Elastic, or a logging framework's prefix) is unwrapped first: the
    envelope each file was read from is shown in "What was read".

    \b
    Examples:
      mailmortem diagnose sample_logs/mixed/
      mailmortem diagnose logs/worker-*.log.gz --format json | jq '.incidents[]'
      mailmortem diagnose export.csv --syntax csv --field recipient=To --field msg_id="Message ID"
      cat mail-send.log | mailmortem diagnose - --fail-on-duplicates
      journalctl -o json -u mailer --since today | mailmortem diagnose -
      mailmortem diagnose /var/log/syslog --year 2026 --tz Europe/Berlin
      mailmortem diagnose --provider-export sendgrid-events.json --fail-on-duplicates

    With --provider-export and no LOGS (the app logs are gone), the provider's
    history alone names who got a campaign step twice; the mechanism needs the logs.
    """
    if not paths:
        from mailmortem.cli import provider_only

        provider_only.require_exports(exports, locals())
        return provider_only.diagnose(exports, fmt, fail_on_duplicates)
    from forensics import affected as people
    from forensics import evidence
    from forensics.findings import build_document
    from forensics.rowjson import COMPACT
    from mailmortem.output import write_document

    case = open_case(paths, syntax, fields, config, strict, memory_limit, skip_unreadable, save)
    document = build_document(case, include_affected=False, logs=paths, exports=exports)
    if exports:
        document["reconciliation"] = _reconcile(case, exports)
        evidence.with_unplaced_provider_sends(document, document["reconciliation"])
    if fmt == "json":
        note_window(document["window"])
        write_document(document, people.json_texts(people.frames(case.con), COMPACT), sys.stdout)
    else:
        from mailmortem.cli.diagnose_view import show_diagnosis

        from forensics.ingest.envelopes import zone_note

        show_diagnosis(document, saved_to=save,
                       zone_note=zone_note([i.envelope for i in case.inputs], case.reading.tz))
    if fail_on_duplicates and not document["complete"]:
        sys.exit(4)  # evidence was lost: "no duplicates" cannot be trusted, and neither can a count
    if fail_on_duplicates and (document["summary"]["duplicated_people"] or document["candidates_at_two_addresses"]
                               or _provider_confirmed(document)):
        sys.exit(3)


def _provider_confirmed(document: dict) -> int:
    """Duplicates the provider's history confirms (with --provider-export): duplicates even where the log lost a send."""
    return document.get("reconciliation", {}).get("provider_confirmed_duplicates", {}).get("count", 0)


def warn_if_incomplete(document: dict) -> None:
    """Lost evidence is said before any list a person might act on (the list may be missing people), and so is a
    --since/--until window (people whose earlier send falls before it are not on the list)."""
    from mailmortem.console import warn

    lost = document["lost_evidence"]
    if lost["files_not_read"]:
        warn(f"{len(lost['files_not_read'])} file(s) or folder(s) were not read: "
             + "; ".join(f"{u['path']} ({u['reason']})" for u in lost["files_not_read"][:5]))
    if lost["lines"]:
        warn(f"{lost['lines']} skipped line(s) look like mail-send records: the list may miss people")
    note_window(document.get("window"))


def _reconcile(case, exports) -> dict:
    from forensics.reconcile import load_provider_sends, reconcile

    load_provider_sends(case.con, exports, window_cut=case.window)
    return reconcile(case.con)


TABLE_PEOPLE = 1_000  # people shown in the table; the full list is one --format csv away


@click.command()
@case_options(logs_required=False)
@format_option()
@click.option("--kind", type=click.Choice(KINDS), help="Only people hit by this kind of incident.")
@click.option("--incident", metavar="ID", help="Only people of this incident (e.g. INC-1).")
@click.option("--campaign", metavar="ID", help="Only this campaign.")
@export_options(what="Without LOGS: provider send history whose duplicates to list", times=False)
def affected(paths, syntax, fields, config, strict, memory_limit, skip_unreadable, fmt, kind, incident, campaign,
             exports):
    """List every person who got a duplicate, one row each (csv makes an exclusion list).

    The table shows the first 1,000 people and counts the rest; csv, json and
    jsonl list everyone. With --provider-export and no LOGS: the people the
    provider's history alone shows (see `diagnose --provider-export`).

    \b
    Examples:
      mailmortem affected logs/ --kind parallel-worker --format csv > apology-exclusions.csv
      mailmortem affected logs/*.log.gz --incident INC-2 --format jsonl
      mailmortem affected --provider-export events.jsonl --format csv > apology-exclusions.csv
    """
    if not paths or exports:
        from mailmortem.cli import provider_only

        provider_only.require_exports(exports, locals())
        return provider_only.affected(exports, fmt, kind, incident, campaign)
    from forensics import affected as chosen
    from forensics.findings import build_document

    case = open_case(paths, syntax, fields, config, strict, memory_limit, skip_unreadable)
    document = build_document(case, include_affected=False)
    chosen.check_filters(case.con, document["incidents"], kind, incident, campaign)
    warn_if_incomplete(document)
    frames = chosen.frames(case.con, kind, incident, campaign)
    if fmt == "table":
        total = sum(people for _id, people in chosen.chosen_incidents(case.con, kind, incident, campaign))
        _affected_table(frames, total)
    else:
        _write_affected(frames, fmt)


def _write_affected(frames, fmt: str) -> None:
    """json, jsonl and csv through the columnar writers, spelled as json.dumps and csv.writer would."""
    from forensics import affected as chosen
    from forensics.rowjson import INDENTED, ONE_LINE
    from mailmortem.output import write_csv_frames, write_json_array, write_json_lines

    if fmt == "csv":
        write_csv_frames(chosen.csv_frames(frames), chosen.CSV_COLUMNS)
    elif fmt == "json":
        write_json_array(chosen.json_texts(frames, INDENTED, depth=1))
    else:
        write_json_lines(chosen.json_texts(frames, ONE_LINE))


def _affected_table(frames, total: int) -> None:
    """The first TABLE_PEOPLE people as a table, of `total` (the chosen incidents' people, never read)."""
    from forensics.affected import CSV_COLUMNS
    from mailmortem.output import write_rows

    shown = []
    for frame in frames:
        shown += [_flat(r) for r in frame.head(TABLE_PEOPLE - len(shown)).to_dicts()]
        if len(shown) >= TABLE_PEOPLE:
            break
    capped = f" (the first {len(shown)}; all with --format csv)" if total > len(shown) else ""
    title = f"{total} people affected{capped}"
    write_rows(shown, "table", columns=CSV_COLUMNS, title=title)


def _flat(row: dict) -> dict:
    sends = row["sends"]
    return {**row, "sends": len(sends), "first_send": sends[0]["ts"], "last_send": sends[-1]["ts"],
            "workers": sorted({s["worker"] or "" for s in sends}), "msg_ids": [s["msg_id"] for s in sends]}
