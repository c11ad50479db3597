"""`mailmortem ab-contamination` and `ab-assign` end to end, from small hand-written logfmt files."""

from __future__ import annotations

import csv
import io
import json

import pytest

from forensics.ab import assign_arm

TEST = "subj-2026-11"
HOSTILE = [
    "=cmd|' /C calc'!A0",
    '+1 "quoted" it',
    "-2+3",
    "@SUM(A1:A9)",
    "\x1b[31m<script>alert(1)</script>",
]


def line(minute, email, variant, msg, lead=None, test=TEST):
    lead_part = f' lead_id="{lead}"' if lead is not None else ""
    ts = f"2026-11-28T{9 + minute // 60:02d}:{minute % 60:02d}:03.221Z"
    return (f"{ts} event=send worker=w1 campaign=c-1 step=1 email={email}{lead_part} "
            f"msg_id=<{msg}@mail.x> test_id={test} variant={variant}")


def write_log(path, clean_a=0, clean_b=0, mixed=0, hostile=False, extra=()):
    lines, n = [], 0
    for arm, count in (("A", clean_a), ("B", clean_b)):
        for i in range(count):
            n += 1
            lines.append(line(n % 600, f"{arm.lower()}{i}@x.co", arm, f"m{n}"))
    for i in range(mixed):
        lines += [line(i % 300, f"mix{i}@x.co", "A", f"mixa{i}"), line(300 + i % 300, f"Mix{i}@X.co", "B", f"mixb{i}")]
    if hostile:
        for i, lead in enumerate(HOSTILE):
            lead = lead.replace('"', '\\"')
            lines += [line(i, f"h{i}@x.co", "B", f"ha{i}", lead), line(100 + i, f"h{i}@x.co", "A", f"hb{i}", lead)]
    path.write_text("\n".join(list(lines) + list(extra)) + "\n", encoding="utf-8")
    return path


@pytest.fixture()
def logs(tmp_path):
    return write_log(tmp_path / "worker-1.log", clean_a=45, clean_b=43, mixed=12)


@pytest.mark.slow
def test_report_table(cli, logs):
    result = cli("ab-contamination", "--test-id", TEST, logs)
    assert result.exit_code == 0, result.stderr
    assert result.stdout.startswith(f"Test {TEST}: 100 people, 12 contaminated (12.0%); SRM chi-squared 0.05, 1 dof")
    assert "mix0@x.co" in result.stdout and "Contaminated people" in result.stdout
    assert "Warning: 12 of 100 people (12.0%) in test subj-2026-11 received more than one variant" in result.stderr


def test_report_json_numbers_match_scipy(cli, logs):
    from scipy import stats

    result = cli("ab-contamination", "--test-id", TEST, logs, "--format", "json")
    doc = json.loads(result.stdout)
    assert (doc["units"], doc["contaminated"], doc["contamination_warning"]) == (100, 12, True)
    arms = {a["variant"]: a for a in doc["arms"]}
    assert (arms["A"]["units_all"], arms["A"]["units_clean"], arms["B"]["units_all"], arms["B"]["units_clean"]) == \
        (57, 45, 55, 43)
    assert doc["srm"]["p_value"] == pytest.approx(stats.chisquare([45, 43]).pvalue)
    assert doc["plan"] is None and doc["applied"] is None


@pytest.mark.slow
def test_weights_flag_a_sample_ratio_mismatch(cli, tmp_path):
    logs = write_log(tmp_path / "w.log", clean_a=150, clean_b=50)
    result = cli("ab-contamination", "--test-id", TEST, logs, "--weights", "A=50,B=50")
    assert result.exit_code == 0
    assert "(MISMATCH)" in result.stdout and "Warning: sample-ratio mismatch in test subj-2026-11" in result.stderr
    fine = cli("ab-contamination", "--test-id", TEST, logs, "--weights", "A=75,B=25")
    assert "MISMATCH" not in fine.stdout and "mismatch" not in fine.stderr


