"""`mailmortem diagnose / affected / sql` as a user runs them: exit codes and exact messages."""

from __future__ import annotations

import csv
import gzip
import io
import json
import subprocess
import sys
import tempfile
from pathlib import Path

import pytest

GOOD = ("ts=2026-11-28T09:00:00Z event=send worker=w1 pid=1 campaign=c1 step=1 email=a@x.co msg_id=<1@m>\n"
        "ts=2026-11-28T09:01:00Z event=send worker=w2 pid=7 campaign=c1 step=1 email=A@x.co msg_id=<2@m>\n"
        "ts=2026-11-28T09:02:00Z event=send worker=w1 pid=1 campaign=c1 step=1 email=b@x.co msg_id=<3@m>\n")


@pytest.fixture()
def good_log(tmp_path):
    path = tmp_path / "mail-send.log"
    path.write_text(GOOD, encoding="utf-8")
    return path


def test_missing_file(cli, tmp_path):
    result = cli("diagnose", tmp_path / "nope.log")
    assert result.exit_code == 1
    assert result.stderr == f"Error: {tmp_path / 'nope.log'}: no such file or folder\n"


def test_empty_file(cli, tmp_path):
    (tmp_path / "empty.log").write_text("")
    result = cli("diagnose", tmp_path / "empty.log")
    assert result.exit_code == 1
    assert result.stderr == f"Error: {tmp_path / 'empty.log'}: file is empty, nothing to diagnose\n"


def test_unreadable_gzip(cli, tmp_path):
    (tmp_path / "w1.log.gz").write_bytes(b"this is not gzip at all\n")
    result = cli("diagnose", tmp_path / "w1.log.gz")
    assert result.exit_code == 1
    assert result.stderr == f"Error: {tmp_path / 'w1.log.gz'}: unreadable gzip file (not in gzip format)\n"


