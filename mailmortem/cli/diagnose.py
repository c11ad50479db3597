"""`mailmortem diagnose`, and its view for people: what was read, the summary, one block per incident."""

from __future__ import annotations

import sys

import click

from mailmortem.cli.options import format_option
from mailmortem.cli.reading import case_options, export_options, note_reading, open_case
from mailmortem.cli.window import note as note_window
from forensics.ingest.window import headline as window_headline, read_lines as window_lines
from forensics.textsafe import terminal_safe as safe


@click.command()
@case_options(logs_required=False)
@format_option(choices=("table", "json"))
@click.option("--save", type=click.Path(dir_okay=False), help="Keep the loaded case in this DuckDB file (query it with `mailmortem sql`).")
@export_options(what="Provider send history to reconcile with the log", times=False)
@click.option("--fail-on-duplicates", is_flag=True,
              help="Exit 3 when any duplicate was found, 4 when evidence was lost (4 wins: for scripts and CI).")
def diagnose(paths, read, fmt, save, exports, fail_on_duplicates):
    """Name the cause of every duplicate send in LOGS and list who was hit.

    LOGS are files, folders, globs, .gz files, or - for standard input; many
    files (e.g. one per worker) form one case. A file wrapped by a platform
    (Docker, Kubernetes, journald, syslog, Loki, Cloud Logging, CloudWatch,
    Datadog, Elastic, or a logging framework's prefix) is unwrapped first: the
    envelope each file was read from is shown in "What was read". A provider's
    export among LOGS is read as the provider's history (as --provider-export),
    and a mailmortem.toml in the working directory as --config; both are said
    there too. The next steps printed repeat the reading options given.

    \b
    Examples:
      mailmortem diagnose sample_logs/mixed/
      mailmortem diagnose logs/worker-*.log.gz --format json | jq '.incidents[]'
      mailmortem diagnose export.csv --syntax csv --field recipient=To --field msg_id="Message ID"
      mailmortem diagnose app.log --event send="outreach email sent" --field step=seq
      cat mail-send.log | mailmortem diagnose - --fail-on-duplicates
      journalctl -o json -u mailer --since today | mailmortem diagnose -
      mailmortem diagnose /var/log/syslog --year 2026 --tz Europe/Berlin
      mailmortem diagnose --provider-export sendgrid-events.json --fail-on-duplicates

    With --provider-export and no LOGS (the app logs are gone), the provider's
    history alone names who got a campaign step twice; the mechanism needs the logs.
    """
    if not paths:
        from mailmortem.cli import provider_only

        provider_only.require_exports(exports, paths, read, save)
        return provider_only.diagnose(exports, fmt, fail_on_duplicates)
    from forensics import affected as people
    from forensics import evidence
    from forensics.findings import build_document
    from forensics.rowjson import COMPACT
    from mailmortem.output import write_document

    case = open_case(paths, read, save)
    exports = exports.with_found(case.provider_exports)  # an export among the LOGS is the provider's history
    document = build_document(case, include_affected=False, logs=paths, exports=exports)
    if exports.paths or exports.found:  # given, or found among the LOGS
        document["reconciliation"] = _reconcile(case, exports)
        evidence.with_unplaced_provider_sends(document, document["reconciliation"])
    if fmt == "json":
        note_window(document["window"])
        note_reading(case)
        write_document(document, people.json_texts(people.frames(case.con), COMPACT), sys.stdout)
    else:
        show_diagnosis(document, saved_to=save, tz=case.reading.tz)
    if fail_on_duplicates and not document["complete"]:
        sys.exit(4)  # evidence was lost: "no duplicates" cannot be trusted, and neither can a count
    if fail_on_duplicates and (document["summary"]["duplicated_people"] or document["candidates_at_two_addresses"]
                               or _provider_confirmed(document)):
        sys.exit(3)


def _provider_confirmed(document: dict) -> int:
    """Duplicates the provider's history confirms (with --provider-export): duplicates even where the log lost a send."""
    return document.get("reconciliation", {}).get("provider_confirmed_duplicates", {}).get("count", 0)


def _reconcile(case, exports) -> dict:
    from forensics.reconcile import load_provider_sends, reconcile

    load_provider_sends(case.con, exports, window_cut=case.window)
    return reconcile(case.con)


# Incidents shown in full; the rest get a line each so a diagnosis stays within one screen.
FULL_INCIDENTS = 4


def _inputs_table(inputs: list[dict]):
    from rich.table import Table

    table = Table(title="What was read", title_justify="left", box=None, pad_edge=False)
    for column in ("file", "envelope", "syntax", "lines", "records", "skipped", "first skipped"):
        table.add_column(column, justify="right" if column in ("lines", "records", "skipped") else "left",
                         no_wrap=column == "file")
    shown = inputs[:8]
    for i in shown:
        first = ",".join(str(n) for n in i["first_skipped_lines"][:3]) + ("…" if i["skipped"] > 3 else "")
        envelope = i["envelope"] or "none"
        if i["envelope"] and i["sender"]:
            envelope += f" ({i['sender']})"  # worker ← the envelope's fields that named the senders
        table.add_row(safe(_short_path(i["path"])), envelope, i["syntax"], f"{i['lines']:,}", f"{i['records']:,}", f"{i['skipped']:,}", first)
    if len(inputs) > len(shown):
        rest = inputs[len(shown):]
        table.add_row(f"… {len(rest)} more files", "", "", f"{sum(i['lines'] for i in rest):,}",
                      f"{sum(i['records'] for i in rest):,}", f"{sum(i['skipped'] for i in rest):,}", "")
    return table


