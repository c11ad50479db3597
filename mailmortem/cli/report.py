"""`mailmortem report`: the postmortem as one self-contained HTML file, or Markdown."""

from __future__ import annotations

import os
import sys
from pathlib import Path

import click

from mailmortem.cli.reading import case_options, export_options, open_case
from forensics.errors import InputError

MARKDOWN_SUFFIXES = (".md", ".markdown")


def _format_for(fmt: str | None, out: str | None) -> str:
    if fmt:
        return fmt
    return "md" if out and out.lower().endswith(MARKDOWN_SUFFIXES) else "html"


def _png_beside(out: str) -> tuple[Path, str]:
    """Where the Markdown's timeline image goes when the Markdown is a file: next to it."""
    path = Path(out)
    png = path.with_name(path.stem + "-timeline.png")
    return png, png.name


def _write_atomically(path: Path, data: bytes) -> None:
    # A half-written report must never replace a good one.
    tmp = path.with_name(f".{path.name}.{os.getpid()}.tmp")
    try:
        tmp.write_bytes(data)
        os.replace(tmp, path)
    except OSError as exc:
        tmp.unlink(missing_ok=True)
        raise InputError(f"cannot write {path}: {exc.strerror or exc}") from None


def _render(report, fmt: str, out: str | None) -> str:
    from forensics.report.model import render

    if fmt != "md" or not out or report.timeline.empty:
        return render(report, fmt)
    from forensics.report.chart import timeline_png, timeline_spec

    png, link = _png_beside(out)
    spec = timeline_spec(report.timeline)
    _write_atomically(png, timeline_png(spec))
    return render(report, fmt, image_link=link, spec=spec)


def _done_message(report, out: str, size: int) -> str:
    from forensics.textsafe import terminal_safe

    s = report.summary
    shown = f"{size / 1e6:.1f} MB" if size >= 1e6 else f"{size / 1e3:.0f} kB"
    return (f"wrote {terminal_safe(out)} ({shown}): {len(report.incidents)} incident(s), "
            f"{s['duplicated_people']} people hit, {s['extra_sends']} extra sends")


@click.command()
@case_options
@export_options(what="Provider send history to reconcile with the log", times=False)
@click.option("--out", "-o", "out", type=click.Path(dir_okay=False), metavar="FILE",
              help="Write the report here (default: standard output). A .md name implies --format md.")
@click.option("--format", "fmt", type=click.Choice(("html", "md")), default=None,
              help="html: one self-contained file (default); md: Markdown with the timeline as a PNG.")
@click.option("--title", default=None, help="Title of the report (default: Duplicate outreach: postmortem).")
def report(paths, read, exports, out, fmt, title):
    """Write the postmortem of LOGS: what happened, the timeline, who was hit, what to run next.

    The HTML opens offline in any browser (scripts inlined, no network) and prints cleanly. The
    Markdown embeds the timeline as a PNG (a data: URI on standard output; a -timeline.png file
    next to it with --out).

    \b
    Examples:
      mailmortem report logs/ --out incident-2026-11-28.html
      mailmortem report logs/ --provider-export sendgrid-events/ --out incident.html
      mailmortem report logs/ --format md > incident.md
      mailmortem report logs/worker-*.log.gz --out incident.md --title "INC-4711: double sends"
    """
    from mailmortem.console import warn
    from forensics.report.model import build_report

    fmt = _format_for(fmt, out)
    case = open_case(paths, read)
    built = build_report(case, paths, exports.with_found(case.provider_exports), title=title)
    for note in built.notes:
        warn(note)
    text = _render(built, fmt, out)
    if out:
        data = text.encode("utf-8")
        _write_atomically(Path(out), data)
        click.echo(_done_message(built, out, len(data)), err=True)
    else:
        sys.stdout.write(text)
