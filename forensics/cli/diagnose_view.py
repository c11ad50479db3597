"""The people-facing view of a diagnosis: what was read, the summary, one block per incident."""

from __future__ import annotations

from forensics.textsafe import terminal_safe as safe


def _inputs_table(inputs: list[dict]):
    from rich.table import Table

    table = Table(title="What was read", title_justify="left", box=None, pad_edge=False)
    for column in ("file", "syntax", "lines", "records", "skipped", "first skipped lines"):
        table.add_column(column, justify="right" if column in ("lines", "records", "skipped") else "left")
    shown = inputs[:8]
    for i in shown:
        first = ", ".join(str(n) for n in i["first_skipped_lines"][:5])
        table.add_row(safe(i["path"]), i["syntax"], f"{i['lines']:,}", f"{i['records']:,}", f"{i['skipped']:,}", first)
    if len(inputs) > len(shown):
        rest = inputs[len(shown):]
        table.add_row(f"… {len(rest)} more files", "", f"{sum(i['lines'] for i in rest):,}",
                      f"{sum(i['records'] for i in rest):,}", f"{sum(i['skipped'] for i in rest):,}", "")
    return table


def _summary_lines(summary: dict) -> list[str]:
    kinds = ", ".join(f"{kind} {n:,}" for kind, n in summary["by_kind"].items() if n) or "none"
    return [f"Sends {summary['sends']:,}   people {summary['people']:,}   duplicated people "
            f"{summary['duplicated_people']:,}   extra sends {summary['extra_sends']:,}",
            f"By kind: {kinds}"]


def _incident_block(incident: dict):
    from rich.panel import Panel
    from rich.text import Text

    text = Text()
    scope = f"campaign {safe(incident['campaign'])} step {safe(incident['step'])}"
    if incident["test_id"]:
        scope += f"  test {safe(incident['test_id'])}"
    text.append(f"{scope}\n")
    text.append(f"workers {safe(', '.join(incident['workers'][:6]))}")
    if incident["shards"]:
        text.append(f"   shards {safe(', '.join(incident['shards'][:6]))}")
    text.append(f"\n{incident['first_send']} → {incident['last_send']}   people hit {incident['people']:,}   "
                f"extra sends {incident['extra_sends']:,}   confidence {incident['confidence']:.2f}\n")
    text.append("Evidence:\n", style="bold")
    for line in incident["evidence"]:
        text.append(f"  • {safe(line)}\n")
    text.append("Next steps:\n", style="bold")
    for line in incident["remediation"]:
        text.append(f"  → {safe(line)}\n")
    title = f"{incident['id']}  {incident['kind']}" + (f" (cause: {incident['cause']})" if incident.get("cause") else "")
    return Panel(text, title=safe(title), title_align="left")


def show_diagnosis(document: dict, saved_to: str | None = None) -> None:
    from forensics.console import make_console

    console = make_console()
    console.print(_inputs_table(document["inputs"]))
    skipped = sum(i["skipped"] for i in document["inputs"])
    if skipped:
        console.print(f"{skipped:,} lines were not records and were skipped (see 'first skipped lines').")
    console.print()
    for line in _summary_lines(document["summary"]):
        console.print(line)
    console.print()
    if not document["incidents"]:
        console.print("No duplicates: every person got each step at most once.")
    for incident in document["incidents"]:
        console.print(_incident_block(incident))
    if "reconciliation" in document:
        console.print(_reconciliation_lines(document["reconciliation"]))
    if saved_to:
        console.print(f"Case saved to {safe(saved_to)}: mailmortem sql {safe(saved_to)} \"select * from incidents\"")


def _reconciliation_lines(rec: dict) -> str:
    parts = [f"{safe(k.replace('_', ' '))}: {v:,}" for k, v in rec.items() if isinstance(v, int)]
    return "Reconciliation with the provider: " + ", ".join(parts)
