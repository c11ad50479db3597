"""`backfill-sentlog` and `sentlog check` as a user runs them."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

FIX = Path(__file__).resolve().parent.parent / "fixtures" / "providers"
SG = str(FIX / "sendgrid-events.jsonl")


@pytest.mark.slow
def test_backfill_into_default_duckdb_says_so_and_rerun_inserts_zero(cli, tmp_path, monkeypatch):
    monkeypatch.chdir(tmp_path)
    monkeypatch.delenv("DATABASE_URL", raising=False)
    first = cli("backfill-sentlog", "--provider-export", SG, "--no-step", "--format", "json")
    assert first.exit_code == 0, first.stderr
    assert "writing to ./mailmortem.duckdb (no --db or DATABASE_URL given)" in first.stderr
    doc = json.loads(first.stdout)
    assert (doc["sends_found"], doc["inserted"]) == (4, 4)
    assert doc["malformed"][0]["source_line"] == 8
    assert doc["duplicates_in_export"][0]["recipient"] == "jane@acme.com"
    again = json.loads(cli("backfill-sentlog", "--provider-export", SG, "--no-step", "--format", "json").stdout)
    assert (again["inserted"], again["already_present"]) == (0, 4)
    assert (tmp_path / "mailmortem.duckdb").exists()


@pytest.mark.slow
def test_backfill_postgres_and_check_exit_codes(cli, pg_dsn):
    result = cli("backfill-sentlog", "--provider-export", SG, "--no-step", "--db", pg_dsn)
    assert result.exit_code == 0, result.stderr
    assert "inserted" in result.stdout and "writing to" not in result.stderr
    hit = cli("sentlog", "check", "--db", pg_dsn, "--campaign", "c-42", "--step", "1", "--recipient", "Jane@Acme.com")
    assert hit.exit_code == 3
    assert hit.stdout.startswith("already sent: jane@acme.com got c-42 step 1") and hit.stdout.count("\n") == 1
    miss = cli("sentlog", "check", "--db", pg_dsn, "--campaign", "c-42", "--step", "1", "--recipient", "nobody@acme.com")
    assert (miss.exit_code, miss.stdout.strip()) == (0, "not sent: nobody@acme.com has no record for c-42 step 1")
    new_step = ("sentlog", "check", "--db", pg_dsn, "--campaign", "c-42", "--step", "2", "--recipient", "jane@acme.com")
    assert cli(*new_step).exit_code == 1  # the sent-log holds no step 2 of c-42
    assert cli(*new_step, "--no-sends-yet").stdout.startswith("not sent: jane@acme.com has no record for c-42 step 2")


def test_dry_run_writes_nothing(cli, tmp_path):
    db = tmp_path / "x.duckdb"
    result = cli("backfill-sentlog", "--provider-export", SG, "--no-step", "--db", str(db), "--dry-run", "--format",
                 "json")
    assert result.exit_code == 0 and json.loads(result.stdout)["inserted"] is None
    assert not db.exists()


def test_generic_csv_with_map(cli, tmp_path):
    result = cli("backfill-sentlog", "--provider-export", FIX / "generic.csv", "--provider", "csv",
                 "--map", "recipient=To", "--map", "msg_id=Message ID", "--step", "1", "--db", tmp_path / "m.duckdb",
                 "--format", "json")
    assert result.exit_code == 0, result.stderr
    assert json.loads(result.stdout)["inserted"] == 3


@pytest.mark.parametrize("args,message", [
    (["--provider-export", FIX / "truncated.json"], "truncated JSON"),
    (["--provider-export", FIX / "resend-sent.json", "--provider", "ses"], "no ses events found"),
    (["--provider-export", FIX / "opens-only.json"], "no send events in the export"),
    (["--provider-export", FIX / "nope.json"], "no such file"),
    (["--provider-export", FIX / "generic.csv", "--provider", "csv", "--map", "oops"], "expected FIELD=COLUMN"),
])
def test_bad_input_is_one_line_exit_1(cli, tmp_path, args, message):
    result = cli("backfill-sentlog", *args, "--db", tmp_path / "m.duckdb")
    assert result.exit_code == 1
    assert result.stderr.startswith("Error: ") and message in result.stderr
    assert result.stderr.count("\n") == 1 and "Traceback" not in result.stderr


@pytest.mark.slow
@pytest.mark.parametrize("dsn", [
    "postgresql://mm:s3cretpw@127.0.0.1:1/nodb",           # unreachable server
    "postgresql://mm:s3cretpw@127.0.0.1:5432/nodb?sslmode=bogus",  # bad DSN
])
def test_database_errors_never_print_the_password(cli, dsn):
    for args in (["backfill-sentlog", "--provider-export", SG, "--no-step"],
                 ["sentlog", "check", "--campaign", "c", "--recipient", "a@b"]):
        result = cli(*args, "--db", dsn)
        assert result.exit_code == 1
        assert result.stderr.startswith("Error: ") and result.stderr.count("\n") == 1
        assert "s3cretpw" not in result.stderr + result.stdout


def test_help_has_examples(cli):
    for args in (["backfill-sentlog", "--help"], ["sentlog", "check", "--help"], ["sentlog", "--help"]):
        result = cli(*args)
        assert result.exit_code == 0 and "Examples:" in result.stdout


def test_an_unconfirmed_reservation_is_sent_for_check_listed_and_released_by_a_person(cli, pg_dsn):
    import psycopg

    from remediation import reservations, sentlog

    with psycopg.connect(pg_dsn) as conn:
        sentlog.ensure_schema(conn)
        reservations.reserve(conn, "c-42", "1", "jane@acme.com", "cand-7", "host:123", 9)
        conn.commit()
    scope = ["--db", pg_dsn, "--campaign", "c-42", "--step", "1"]
    hit = cli("sentlog", "check", *scope, "--recipient", "Jane Doe <JANE@acme.com>")
    assert hit.exit_code == 3 and hit.stdout.startswith("already sent (unconfirmed): jane@acme.com was reserved")
    listed = cli("sentlog", "unconfirmed", "--db", pg_dsn, "--format", "json")
    assert listed.exit_code == 0
    assert [(r["recipient"], r["candidate"], r["worker"]) for r in json.loads(listed.stdout)] == \
        [("jane@acme.com", "cand-7", "host:123")]
    dry = cli("sentlog", "release", *scope, "--recipient", "jane@acme.com")
    assert dry.exit_code == 0 and "Dry run: nothing changed" in dry.stderr
    assert cli("sentlog", "check", *scope, "--recipient", "jane@acme.com").exit_code == 3
    done = cli("sentlog", "release", *scope, "--recipient", "jane@acme.com", "--apply")
    assert done.exit_code == 0 and "released 1 reservation(s)" in done.stderr
    assert cli("sentlog", "check", *scope, "--recipient", "jane@acme.com").exit_code == 1  # nothing holds c-42 now
    assert cli("sentlog", "check", *scope, "--recipient", "jane@acme.com", "--no-sends-yet").exit_code == 0
    again = cli("sentlog", "release", *scope, "--recipient", "jane@acme.com", "--apply")
    assert again.exit_code == 1 and again.stderr.startswith("Error: no reservation for jane@acme.com")
    empty = cli("sentlog", "unconfirmed", "--db", pg_dsn)
    assert (empty.exit_code, empty.stdout, empty.stderr) == (0, "", "No unconfirmed send reservations.\n")


def test_unconfirmed_filters_compare_normalised_and_one_that_names_nothing_is_refused(cli, pg_dsn):
    import psycopg

    from remediation import reservations, sentlog

    with psycopg.connect(pg_dsn) as conn:
        sentlog.ensure_schema(conn)
        reservations.reserve(conn, "c-42", "1", "jane@acme.com", None, "host:1", 1)
        conn.commit()
    variant = cli("sentlog", "unconfirmed", "--db", pg_dsn, "--campaign", " C-42", "--step", "1 ", "--format", "json")
    assert variant.exit_code == 0 and [r["recipient"] for r in json.loads(variant.stdout)] == ["jane@acme.com"]
    other = cli("sentlog", "unconfirmed", "--db", pg_dsn, "--campaign", "c-43")
    assert (other.exit_code, other.stdout) == (1, "")
    assert other.stderr == "Error: no reservation matches --campaign 'c-43'; reservations exist for: c-42 step 1\n"
    step = cli("sentlog", "unconfirmed", "--db", pg_dsn, "--campaign", "c-42", "--step", "2")
    assert step.exit_code == 1 and "no reservation matches --campaign 'c-42' --step '2'" in step.stderr


def test_unconfirmed_on_a_store_without_reservations_is_an_error_not_none(cli, pg_dsn):
    result = cli("sentlog", "unconfirmed", "--db", pg_dsn)
    assert (result.exit_code, result.stdout) == (1, "")
    assert result.stderr.startswith("Error: no send_reservation table here")
