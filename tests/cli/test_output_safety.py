"""Hostile log text reaches every writer harmless, and output keeps its shape in pipes."""

from __future__ import annotations

import csv
import io
import json
import re
import unicodedata

import click
import pytest

from forensics.textsafe import UNSAFE_RANGES, json_safe, spreadsheet_safe

OSC8 = "\x1b]8;;https://evil.example/\x07click\x1b]8;;\x07"
HOSTILE_WORKER = f"w{OSC8}\x9b2J\u202eevil"
RAW = ("\x1b", "\x07", "\x9b", "\u202e")


@pytest.fixture()
def hostile_log(tmp_path):
    """Two workers sent the same person the same step; one worker's name is a terminal attack."""
    lines = []
    for n, worker in enumerate((HOSTILE_WORKER, "＝HYPERLINK(1)")):
        lines.append(f'2026-11-28T09:1{n}:00.000Z evt=sent worker="{worker}" campaign=c-1 step=1 '
                     f'recipient=jane@acme.com msg_id=m{n}')
    path = tmp_path / "mail-send.log"
    path.write_text("\n".join(lines) + "\n", encoding="utf-8")
    return path


@pytest.mark.slow
@pytest.mark.parametrize("args", [("affected", "--format", "csv"), ("affected", "--format", "json"),
                                  ("affected", "--format", "jsonl"), ("affected",), ("diagnose", "--format", "json"),
                                  ("diagnose",)])
def test_no_writer_lets_a_control_character_through(cli, hostile_log, args):
    result = cli(args[0], hostile_log, *args[1:])
    assert result.exit_code == 0, result.stderr
    assert not [c for c in RAW if c in result.stdout]


@pytest.mark.slow
def test_json_escapes_round_trip_to_the_logged_text(cli, hostile_log):
    result = cli("affected", hostile_log, "--format", "json")
    assert "\\u001b" in result.stdout and "\\u202e" in result.stdout
    workers = {send["worker"] for row in json.loads(result.stdout) for send in row["sends"]}
    assert HOSTILE_WORKER in workers


@pytest.mark.slow
def test_csv_cells_that_look_like_formulas_are_neutralised(cli, hostile_log):
    rows = list(csv.DictReader(io.StringIO(cli("affected", hostile_log, "--format", "csv").stdout)))
    assert rows and all(not cell.startswith(("=", "＝")) for row in rows for cell in row.values())


@pytest.mark.parametrize("cell", ["=1+1", "\n=1+1", "\r\n=cmd", " =x", "＝SUM(A1)", "＋1", "－1", "＠x", "\t=1", "@x"])
def test_spreadsheet_safe_neutralises(cell):
    assert spreadsheet_safe(cell) == "'" + cell


@pytest.mark.parametrize("cell", ["jane@acme.com", "lead_1", "2026-11-28T09:10:00.000Z", "", "a=b"])
def test_spreadsheet_safe_keeps_plain_cells(cell):
    assert spreadsheet_safe(cell) == cell


def test_unsafe_ranges_cover_every_control_format_and_separator_character():
    covered = {c for a, b in UNSAFE_RANGES for c in range(a, b + 1)}
    unsafe = {c for c in range(0x110000) if unicodedata.category(chr(c)) in ("Cc", "Cf", "Cs", "Zl", "Zp")}
    assert unsafe <= covered


def test_json_safe_keeps_layout_and_letters():
    text = json.dumps({"a": ["é", "日本", "x\u2028y\U000e0041"]}, indent=2, ensure_ascii=False)
    safe = json_safe(text)
    assert json.loads(safe) == json.loads(text) and "\n  " in safe and "é" in safe and "日本" in safe
    assert "\u2028" not in safe and "\\udb40\\udc41" in safe

@pytest.mark.slow

def test_tables_in_a_pipe_print_one_row_per_line(cli):
    result = cli("affected", "sample_logs/mixed")
    people = len(cli("affected", "sample_logs/mixed", "--format", "jsonl").stdout.splitlines())
    lines = result.stdout.splitlines()
    assert people > 100 and len(lines) <= people + 6
    stamp = re.compile(r"\d{4}-\d\d-\d\dT\d\d:\d\d:\d\d\.\d{3}Z")
    assert sum(len(stamp.findall(line)) for line in lines) == 2 * people  # first_send, last_send, never split


def test_help_offers_exactly_the_formats_each_command_accepts():
    from tests.test_meta import _all_commands

    known = ("table", "json", "jsonl", "csv", "html", "md")
    for name, command in _all_commands():
        for param in command.params:
            if param.name == "fmt" and isinstance(param.type, click.Choice):
                offered = {k for k in known if re.search(rf"\b{k}\b", param.help or "")}
                assert offered <= set(param.type.choices), (name, param.help)
                examples = set(re.findall(r"--format (\w+)", command.help or ""))
                assert examples <= set(param.type.choices), (name, examples)


