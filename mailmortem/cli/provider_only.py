"""`diagnose --provider-export …` and `affected --provider-export …` with no LOGS: the provider's history alone.

Kept apart from diagnose.py: those commands only hand over here when LOGS are absent.
"""

from __future__ import annotations

import sys

import click

from forensics.textsafe import terminal_safe as safe
from mailmortem.cli.diagnose import people_count

SHOWN = 10  # people listed in the table view; all are in --format json and `affected`
AFFECTED_COLUMNS = ("recipient", "campaign", "step", "grouped_by", "label", "sends", "first_sent_at", "last_sent_at",
                    "msg_ids")


def require_exports(exports, paths, read, save=None) -> None:
    """No LOGS: --provider-export must be there, and no option that reads LOGS (`read`, a ReadOptions: given
    without LOGS they would be silently ignored; a config found in the working directory was not given)."""
    if paths:
        raise click.UsageError("affected reads --provider-export without LOGS (the provider's duplicates alone); "
                               "to compare an export with logs run: mailmortem diagnose LOGS --provider-export PATH")
    if not exports:
        raise click.UsageError("Missing argument 'LOGS...' (or --provider-export PATH to diagnose the provider's "
                               "history alone).")
    # --tz and --year read the export too; --no-config only declines a file
    named = [f for f in read.given_flags() if f not in ("--tz", "--year", "--no-config")] + (["--save"] if save else [])
    if named:
        raise click.UsageError(f"{', '.join(named)} say how to read LOGS, which were not given "
                               "(--provider-export alone reads only the provider's history)")


def diagnose(exports, fmt: str, fail_on_duplicates: bool) -> None:
    from forensics.provider_only import diagnose_exports
    from mailmortem.output import write_json

    document = diagnose_exports(exports)
    if fmt == "json":
        write_json(document)
    else:
        show(document)
    if fail_on_duplicates and not document["complete"]:
        sys.exit(4)
    if fail_on_duplicates and document["provider_only"]["summary"]["duplicated_people"]:
        sys.exit(3)


def affected(exports, fmt: str, kind, incident, campaign) -> None:
    from forensics.errors import InputError
    from forensics.provider_only import diagnose_exports
    from mailmortem.console import warn
    from mailmortem.output import write_rows

    if kind or incident:
        raise click.UsageError("--kind and --incident need LOGS: from the provider's history alone the kind "
                               "cannot be told (use --campaign, or pass the logs)")
    document = diagnose_exports(exports)
    section = document["provider_only"]
    if campaign is not None and campaign not in section["campaigns"]:
        named = ", ".join(section["campaigns"][:8]) or "none named"
        raise InputError(f"no send to campaign {campaign!r} in these exports (campaigns: {named}); "
                         "pass one of them to --campaign")
    if not document["complete"]:
        warn(_incomplete(section))
    rows = [r for r in section["duplicates"] if campaign is None or r["campaign"] == campaign]
    write_rows(rows, fmt, columns=AFFECTED_COLUMNS if fmt in ("csv", "table") else None,
               title=f"{len(rows)} people affected (provider's history alone: "
                     f"grouped by {section['grouping']['grouped_by']}; the kind needs the logs)")


def _incomplete(section: dict) -> str:
    g = section["grouping"]
    parts = []
    if g["not_grouped"]:
        files = g["files_not_grouped"]
        where = (f"; nothing groups in {len(files)} file(s): {', '.join(safe(f) for f in files[:3])}"
                 + ("…" if len(files) > 3 else "")) if files else ""
        parts.append(f"{g['not_grouped']:,} of {g['sends']:,} provider sends could not be grouped by "
                     f"{g['grouped_by']} (no message id, address or {g['grouped_by']}{where}): duplicates among them "
                     "cannot be seen")
    if section["malformed_records"]:
        parts.append(f"{section['malformed_records']:,} export record(s) were malformed and not read")
    return "; ".join(parts)


def show(document: dict) -> None:
    from mailmortem.console import make_console

    console = make_console()
    section = document["provider_only"]
    if not document["complete"]:
        console.print("INCOMPLETE: " + _incomplete(section) + ".", soft_wrap=True)
    for line in _lines(section):
        console.print(line, soft_wrap=True)


def _lines(section: dict) -> list[str]:
    s, g = section["summary"], section["grouping"]
    lines = [_headline(s["duplicated_people"], g),
             _read_line(section["exports"]), *_reading_lines(section["exports"]), "",
             f"Provider sends {s['sends']:,}   people {s['people']:,}   duplicated people "
             f"{s['duplicated_people']:,}   extra sends {s['extra_sends']:,}",
             f"Grouped by {g['described']}: {g['grouped']:,} of {g['sends']:,} sends."]
    if g["grouped_by"] in ("template", "subject"):
        lines.append(f"  (no campaign and step metadata: two steps that share a {g['grouped_by']} count as one step, "
                     f"and one step sent under two {g['grouped_by']}s, e.g. A/B variants, is not seen)")
    lines += _people_lines(section["duplicates"])
    lines += ["", f"Cannot tell: {section['cannot_tell']}"] + [f"next: {safe(n)}" for n in section["next"]]
    return lines


def _read_line(exports: list[dict], listed: int = 3) -> str:
    if len(exports) <= listed:
        return "Read: " + "; ".join(f"{safe(e['path'])} ({e['provider']})" for e in exports)
    counts: dict[str, int] = {}
    for e in exports:
        counts[e["provider"]] = counts.get(e["provider"], 0) + 1
    return f"Read: {len(exports):,} export files (" + ", ".join(f"{p} {n:,}" for p, n in counts.items()) + ")"


def _reading_lines(exports: list[dict], listed: int = 3) -> list[str]:
    """How your own CSV/JSONL's columns were read ("sent_at ← Sent At (its name's words)"), for the first files."""
    return [f"  {safe(e['path'])}: " + "; ".join(safe(r) for r in e["reading"])
            for e in exports[:listed] if e.get("reading") and e["provider"] in ("csv", "generic")]


def _headline(count: int, grouping: dict) -> str:
    if count:
        return (f"DUPLICATES in the provider's history alone (no app logs read): {people_count(count)} got a campaign "
                "step more than once; which mechanism needs the app logs.")
    if grouping["not_grouped"]:
        return "No duplicates among the provider sends that could be grouped (no app logs read); see INCOMPLETE above."
    return ("No duplicates in the provider's history alone (no app logs read): every person got each campaign step "
            "at most once.")


def _people_lines(rows: list[dict]) -> list[str]:
    from forensics.jsonfmt import iso_utc

    if not rows:
        return []
    lines = ["", "People (provider-confirmed sends with different message ids):"]
    for r in rows[:SHOWN]:
        scope = f"template {safe(r['label'])}" if r["grouped_by"] == "template" else (
            f"subject {safe(r['label'])!r}" if r["grouped_by"] == "subject" else f"step {safe(r['step'])}")
        when = " → ".join(iso_utc(t) for t in (r["first_sent_at"], r["last_sent_at"]) if t is not None)
        lines.append(f"  {safe(r['recipient'])}  campaign {safe(r['campaign'] or '-')} {scope}  {r['sends']} sends  "
                     f"{when}  {', '.join(safe(m) for m in r['msg_ids'])}")
    if len(rows) > SHOWN:
        lines.append(f"  … {len(rows) - SHOWN:,} more (all in --format json and `mailmortem affected`)")
    return lines