@pytest.mark.slow
def test_csv_is_a_spreadsheet_safe_exclusion_list(cli, tmp_path):
    logs = write_log(tmp_path / "w.log", clean_a=5, clean_b=5, mixed=2, hostile=True)
    result = cli("ab-contamination", "--test-id", TEST, logs, "--format", "csv")
    assert result.exit_code == 0
    rows = list(csv.DictReader(io.StringIO(result.stdout)))
    assert len(rows) == 2 + len(HOSTILE) and {r["reason"] for r in rows} == {"multiple-variants"}
    for row in rows:
        assert not any(cell.startswith(("=", "+", "-", "@")) for cell in row.values())
    units = {r["unit"] for r in rows}
    assert {"'=cmd|' /C calc'!A0", "'+1 \"quoted\" it", "'-2+3", "'@sum(a1:a9)"} <= units  # an id with @ is lower-cased like an address
    assert "\x1b" not in result.stdout and "\\x1b[31m<script>alert(1)</script>" in units
    assert {r["first_variant"] for r in rows if r["unit"].startswith("'")} == {"B"}


@pytest.mark.slow
def test_table_escapes_control_characters(cli, tmp_path):
    logs = write_log(tmp_path / "w.log", clean_a=3, clean_b=3, hostile=True)
    result = cli("ab-contamination", "--test-id", TEST, logs, env={"COLUMNS": "250"})
    assert result.exit_code == 0 and "\x1b" not in result.stdout + result.stderr
    assert "\\x1b[31m<script>" in result.stdout


def test_unknown_test_id_is_one_line_error(cli, logs):
    result = cli("ab-contamination", "--test-id", "subj-2099", logs)
    assert result.exit_code == 1 and result.stdout == ""
    assert result.stderr == "Error: no sends with test_id 'subj-2099' (tests in these logs: subj-2026-11)\n"


@pytest.mark.parametrize("weights, message", [("A=50", "give at least two arms"), ("A=x,B=1", "not a number")])
def test_bad_weights_are_usage_errors(cli, logs, weights, message):
    result = cli("ab-contamination", "--test-id", TEST, logs, "--weights", weights)
    assert result.exit_code == 2 and message in result.stderr


@pytest.mark.slow
def test_weights_must_name_the_arms_seen(cli, logs):
    result = cli("ab-contamination", "--test-id", TEST, logs, "--weights", "A=50,C=50")
    assert result.exit_code == 1
    assert result.stderr == "Error: variant 'B' is in the logs but not in --weights\n"


def _pg_count(dsn, table):
    import psycopg

    with psycopg.connect(dsn) as conn:
        exists = conn.execute("SELECT to_regclass(%s)", (table,)).fetchone()[0]
        return None if exists is None else conn.execute(f"SELECT count(*) FROM {table}").fetchone()[0]


def _with_password(dsn):
    return dsn.replace("postgres@", "postgres:Sup3rS3cret@", 1)  # trust auth: accepted, never checked


@pytest.mark.slow
def test_dry_run_then_apply_then_nothing_on_postgres(cli, logs, pg_dsn):
    dsn = _with_password(pg_dsn)
    dry = cli("ab-contamination", "--test-id", TEST, logs, "--db", dsn)
    assert dry.exit_code == 0
    assert "ab_exclusions   + 12 contaminated people" in dry.stderr and "Dry run: nothing was written" in dry.stderr
    assert _pg_count(pg_dsn, "ab_exclusions") is None and _pg_count(pg_dsn, "ab_assignments") is None
    applied = cli("ab-contamination", "--test-id", TEST, logs, "--db", dsn, "--apply", "--format", "json")
    assert applied.exit_code == 0, applied.stderr
    doc = json.loads(applied.stdout)
    assert (doc["applied"]["exclusions_written"], doc["applied"]["assignments_written"]) == (12, 100)
    assert (_pg_count(pg_dsn, "ab_exclusions"), _pg_count(pg_dsn, "ab_assignments")) == (12, 100)
    again = cli("ab-contamination", "--test-id", TEST, logs, "--db", dsn, "--apply")
    assert "0 exclusions and 0 assignments written; 100 people already had an assignment, kept" in again.stderr
    for result in (dry, applied, again):
        assert "Sup3rS3cret" not in result.stdout + result.stderr
    assert "postgres:***@" in dry.stderr


