"""`mailmortem report` through the CLI: formats, --out, errors, and what reaches stdout/stderr."""

from __future__ import annotations

import base64
from pathlib import Path

import pytest

from tests.test_report import XSS, hostile_case

pytestmark = pytest.mark.slow  # report rendering: the timeline chart drawn through vl-convert


@pytest.fixture(scope="module")
def logs(tmp_path_factory) -> Path:
    return hostile_case(tmp_path_factory.mktemp("cli-report") / "mail-send.log")


def test_html_to_a_file_says_what_it_wrote_on_stderr(cli, logs, tmp_path):
    out = tmp_path / "incident-2026-11-28.html"
    result = cli("report", logs, "--out", out)
    assert result.exit_code == 0, result.stderr
    assert result.stdout == ""
    assert result.stderr.startswith(f"wrote {out} (") and ": 3 incident(s), 19 people hit, 19 extra sends\n" in result.stderr
    page = out.read_text(encoding="utf-8")
    assert page.startswith("<!DOCTYPE html>") and 'id="timeline-spec"' in page
    import html
    import re

    csp = re.search(r'http-equiv="Content-Security-Policy" content="([^"]*)"', page).group(1)
    assert html.unescape(csp).startswith("default-src 'none';") and "connect-src 'none'" in html.unescape(csp)
    assert not list(tmp_path.glob(".*.tmp"))


def test_html_is_self_contained(cli, logs, tmp_path):
    out = tmp_path / "r.html"
    cli("report", logs, "-o", out)
    page = out.read_text(encoding="utf-8")
    import re

    assert not re.search(r"""<(script|link|img|iframe)\b[^>]*\b(src|href)\s*=\s*["']?(https?:)?//""", page, re.I)
    assert "vegaEmbed" in page and "@media print" in page


def test_markdown_to_stdout_embeds_the_timeline_as_png(cli, logs):
    result = cli("report", logs, "--format", "md")
    assert result.exit_code == 0, result.stderr
    text = result.stdout
    assert text.startswith("# Duplicate outreach: postmortem\n")
    assert "## What happened" in text and "## Timeline" in text and "## Affected people" in text
    data = text.split("(data:image/png;base64,", 1)[1].split(")", 1)[0]
    assert base64.b64decode(data).startswith(b"\x89PNG")
    assert "<script" not in text and XSS.replace("<", "&lt;").replace(">", "&gt;") in text


def test_markdown_out_file_writes_the_png_beside_it(cli, logs, tmp_path):
    out = tmp_path / "incident.md"
    result = cli("report", logs, "--out", out)  # the .md name picks the format
    assert result.exit_code == 0, result.stderr
    text = out.read_text(encoding="utf-8")
    assert "![Timeline of sends and claims per worker](incident-timeline.png)" in text
    assert (tmp_path / "incident-timeline.png").read_bytes().startswith(b"\x89PNG")


def test_title_option(cli, logs):
    result = cli("report", logs, "--format", "md", "--title", "INC-4711: double sends")
    assert result.stdout.startswith("# INC-4711: double sends\n")


def test_missing_logs_are_one_line_errors(cli, tmp_path):
    result = cli("report", tmp_path / "nope.log", "--out", tmp_path / "x.html")
    assert result.exit_code == 1
    assert result.stderr.startswith("Error: ") and result.stderr.count("\n") == 1
    assert not (tmp_path / "x.html").exists()


def test_unwritable_out_is_a_one_line_error(cli, logs, tmp_path):
    result = cli("report", logs, "--out", tmp_path / "no-such-dir" / "x.html")
    assert result.exit_code == 1
    assert result.stderr.startswith(f"Error: cannot write {tmp_path / 'no-such-dir' / 'x.html'}")


def test_bad_format_is_a_usage_error(cli, logs):
    result = cli("report", logs, "--format", "pdf")
    assert result.exit_code == 2 and "'pdf' is not one of 'html', 'md'" in result.stderr


def test_help_has_examples(cli):
    result = cli("report", "--help")
    assert result.exit_code == 0
    assert "Examples:\n    mailmortem report logs/ --out incident-2026-11-28.html" in result.stdout
