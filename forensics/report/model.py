"""The postmortem report: one model built from a case, rendered as HTML or Markdown.

`build_report(case, paths, exports)` classifies the case (forensics.findings), then gathers what a
reader needs: one sentence per incident, the evidence, the next steps with runnable commands, the
timeline (forensics.report.timeline), the A/B tests involved, the first affected people and the
inputs. `render(report, fmt)` returns the HTML (forensics.report.html) or Markdown
(forensics.report.markdown) text. Every piece of log text stays raw here; the renderers escape it.
"""

from __future__ import annotations

import datetime as dt
from dataclasses import dataclass, field

import queries
from forensics import __version__, evidence
from forensics.errors import MailmortemError
from forensics.jsonfmt import iso_utc
from forensics.kinds import CASE_COMMAND, kind_named, logs_words

AFFECTED_SHOWN = 100
TESTS_SHOWN = 5


@dataclass
class Report:
    title: str
    generated_at: str
    logs_arg: str                      # the LOGS as a shell would need them, with how they were read
    inputs: list[dict]
    summary: dict
    incidents: list[dict]              # the diagnose incidents plus "sentence", "fix" and "commands"
    timeline: object                   # forensics.report.timeline.Timeline
    ab_tests: list[dict] = field(default_factory=list)
    affected: list[dict] = field(default_factory=list)
    affected_total: int = 0
    reconciliation: dict | None = None
    notes: list[str] = field(default_factory=list)
    incomplete: str | None = None      # the lost-evidence headline, said before anything else
    version: str = __version__

    @property
    def export_command(self) -> str:
        return CASE_COMMAND.format(logs=self.logs_arg)

    @property
    def window(self) -> tuple[str | None, str | None]:
        firsts = [i["first_send"] for i in self.incidents if i["first_send"]]
        lasts = [i["last_send"] for i in self.incidents if i["last_send"]]
        return (min(firsts) if firsts else None, max(lasts) if lasts else None)


def _parse_iso(value: str | None) -> dt.datetime | None:
    return dt.datetime.fromisoformat(value.replace("Z", "+00:00")) if value else None


def duration_text(first: str | None, last: str | None) -> str:
    if not first or not last:
        return "?"
    seconds = (_parse_iso(last) - _parse_iso(first)).total_seconds()
    if seconds < 120:
        return f"{seconds:.0f} s"
    return f"{seconds / 60:.0f} min" if seconds < 7200 else f"{seconds / 3600:.1f} h"


def _who(incident: dict) -> str:
    workers = incident["workers"]
    if not workers:
        return "an unnamed worker"
    shown = ", ".join(workers[:4]) + (f" and {len(workers) - 4} more" if len(workers) > 4 else "")
    return ("worker " if len(workers) == 1 else "workers ") + shown


def _what(incident: dict) -> str:
    step = f" step {incident['step']}" if incident["step"] else ""
    return f"campaign {incident['campaign'] or '(none)'}{step}"


def _shards(shards: list[str]) -> str:
    named = ", ".join(shards[:4]) + (f" and {len(shards) - 4} more" if len(shards) > 4 else "")
    if not shards:
        return "a shard"
    already = all("shard" in s.lower() for s in shards)
    return named if already else ("shard " if len(shards) == 1 else "shards ") + named


def incident_sentence(incident: dict) -> str:
    """What happened, in one sentence a reader can check against the evidence."""
    core = kind_named(incident["kind"]).sentence.format(
        who=_who(incident), what=_what(incident), shards=_shards(incident["shards"]),
        test=incident["test_id"] or "?")
    cause = f"; underlying mechanism: {incident['cause']}" if incident.get("cause") else ""
    return (f"{core[0].upper()}{core[1:]}{cause}: {incident['people']} people got duplicates "
            f"({incident['extra_sends']} extra sends) between {incident['first_send']} and "
            f"{incident['last_send']} ({duration_text(incident['first_send'], incident['last_send'])}); "
            f"confidence {round(100 * incident['confidence'])}%.")


def _with_steps(incident: dict) -> dict:
    fix, *commands = incident["remediation"]
    return {**incident, "sentence": incident_sentence(incident), "fix": fix, "commands": commands}


def _ab_tests(con) -> tuple[list[dict], list[str]]:
    from forensics.ab import analyse

    tests, notes = [], []
    for row in queries.rows(con, "report_tests_involved", {"limit": TESTS_SHOWN}):
        try:
            result = analyse(con, row["test_id"]).to_dict()
        except MailmortemError as exc:
            notes.append(f"A/B test {row['test_id']}: {exc}")
            continue
        result.pop("contaminated_units", None)  # the affected list names them
        tests.append(result)
    return tests, notes


def _reconciliation(con, document: dict, exports, window_cut=None) -> tuple[dict | None, list[str]]:
    if not exports:
        return None, []
    try:
        from forensics.reconcile import load_provider_sends, reconcile
    except ImportError:
        return None, ["--provider-export: provider reconciliation is not available in this build; "
                      "the report covers the logs only"]
    load_provider_sends(con, exports, window_cut=window_cut)
    found = reconcile(con)
    evidence.with_unplaced_provider_sends(document, found)
    return reconciliation_counts(found), []


def reconciliation_counts(result: dict) -> dict:
    """{finding: count} from forensics.reconcile's {finding: {"count", "sample"}} (or plain numbers)."""
    counts = {}
    for name, value in result.items():
        value = value.get("count") if isinstance(value, dict) else value
        if isinstance(value, (int, float, str)) or value is None:
            counts[name.replace("_", " ")] = value
    return counts


def build_report(case, paths, exports=(), title: str | None = None, now: dt.datetime | None = None) -> Report:
    """Classify the case and gather everything the report shows (no rendering, no escaping)."""
    from forensics.findings import build_document, reading_notes
    from forensics.ingest.window import headline, read_lines
    from forensics.report.timeline import timeline_data

    document = build_document(case, include_affected=False, logs=paths, exports=exports)
    window = document["window"]  # --since/--until: said first, and repeated in the commands shown
    con = case.con
    logs_arg = logs_words(paths, case.options.arguments(case.window, loading=True), placeholder="<logs>")
    incidents = [_with_steps(i) for i in document["incidents"]]
    reconciliation, notes = _reconciliation(con, document, exports, case.window)
    ab_tests, ab_notes = _ab_tests(con)
    return Report(
        title=title or "Duplicate outreach: postmortem",
        generated_at=iso_utc(now or dt.datetime.now(dt.timezone.utc)),
        logs_arg=logs_arg, inputs=document["inputs"], summary=document["summary"], incidents=incidents,
        timeline=timeline_data(con, incidents), ab_tests=ab_tests,
        affected=queries.rows(con, "report_affected_first", {"limit": AFFECTED_SHOWN}),
        affected_total=queries.one(con, "report_affected_count")["people"],
        reconciliation=reconciliation,
        incomplete=None if document["complete"] else evidence.incomplete_headline(document["lost_evidence"]),
        notes=([headline(window), *read_lines(window)] if window else []) + reading_notes(document["reading"])
        + notes + ab_notes,
    )


def render(report: Report, fmt: str, image_link: str | None = None, spec: dict | None = None) -> str:
    """The report as a complete HTML document or Markdown text (`spec`: the timeline's, if built already)."""
    from forensics.report.chart import timeline_spec

    if spec is None and not report.timeline.empty:
        spec = timeline_spec(report.timeline)
    if fmt == "md":
        from forensics.report.markdown import render_markdown

        return render_markdown(report, spec, image_link=image_link)
    from forensics.report.html import render_html

    return render_html(report, spec)