def _short_path(path: str, limit: int = 34) -> str:
    return path if len(path) <= limit else "…" + path[-(limit - 1):]


def _summary_lines(summary: dict) -> list[str]:
    kinds = ", ".join(f"{kind} {n:,}" for kind, n in summary["by_kind"].items() if n) or "none"
    return [f"Sends {summary['sends']:,}   people {summary['people']:,}   duplicated people "
            f"{summary['duplicated_people']:,}   extra sends {summary['extra_sends']:,}",
            f"By kind: {kinds}"]


def _short_list(values: list[str], limit: int = 4) -> str:
    shown = ", ".join(safe(v) for v in values[:limit])
    return shown + (f" +{len(values) - limit} more" if len(values) > limit else "")


def people_count(count: int) -> str:
    return "1 person" if count == 1 else f"{count:,} people"


def _window(first: str, last: str) -> str:
    # Same day: show the date once.
    if first[:10] == last[:10]:
        return f"{first[:10]} {first[11:19]} → {last[11:19]} UTC"
    return f"{first[:19]}Z → {last[:19]}Z"


def _incident_block(incident: dict):
    from rich.text import Text

    text = Text()
    cause = f" (cause: {incident['cause']})" if incident.get("cause") else ""
    text.append(f"{incident['id']}  {incident['kind']}{cause}", style="bold")
    scope = f"campaign {safe(incident['campaign'])} step {safe(incident['step'])}"
    if incident["test_id"]:
        scope += f", test {safe(incident['test_id'])}"
    text.append(f"   {scope}   {people_count(incident['people'])}, {incident['extra_sends']:,} extra sends, "
                f"confidence {incident['confidence']:.2f}\n")
    where = f"workers {_short_list(incident['workers'])}"
    if incident["shards"]:
        where += f"   shards {_short_list(incident['shards'])}"
    text.append(f"  {_window(incident['first_send'], incident['last_send'])}   {where}\n")
    for line in incident["evidence"]:
        text.append(f"  • {safe(line)}\n")
    fix, *commands = incident["remediation"]
    text.append(f"  fix: {safe(fix)}\n")
    for command in commands:
        text.append(f"  next: {safe(command)}\n")
    return text


class _Page(list):
    """What the view says, in order: the objects and options of each Console.print, said at once by
    mailmortem.console.show."""

    def print(self, *objects, **options) -> None:
        self.append((objects, options))


def show_diagnosis(document: dict, saved_to: str | None = None, tz: str | None = None) -> None:
    """The diagnosis for people; `tz` (what times without a zone were read in) adds the zone note."""
    from forensics.findings import reading_notes
    from forensics.ingest.envelopes import zone_note
    from mailmortem.console import show

    page = _Page()
    missed = _missed_by_log(document)
    if missed["count"]:  # the provider saw duplicates the log cannot show: said before anything else
        page.print(_missed_headline(missed), soft_wrap=True)
    if not document["complete"]:
        page.print(_lost_headline(document["lost_evidence"]), soft_wrap=True)
    window = document.get("window")  # --since/--until: who the window cannot see, said before any figure
    if window:
        page.print(window_headline(window), soft_wrap=True)
    page.print(_inputs_table(document["inputs"]))
    if "vocabulary" in document:  # only when more than the alias table decided the reading
        from forensics.ingest.refusal import read_as_lines

        page.print("\n".join(safe(line) for line in read_as_lines(document["vocabulary"])), soft_wrap=True)
    for line in window_lines(window):
        page.print(line, soft_wrap=True)
    skipped = sum(i["skipped"] for i in document["inputs"])
    if skipped:
        page.print(f"{skipped:,} lines were not records and were skipped (see 'first skipped').")
    for note in [i["note"] for i in document["inputs"] if i["note"]]:
        page.print(safe(note), soft_wrap=True)
    for line in reading_notes(document["reading"]):  # the config the fields were mapped by, exports among LOGS
        page.print(safe(line), soft_wrap=True)
    zone = zone_note([i["envelope"] for i in document["inputs"]], tz) if tz else None
    if zone:
        page.print(zone)
    page.print()
    for line in _summary_lines(document["summary"]):
        page.print(line)
    page.print()
    if not document["incidents"]:
        page.print(_no_incident_line(document))
    incidents = document["incidents"]
    for incident in incidents[:FULL_INCIDENTS]:
        page.print(_incident_block(incident), soft_wrap=True)
    if len(incidents) > FULL_INCIDENTS:
        page.print(f"{len(incidents) - FULL_INCIDENTS} smaller incidents (all in --format json):")
        for incident in incidents[FULL_INCIDENTS:]:
            page.print(f"  {incident['id']}  {incident['kind']}  campaign {safe(incident['campaign'])} step "
                          f"{safe(incident['step'])}  {people_count(incident['people'])}  workers "
                          f"{_short_list(incident['workers'], 2)}", soft_wrap=True)
    for command in document["next"]:  # the whole case's exclusion list
        page.print(f"next (every incident's people): {safe(command)}", soft_wrap=True)
    if document["candidates_at_two_addresses"]:
        page.print(_two_addresses_lines(document["candidates_at_two_addresses"]), soft_wrap=True)
    if "reconciliation" in document:
        page.print(_reconciliation_lines(document["reconciliation"]))
        if missed["count"]:
            page.print(_missed_lines(missed), soft_wrap=True)
    if saved_to:
        page.print(f"Case saved to {safe(saved_to)}: mailmortem sql {safe(saved_to)} \"select * from incidents\"")
    show(page)


