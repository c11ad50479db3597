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


@pytest.mark.parametrize("args", [("affected", "--format", "csv"), ("affected", "--format", "json"),
                                  ("affected", "--format", "jsonl"), ("affected",), ("diagnose", "--format", "json"),
                                  ("diagnose",)])
def test_no_writer_lets_a_control_character_through(cli, hostile_log, args):
    result = cli(args[0], hostile_log, *args[1:])
    assert result.exit_code == 0, result.stderr
    assert not [c for c in RAW if c in result.stdout]


def test_json_escapes_round_trip_to_the_logged_text(cli, hostile_log):
    result = cli("affected", hostile_log, "--format", "json")
    assert "\\u001b" in result.stdout and "\\u202e" in result.stdout
    workers = {send["worker"] for row in json.loads(result.stdout) for send in row["sends"]}
    assert HOSTILE_WORKER in workers


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