def test_truncated_gzip(cli, tmp_path):
    blob = gzip.compress(GOOD.encode() * 2000)
    (tmp_path / "w1.log.gz").write_bytes(blob[: len(blob) // 2])
    result = cli("diagnose", tmp_path / "w1.log.gz")
    assert result.exit_code == 1
    assert result.stderr.startswith(f"Error: {tmp_path / 'w1.log.gz'}: ") and result.stderr.count("\n") == 1


@pytest.mark.parametrize("damage", ["truncated", "corrupt"])
def test_damaged_gzip_is_refused_not_read_as_garbled_lines(cli, tmp_path, monkeypatch, damage):
    # DuckDB reads a .gz whose CRC fails without a word (garbled lines, a made-up incident); every .gz is
    # decompressed and checked first: one line naming the file and why, and no partial copy left behind
    blob = gzip.compress(GOOD.encode() * 2000)
    middle = len(blob) // 2
    blob = blob[:middle] if damage == "truncated" else blob[:middle] + bytes(64) + blob[middle + 64:]
    (tmp_path / "w1.log.gz").write_bytes(blob)
    monkeypatch.setenv("TMPDIR", str(tmp_path / "tmp"))
    (tmp_path / "tmp").mkdir()
    result = cli("diagnose", tmp_path / "w1.log.gz")
    assert result.exit_code == 1
    reason = {"truncated": "Compressed file ended before the end-of-stream marker was reached",
              "corrupt": "CRC check failed"}[damage]
    assert result.stderr.startswith(f"Error: {tmp_path / 'w1.log.gz'}: unreadable gzip file ({reason}")
    assert result.stderr.count("\n") == 1
    assert not list((tmp_path / "tmp").rglob("mailmortem-gunzip-*"))


def test_binary_file(cli, tmp_path):
    (tmp_path / "core").write_bytes(b"\x7fELF\x02\x01\x01\x00\x00\x00" * 10)
    result = cli("diagnose", tmp_path / "core")
    assert result.exit_code == 1
    assert result.stderr == f"Error: {tmp_path / 'core'}: binary file, not a text log\n"


def test_unknown_field_target(cli, good_log):
    result = cli("diagnose", good_log, "--field", "mailbox=To")
    assert result.exit_code == 1
    assert result.stderr.startswith("Error: --field 'mailbox=To': unknown field 'mailbox' (known: ts, event,")


def test_unknown_syntax(cli, good_log):
    result = cli("diagnose", good_log, "--syntax", "xml")
    assert result.exit_code == 2
    assert "Error: Invalid value for '--syntax': 'xml' is not one of 'logfmt', 'jsonl', 'csv'." in result.stderr


@pytest.mark.slow
def test_json_output_is_the_contract(cli, good_log):
    result = cli("diagnose", good_log, "--format", "json")
    assert result.exit_code == 0
    doc = json.loads(result.stdout)
    assert doc["version"] == 1
    assert doc["inputs"][0] | {"path": None} == {"path": None, "envelope": None, "syntax": "logfmt", "lines": 3,
                                                  "records": 3, "skipped": 0, "first_skipped_lines": [], "note": None,
                                                  "sender": None}
    assert doc["summary"] == {"sends": 3, "people": 2, "duplicated_people": 1, "extra_sends": 1,
                              "by_kind": {"parallel-worker": 1, "retry": 0, "lease-expiry": 0, "state-loss": 0,
                                          "ab-contamination": 0}}
    [incident] = doc["incidents"]
    assert incident["id"] == "INC-1" and incident["workers"] == ["w1", "w2"]
    assert incident["first_send"] == "2026-11-28T09:00:00.000Z"
    [person] = doc["affected"]
    assert person["recipient"] == "a@x.co" and person["incident"] == "INC-1"
    assert [s["msg_id"] for s in person["sends"]] == ["1@m", "2@m"]


@pytest.mark.slow
def test_fail_on_duplicates_exits_3(cli, good_log):
    assert cli("diagnose", good_log, "--fail-on-duplicates").exit_code == 3
    assert cli("diagnose", good_log).exit_code == 0


@pytest.mark.slow
def test_stdin(cli):
    result = cli("diagnose", "-", "--format", "json", input=GOOD)
    assert result.exit_code == 0
    assert json.loads(result.stdout)["inputs"][0]["path"] == "<stdin>"


@pytest.mark.slow
def test_config_file_maps_fields(cli, tmp_path):
    (tmp_path / "export.csv").write_text("When,To,Message ID,Kind\n2026-11-28T09:00:00Z,a@b.co,<m@x>,send\n"
                                         "2026-11-28T09:00:05Z,a@b.co,<n@x>,send\n")
    (tmp_path / "mm.toml").write_text('[fields]\nts = "When"\nrecipient = "To"\nmsg_id = "Message ID"\nevent = "Kind"\n')
    result = cli("diagnose", tmp_path / "export.csv", "--syntax", "csv", "--config", tmp_path / "mm.toml", "--format", "json")
    assert result.exit_code == 0, result.stderr
    assert json.loads(result.stdout)["summary"]["duplicated_people"] == 1


@pytest.mark.slow
def test_affected_csv_is_spreadsheet_safe(cli, tmp_path):
    (tmp_path / "a.log").write_text(
        'ts=2026-11-28T09:00:00Z event=send worker="=cmd|calc" campaign=c1 step=1 email=x@y.z msg_id=1\n'
        'ts=2026-11-28T09:00:09Z event=send worker=w2 campaign=c1 step=1 email=x@y.z msg_id=2\n')
    result = cli("affected", tmp_path / "a.log", "--format", "csv")
    assert result.exit_code == 0
    [row] = list(csv.DictReader(io.StringIO(result.stdout)))
    assert row["recipient"] == "x@y.z" and row["workers"].startswith("'=cmd|calc")


@pytest.mark.slow
def test_table_shows_control_characters_escaped_and_no_markup(cli, tmp_path):
    (tmp_path / "a.log").write_text(
        'ts=2026-11-28T09:00:00Z event=send worker="[bold red]w\x1b[31m1" campaign=c1 step=1 email=x@y.z msg_id=1\n'
        'ts=2026-11-28T09:00:09Z event=send worker=w2 campaign=c1 step=1 email=x@y.z msg_id=2\n')
    result = cli("diagnose", tmp_path / "a.log")
    assert result.exit_code == 0
    assert "\x1b" not in result.stdout
    assert "[bold red]w\\x1b[31m1" in result.stdout


@pytest.mark.slow
def test_save_then_sql(cli, good_log, tmp_path):
    saved = tmp_path / "case.duckdb"
    assert cli("diagnose", good_log, "--save", saved).exit_code == 0
    result = cli("sql", saved, "select kind, count(*) as n from dup_people group by kind", "--format", "json")
    assert json.loads(result.stdout) == [{"kind": "parallel-worker", "n": 1}]
    bad = cli("sql", saved, "select * from nowhere")
    assert bad.exit_code == 1 and bad.stderr.startswith("Error: query failed: Catalog Error")


@pytest.mark.slow
def test_strict(cli, tmp_path):
    (tmp_path / "a.log").write_text(GOOD + "java.lang.RuntimeException: boom\n")
    assert cli("diagnose", tmp_path / "a.log").exit_code == 0
    result = cli("diagnose", tmp_path / "a.log", "--strict")
    assert result.exit_code == 1
    assert result.stderr == (f"Error: {tmp_path / 'a.log'}:4: not a record (no key=value pairs); "
                             "--strict makes this fatal\n")


@pytest.mark.slow
def test_help_imports_no_heavy_library():
    code = ("import sys\nfrom mailmortem.cli import main\n"
            "try:\n    main(['--help'])\nexcept SystemExit:\n    pass\n"
            "print(sorted(m for m in ('duckdb', 'polars', 'psycopg', 'pyarrow') if m in sys.modules))")
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, check=True).stdout
    assert out.strip().splitlines()[-1] == "[]"


def test_python_dash_m_and_version():
    out = subprocess.run([sys.executable, "-m", "mailmortem", "--version"], capture_output=True, text=True)
    assert out.returncode == 0 and out.stdout.startswith("mailmortem, version ")


@pytest.mark.slow
def test_provider_export_reconciles_by_message_id(cli, tmp_path):
    (tmp_path / "send.log").write_text(
        "ts=2026-11-29T07:06:40Z event=send worker=w1 campaign=c-42 step=1 email=jane@acme.com "
        "msg_id=AAAAAAAAAAAAAAAAAAAAAA\n"  # the X-Message-Id the send API returned
        "ts=2026-11-29T07:06:41Z event=send worker=w1 campaign=c-42 step=1 email=zed@acme.com msg_id=<never@seen>\n")
    (tmp_path / "sg.jsonl").write_text(
        '[{"email":"Jane@Acme.com","timestamp":1764400000,"event":"processed","sg_event_id":"e1",'
        '"sg_message_id":"AAAAAAAAAAAAAAAAAAAAAA.filter0001.1.2.0","campaign":"c-42","step":"1"}]\n'
        '[{"email":"bob@acme.com","timestamp":1764400001,"event":"processed","sg_event_id":"e3",'
        '"sg_message_id":"BBBBBBBBBBBBBBBBBBBBBB.filter0001.1.3.0","campaign":"c-42","step":"1"}]\n')
    result = cli("diagnose", tmp_path / "send.log", "--provider-export", tmp_path / "sg.jsonl", "--format", "json")
    assert result.exit_code == 0, result.stderr
    rec = json.loads(result.stdout)["reconciliation"]
    assert [s["recipient"] for s in rec["log_sends_not_at_provider"]["sample"]] == ["zed@acme.com"]
    assert [s["recipient"] for s in rec["provider_sends_not_in_log"]["sample"]] == ["bob@acme.com"]
    table = cli("diagnose", tmp_path / "send.log", "--provider-export", tmp_path / "sg.jsonl")
    assert "log sends not at provider: 1" in table.stdout


@pytest.mark.slow
def test_bad_memory_limit(cli, good_log, tmp_path, monkeypatch):
    # a private temp folder: other test processes make and remove spill folders in the shared one meanwhile
    monkeypatch.setattr(tempfile, "tempdir", str(tmp_path))
    result = cli("diagnose", good_log, "--memory-limit", "lots")
    assert result.exit_code == 1
    assert result.stderr == "Error: --memory-limit 'lots': expected a size such as 512MB or 2GB\n"
    assert list(tmp_path.glob("mailmortem-spill-*")) == []  # none left behind
    assert cli("diagnose", good_log, "--memory-limit", "256MB").exit_code == 0