def _reconciliation_lines(rec: dict) -> str:
    parts = [f"{safe(name.replace('_', ' '))}: {finding['count']:,}" for name, finding in rec.items()
             if isinstance(finding, dict) and "count" in finding]
    grouping = rec["provider_confirmed_duplicates"]["grouping"]
    if grouping.get("grouped_by"):
        parts.append(f"duplicates grouped by {grouping['described']} ({grouping['grouped']:,} of "
                     f"{grouping['sends']:,} provider sends)")
    return "Reconciliation with the provider export: " + "; ".join(parts)


def _lost_headline(lost: dict) -> str:
    from forensics.evidence import incomplete_headline

    return incomplete_headline(lost, safe)


def _two_addresses_lines(rows: list[dict], shown: int = 5) -> str:
    lines = [f"\n{len(rows):,} candidate(s) got the same step at two or more addresses (not counted above):"]
    for row in rows[:shown]:
        lines.append(f"  {safe(row['candidate'])}  campaign {safe(row['campaign'])} step {safe(row['step'])}  "
                     + ", ".join(safe(r) for r in row["recipients"]))
    if len(rows) > shown:
        lines.append(f"  … {len(rows) - shown} more (all in --format json)")
    return "\n".join(lines)


def _unplaced_provider_sends(document: dict) -> int:
    """Provider sends the log lacks and no grouping placed (0 without an export)."""
    return document.get("reconciliation", {}).get("provider_sends_unplaced", {"count": 0})["count"]


def _missed_by_log(document: dict) -> dict:
    return document.get("reconciliation", {}).get("provider_duplicates_missed_by_log", {"count": 0})


def _missed_headline(missed: dict) -> str:
    people, sends = missed["count"], missed["sends_not_in_log"]
    return (f"PROVIDER-CONFIRMED DUPLICATES: the provider sent {people_count(people)} a campaign step more than once, "
            f"which the log does not show ({sends:,} send{'' if sends == 1 else 's'} missing from the log). "
            "See the reconciliation below.")


def _missed_lines(missed: dict, shown: int = 5) -> str:
    lines = [f"Duplicates only the provider shows ({people_count(missed['count'])}):"]
    for row in missed["sample"][:shown]:
        scope = f"step {safe(row['step'])}" if row["label"] is None else f"{row['grouped_by']} {safe(row['label'])!r}"
        lines.append(f"  {safe(row['recipient'])}  campaign {safe(row['campaign'] or '-')} {scope}  "
                     f"{row['sends']} sends, {row['not_in_log']} not in the log: "
                     + ", ".join(safe(m) for m in row["msg_ids"]))
    if missed["count"] > shown:
        lines.append(f"  … {missed['count'] - shown:,} more (--format json lists the first {len(missed['sample'])})")
    return "\n".join(lines)


def _no_incident_line(document: dict) -> str:
    if _missed_by_log(document)["count"]:
        return ("The log's records alone show every person once per step; the provider's history shows otherwise "
                "(see the first line).")
    unplaced = _unplaced_provider_sends(document)
    if unplaced:
        return (f"The log's records show every person once per step, but {unplaced:,} provider send(s) could not be "
                "placed in a campaign step (the export names none for them, and the log lacks some of its sends): "
                "duplicates among them cannot be seen (see the reconciliation).")
    if not document["complete"]:
        return _lost_line(document)
    if document["candidates_at_two_addresses"]:
        return "No address got a step twice, but some candidates did under two addresses (see below)."
    return "No duplicates: every person got each step at most once."


def _lost_line(document: dict) -> str:
    """No duplicates seen, but evidence lost: naming a file whose send-looking lines were all lost (it read no record),
    whose duplicates with the other files' sends cannot be seen at all."""
    read = {i["path"]: i["records"] for i in document["inputs"]}
    lost = [f for f in document["lost_evidence"]["by_file"] if not read.get(f["path"], 1)]
    if not lost:
        return "No duplicates among the records read, but evidence was lost (see the first line)."
    others = f" and {len(lost) - 1} more" if len(lost) > 1 else ""
    return (f"No duplicates among the records read, but every send-looking line of {safe(lost[0]['path'])}{others} "
            f"was lost ({lost[0]['lines']:,}; see the first line and the notes): its sends were not compared.")
