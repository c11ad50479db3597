"""`mailmortem affected`: every person who got a duplicate, one row each."""

from __future__ import annotations

import click

from mailmortem.cli.options import format_option, output_option
from mailmortem.cli.reading import case_options, export_options, note_reading, open_case
from mailmortem.cli.window import note as note_window
from forensics.kinds import KINDS


TABLE_PEOPLE = 1_000  # people shown in the table; the full list is one --format csv away


@click.command()
@case_options(logs_required=False)
@format_option()
@click.option("--kind", type=click.Choice(KINDS), help="Only people hit by this kind of incident.")
@click.option("--incident", metavar="ID", help="Only people of this incident (e.g. INC-1).")
@click.option("--campaign", metavar="ID", help="Only this campaign.")
@export_options(what="Without LOGS: provider send history whose duplicates to list", times=False)
@output_option("the list")
def affected(paths, read, fmt, kind, incident, campaign, exports, out):
    """List every person who got a duplicate, one row each (csv makes an exclusion list).

    The table shows the first 1,000 people and counts the rest; csv, json and
    jsonl list everyone. With --provider-export and no LOGS: the people the
    provider's history alone shows (see `diagnose --provider-export`).

    \b
    Examples:
      mailmortem affected logs/ --kind parallel-worker --format csv -o apology-exclusions.csv
      mailmortem affected logs/*.log.gz --incident INC-2 --format jsonl
      mailmortem affected export.csv --field recipient=To --incident INC-1 --format csv -o inc-1.csv
      mailmortem affected --provider-export events.jsonl --format csv -o apology-exclusions.csv

    -o FILE replaces FILE only when the command succeeds (a shell `>` empties
    it first, even when the command then fails).
    """
    from mailmortem.output import to_file

    if not paths or exports:
        from mailmortem.cli import provider_only

        provider_only.require_exports(exports, paths, read)
        with to_file(out):
            return provider_only.affected(exports, fmt, kind, incident, campaign)
    from forensics import affected as chosen
    from forensics.findings import build_document

    case = open_case(paths, read)
    note_reading(case)
    document = build_document(case, include_affected=False)
    chosen.check_filters(case.con, document["incidents"], kind, incident, campaign)
    warn_if_incomplete(document)
    frames = chosen.frames(case.con, kind, incident, campaign)
    with to_file(out):
        if fmt == "table":
            total = sum(people for _id, people in chosen.chosen_incidents(case.con, kind, incident, campaign))
            _affected_table(frames, total)
        else:
            _write_affected(frames, fmt)


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
    if lost.get("records_not_read"):
        warn(f"{lost['records_not_read']['count']} record(s) look like sends but were not read as one: the list may "
             "miss people (see `mailmortem fields`)")
    for unread in lost.get("fields_not_read", []):
        from forensics.textsafe import terminal_safe

        warn(terminal_safe(f"no key was read as the {unread['field']}, though the sends carry "
                           f"{', '.join(unread['candidate_keys'][:4])}: people's sends of different "
                           f"{unread['field']}s may be listed as duplicates (--field {unread['field']}=KEY)"))
    note_window(document.get("window"))


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
    candidates = dict.fromkeys(s.get("candidate") for s in sends if s.get("candidate") is not None)
    return {**row, "candidate": ";".join(candidates), "sends": len(sends), "first_send": sends[0]["ts"],
            "last_send": sends[-1]["ts"],
            "workers": sorted({s["worker"] or "" for s in sends}), "msg_ids": [s["msg_id"] for s in sends]}
