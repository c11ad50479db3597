"""The report as Markdown, for a ticket or a pull request.

Log text is shown with control/bidi characters escaped (it may be printed on a terminal), HTML
special characters as entities and Markdown punctuation backslash-escaped, so a recipient such as
`<script>` or `[x](javascript:…)` stays text. Commands go in fenced code blocks whose fence is longer
than any backtick run inside. The timeline is a PNG rendered by vl-convert: embedded as a data: URI,
or linked when the caller wrote it to a file next to the Markdown.
"""

from __future__ import annotations

import base64
import html
import re

from forensics.textsafe import terminal_safe

_MD_SPECIAL = re.compile(r"([\\`*_\[\]|~])")


def md_text(value) -> str:
    """Inline Markdown for a log value: one line, no markup, no HTML."""
    if value is None:
        return ""
    text = terminal_safe(value if isinstance(value, str) else _plain(value))
    return _MD_SPECIAL.sub(r"\\\1", html.escape(text, quote=False))


def _plain(value) -> str:
    if isinstance(value, (list, tuple)):
        return ", ".join(str(v) for v in value)
    if hasattr(value, "astimezone"):
        from forensics.jsonfmt import iso_utc

        return iso_utc(value)
    return str(value)


def code_block(text: str, lang: str = "sh") -> str:
    text = terminal_safe(text)
    longest = max((len(run) for run in re.findall(r"`+", text)), default=0)
    fence = "`" * max(3, longest + 1)
    return f"{fence}{lang}\n{text}\n{fence}"


def table(headers: list[str], rows: list[list]) -> list[str]:
    lines = ["| " + " | ".join(headers) + " |", "|" + "---|" * len(headers)]
    lines += ["| " + " | ".join(md_text(cell) for cell in row) + " |" for row in rows]
    return lines


def _incident(i: dict) -> list[str]:
    lines = [f"### {md_text(i['id'])} · {md_text(i['kind'])} (confidence {round(100 * i['confidence'])}%)", "",
             md_text(i["sentence"]), "",
             f"- **People hit:** {i['people']:,} · **Extra sends:** {i['extra_sends']:,}",
             f"- **Window:** {md_text(i['first_send'])} → {md_text(i['last_send'])}",
             f"- **Workers:** {md_text(i['workers'])}" + (f" · **Shards:** {md_text(i['shards'])}" if i["shards"] else ""),
             "", "**Evidence**", ""]
    lines += [f"- {md_text(line)}" for line in i["evidence"]]
    lines += ["", "**Next steps**", "", f"1. {md_text(i['fix'])}"]
    for command in i["commands"]:
        lines += ["", code_block(command)]
    return lines + [""]


def _timeline(spec: dict | None, image_link: str | None) -> list[str]:
    if spec is None:
        return ["No timed records to draw.", ""]
    if image_link is None:
        from forensics.report.chart import timeline_png

        image_link = "data:image/png;base64," + base64.b64encode(timeline_png(spec)).decode("ascii")
    caption = ("One lane per worker · incarnation; red ticks are sends to people who got a duplicate; "
               "triangles are claims (bar: the lease), squares releases, crosses expiries, "
               "upward triangles restarts; shaded bands are incident windows.")
    return [f"![Timeline of sends and claims per worker]({image_link})", "", f"_{caption}_", ""]


def _ab(test: dict) -> list[str]:
    srm = test.get("srm")
    if srm:
        verdict = ("**sample ratio mismatch**: do not trust this test's result" if srm["mismatch"]
                   else "no sample ratio mismatch")
        check = f"SRM check on clean people: χ² = {srm['chi2']:.2f}, p = {srm['p_value']:.3g}: {verdict}."
    else:
        check = "SRM check: not testable (fewer than two arms with clean people)."
    lines = [f"### Test {md_text(test['test_id'])}", "",
             f"{test['contaminated']:,} of {test['units']:,} people ({100 * test['contamination_rate']:.0f}%) "
             f"received more than one variant. {check}", ""]
    rows = [[a["variant"], a["units_all"], a["units_clean"],
             None if a.get("expected_clean") is None else round(a["expected_clean"], 1), a["sends"]]
            for a in test["arms"]]
    return lines + table(["arm", "people (all)", "people (clean)", "expected clean", "sends"], rows) + [""]


def _affected(report) -> list[str]:
    if not report.affected:
        return ["Nobody.", ""]
    shown = len(report.affected)
    head = (f"The first {shown} of {report.affected_total:,} people." if report.affected_total > shown
            else f"All {report.affected_total:,} people.")
    rows = [[p["recipient"], p["campaign"], p["step"], p["incident"], p["kind"], p["sends"], p["workers"],
             p["first_send"], p["last_send"]] for p in report.affected]
    return ([head + " Export the full list:", "", code_block(report.export_command), ""]
            + table(["recipient", "campaign", "step", "incident", "kind", "sends", "workers", "first send",
                     "last send"], rows) + [""])


def render_markdown(report, spec: dict | None, image_link: str | None = None) -> str:
    s = report.summary
    lines = [f"# {md_text(report.title)}", ""]
    if report.incomplete:
        lines += [f"**{md_text(report.incomplete)}**", ""]
    lines += [f"_Generated {md_text(report.generated_at)} by mailmortem {md_text(report.version)} from "
             f"{len(report.inputs)} input file(s)._", "",
             f"**{s['duplicated_people']:,} people hit**, **{s['extra_sends']:,} extra sends**, "
             f"{len(report.incidents)} incident(s); {s['sends']:,} sends to {s['people']:,} people in the logs.", ""]
    lines += [f"> Note: {md_text(note)}" for note in report.notes] + ([""] if report.notes else [])
    lines += ["## What happened", ""]
    if not report.incidents:
        lines += ["No duplicate sends were found among the records read, but evidence was lost (see the top)."
                  if report.incomplete else "No duplicate sends were found in these logs.", ""]
    for incident in report.incidents:
        lines += _incident(incident)
    lines += ["## Timeline", ""] + _timeline(spec, image_link)
    if report.ab_tests:
        lines += ["## A/B tests", ""] + [line for t in report.ab_tests for line in _ab(t)]
    if report.reconciliation:
        lines += ["## Provider reconciliation", ""]
        lines += table(["finding", "count"], [[k, v] for k, v in report.reconciliation.items()]) + [""]
    lines += ["## Affected people", ""] + _affected(report)
    lines += ["## Inputs", ""] + table(
        ["file", "syntax", "lines", "records", "skipped", "first skipped lines"],
        [[f["path"], f["syntax"], f["lines"], f["records"], f["skipped"], f["first_skipped_lines"]]
         for f in report.inputs])
    return "\n".join(lines) + "\n"