# The affected list is written by polars' columnar writer: its escaping and spelling, done by polars expressions,
# must be exactly what the Python functions and encoders give for the same text.

from hypothesis import given, settings, strategies as st  # noqa: E402

HOSTILE_TEXT = st.one_of(st.none(), st.text(), st.sampled_from(["=1", "\t=x", "\u3000＠x", "a\u2028b", "\U000e0041",
                                                                  "\x1b[2J", "\x9b", "é日本", 'q"u,o\\te', ""]))


@pytest.mark.slow
@settings(max_examples=60, deadline=None)
@given(st.lists(HOSTILE_TEXT, min_size=1, max_size=12))
def test_the_columnar_escapes_equal_the_python_ones(texts):
    import polars as pl

    from forensics.textsafe import json_safe_columns, spreadsheet_safe_expr, terminal_safe, terminal_safe_columns

    frame = pl.DataFrame({"t": texts}, schema={"t": pl.String})
    assert terminal_safe_columns(frame, ["t"])["t"].to_list() == [t if t is None else terminal_safe(t) for t in texts]
    assert json_safe_columns(frame, ["t"])["t"].to_list() == [t if t is None else json_safe(t) for t in texts]
    assert frame.select(spreadsheet_safe_expr(pl.col("t")))["t"].to_list() == [spreadsheet_safe(t) for t in texts]


@pytest.mark.slow
@settings(max_examples=40, deadline=None)
@given(st.lists(st.tuples(HOSTILE_TEXT, st.lists(st.tuples(HOSTILE_TEXT, HOSTILE_TEXT), max_size=3)),
                min_size=1, max_size=6))
def test_the_columnar_json_is_spelled_as_json_dumps(rows):
    import polars as pl

    from forensics.jsonfmt import to_json
    from forensics.rowjson import COMPACT, INDENTED, ONE_LINE, Items, row_text

    data = [{"a": a, "sends": [{"ts": ts, "worker": w} for ts, w in sends]} for a, sends in rows]
    send = pl.Struct({"ts": pl.String, "worker": pl.String})
    frame = pl.DataFrame(data, schema={"a": pl.String, "sends": pl.List(send)})
    shape = [("a", "a"), ("sends", Items("sends", ("ts", "worker")))]
    texts = {layout: frame.select(row_text(shape, layout, 1 if layout == INDENTED else 0))[:, 0].to_list()
             for layout in (COMPACT, ONE_LINE, INDENTED)}
    assert texts[ONE_LINE] == [json.dumps(row, ensure_ascii=False) for row in data]
    assert texts[COMPACT] == [json.dumps(row, ensure_ascii=False, separators=(",", ":")) for row in data]
    indented = to_json(data) if data else "[]"
    assert json_safe("[\n  " + ",\n  ".join(texts[INDENTED]) + "\n]") == indented


def _python_writers(document: dict) -> dict:
    """What the writers printed before the columnar path: json.dumps and csv.writer over Python rows."""
    from mailmortem.cli.affected import _flat
    from forensics.affected import CSV_COLUMNS
    from mailmortem.output import write_csv, write_json, write_jsonl

    outputs = {}
    for fmt, write in (("json", lambda rows, out: write_json(rows, out)), ("jsonl", write_jsonl),
                       ("csv", lambda rows, out: write_csv([_flat(r) for r in rows], CSV_COLUMNS, out))):
        out = io.StringIO()
        write(document["affected"], out)
        outputs[fmt] = out.getvalue()
    return outputs


@pytest.mark.slow
def test_the_columnar_writers_print_what_the_python_writers_printed(cli, hostile_log):
    from forensics.findings import build_document
    from forensics.ingest.case import load_case

    expected = _python_writers(build_document(load_case([str(hostile_log)])))
    for fmt, text in expected.items():
        assert cli("affected", hostile_log, "--format", fmt).stdout == text, fmt


@pytest.mark.slow
@pytest.mark.parametrize("fmt", ["jsonl", "csv"])
def test_a_reader_that_stops_early_ends_the_columnar_writer_quietly(fmt):
    import subprocess
    import sys

    child = subprocess.Popen([sys.executable, "-m", "mailmortem", "affected", "sample_logs/mixed", "--format", fmt],
                             stdout=subprocess.PIPE, stderr=subprocess.PIPE)
    assert child.stdout.readline()  # like `| head -1`: the rest (over a pipe's buffer) meets a closed pipe
    child.stdout.close()
    stderr = child.stderr.read().decode()
    assert child.wait() == 0 and "Error" not in stderr, stderr