@pytest.mark.slow
def test_apply_to_duckdb_file_and_ab_assign_reads_it_back(cli, logs, tmp_path):
    db = tmp_path / "state.duckdb"
    dry = cli("ab-contamination", "--test-id", TEST, logs, "--db", db, "--format", "jsonl")
    assert dry.exit_code == 0 and not db.exists()  # a dry run does not even create the file
    assert len(dry.stdout.splitlines()) == 12 and json.loads(dry.stdout.splitlines()[0])["reason"] == "multiple-variants"
    assert cli("ab-contamination", "--test-id", TEST, logs, "--db", db, "--apply").exit_code == 0
    stored = cli("ab-assign", "--test-id", TEST, "--candidate", " MIX3@x.co", "--db", db, "--format", "json")
    doc = json.loads(stored.stdout)
    assert (doc["unit"], doc["variant"], doc["source"]) == ("mix3@x.co", "A", "stored")  # first-seen, not the hash
    fresh = json.loads(cli("ab-assign", "--test-id", TEST, "--candidate", "new-person", "--db", db,
                           "--format", "json").stdout)
    assert fresh["source"] == "hash" and fresh["variant"] == assign_arm(TEST, "new-person", {"A": 1, "B": 1})


def test_unreachable_database_error_hides_password(cli, logs):
    dsn = "postgresql://mm:Sup3rS3cret@127.0.0.1:1/nowhere"
    result = cli("ab-contamination", "--test-id", TEST, logs, "--db", dsn, "--apply")
    assert result.exit_code == 1 and "Sup3rS3cret" not in result.stdout + result.stderr
    assert result.stderr.splitlines()[-1].startswith("Error: cannot connect to postgresql://mm:***@127.0.0.1:1/nowhere")


def test_ab_assign_is_stable_and_matches_the_library(cli):
    args = ("ab-assign", "--test-id", TEST, "--candidate", "cand-8812", "--format", "csv")
    outputs = {cli(*args).stdout for _ in range(3)}
    assert len(outputs) == 1
    row = next(csv.DictReader(io.StringIO(outputs.pop())))
    assert row == {"test_id": TEST, "unit": "cand-8812", "variant": assign_arm(TEST, "cand-8812", {"A": 1, "B": 1}),
                   "source": "hash"}


def test_ab_assign_weights_arms_and_salt(cli):
    weights = {"ctl": 9.0, "new": 1.0}
    for candidate in ("c1", "c2", "c3", "c4"):
        result = cli("ab-assign", "--test-id", "t", "--candidate", candidate, "--weights", "ctl=9,new=1",
                     "--salt", "s", "--format", "json")
        assert json.loads(result.stdout)["variant"] == assign_arm("t", candidate, weights, salt="s")
    mismatch = cli("ab-assign", "--test-id", "t", "--candidate", "c1", "--arms", "A,B", "--weights", "A=1,C=1")
    assert mismatch.exit_code == 1 and mismatch.stderr == "Error: --arms and --weights name different arms\n"
    empty = cli("ab-assign", "--test-id", "t", "--candidate", "  ")
    assert empty.exit_code == 1 and empty.stderr == "Error: --candidate is empty\n"


def test_ab_assign_hostile_candidate_is_safe(cli):
    result = cli("ab-assign", "--test-id", "t", "--candidate", "=cmd\x1b[2J", "--format", "csv")
    assert result.exit_code == 0 and "\x1b" not in result.stdout
    result = cli("ab-assign", "--test-id", "t", "--candidate", "=cmd\x1b[2J")
    assert "\x1b" not in result.stdout and "=cmd\\x1b[2J" in result.stdout


@pytest.mark.parametrize("command", ["ab-contamination", "ab-assign"])
def test_help_has_examples(cli, command):
    result = cli(command, "--help")
    assert result.exit_code == 0 and "Examples:" in result.stdout and f"mailmortem {command} --test-id" in result.stdout
