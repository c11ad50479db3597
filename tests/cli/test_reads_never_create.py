"""Issue 12 items 1, 6 and 11: a read never creates a store or a table and never guesses; the default store
is one store; `sentlog check --candidate` answers for a person across their addresses."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from remediation.errors import RefusedError
from tests.cli.test_ab_cli import TEST, write_log

FIX = Path(__file__).resolve().parent.parent / "fixtures" / "providers"
SG = str(FIX / "sendgrid-events.jsonl")
CHECK = ("sentlog", "check", "--campaign", "c-42", "--step", "1")


@pytest.fixture()
def here(tmp_path, monkeypatch):
    """An empty working directory with no DATABASE_URL."""
    monkeypatch.chdir(tmp_path)
    monkeypatch.delenv("DATABASE_URL", raising=False)
    return tmp_path


@pytest.mark.parametrize("args", [
    CHECK + ("--recipient", "jane@acme.com"),
    ("sentlog", "unconfirmed"),
    ("ab-assign", "--test-id", "t", "--candidate", "c1", "--db", "typo.duckdb"),
    ("audit",),
    ("sentlog", "release", "--campaign", "c-42", "--step", "1", "--recipient", "jane@acme.com"),
    ("sentlog", "release", "--campaign", "c-42", "--step", "1", "--recipient", "jane@acme.com", "--apply",
     "--db", "typo.duckdb"),
])
def test_a_read_with_no_store_creates_none_and_says_what_to_pass(cli, here, args):
    result = cli(*args)
    assert result.exit_code == 1, result.output
    assert result.stderr.startswith("Error: ") and "--db" in result.stderr
    assert list(here.iterdir()) == []


@pytest.mark.slow
def test_a_mistyped_duckdb_path_is_refused_not_created(cli, here):
    cli("backfill-sentlog", "--provider-export", SG, "--no-step", "--db", "real.duckdb")
    result = cli(*CHECK, "--recipient", "jane@acme.com", "--db", "reel.duckdb")
    assert (result.exit_code, result.stdout) == (1, "")
    assert "no DuckDB file at reel.duckdb" in result.stderr
    assert sorted(p.name for p in here.iterdir()) == ["real.duckdb"]
    assert cli(*CHECK, "--recipient", "jane@acme.com", "--db", "real.duckdb").exit_code == 3


@pytest.mark.slow
@pytest.mark.parametrize("recipient", ["", "   ", "not-an-address", "@acme.com", "jane@"])
def test_an_invalid_recipient_is_exit_1_not_not_sent(cli, here, recipient):
    cli("backfill-sentlog", "--provider-export", SG, "--no-step")
    result = cli(*CHECK, "--recipient", recipient)
    assert result.exit_code == 1 and "not an email address" in result.stderr
    assert "not sent" not in result.stdout


@pytest.mark.slow
def test_a_missing_sent_log_is_an_error_and_the_read_does_not_create_it(cli, leads):
    dsn = leads("VALUES (1, 'a@x.co', 'in-progress', 'w1', now() - interval '2 hours')", sent_log=False)
    result = cli(*CHECK, "--recipient", "jane@acme.com", "--db", dsn)
    assert result.exit_code == 1 and "no sent_log table" in result.stderr and "backfill-sentlog" in result.stderr
    requeue = cli("requeue-stale", "--db", dsn, "--older-than", "45m")
    assert requeue.exit_code == 1 and "no sent_log table" in requeue.stderr


@pytest.mark.slow
def test_a_missing_sent_log_in_duckdb_is_an_error(cli, here):
    cli("ab-contamination", "--test-id", TEST, write_log(here / "w.log", clean_a=3, clean_b=3, mixed=1), "--apply",
        "--db", "mailmortem.duckdb")
    result = cli(*CHECK, "--recipient", "jane@acme.com")
    assert result.exit_code == 1 and "no sent_log table" in result.stderr


@pytest.mark.slow
def test_check_by_candidate_spans_their_addresses_and_reservations(cli, here):
    from remediation import reservations
    from remediation.sentlog_check import check
    from remediation.store import open_store

    assert cli("backfill-sentlog", "--provider-export", SG, "--no-step").exit_code == 0  # L-1 is jane@acme.com's
    hit = cli(*CHECK, "--candidate", "L-1")
    assert hit.exit_code == 3 and hit.stdout.startswith("already sent: candidate L-1 (jane@acme.com) got c-42 step 1")
    assert cli(*CHECK, "--candidate", "L-2").exit_code == 0
    store = open_store("mailmortem.duckdb")
    try:
        reservations.reserve(store.conn, "c-42", "2", "jane.doe@gmail.com", "L-1", "w1", 1)
        reservations.reserve(store.conn, "c-9", "1", "sam@acme.com", "L-9", "w1", 1)
        assert check(store, "c-42", "2", candidate="L-1")["unconfirmed"]
        assert check(store, "c-9", "1", recipient="sam@acme.com", candidate="L-9")["unconfirmed"]
        assert check(store, "c-42", "3", candidate="L-1", no_sends_yet=True) is None
        with pytest.raises(RefusedError, match="--step '3' matches no sent-log row"):
            check(store, "c-42", "3", candidate="L-1")
    finally:
        store.close()
    other = cli("sentlog", "check", "--campaign", "c-9", "--step", "1", "--candidate", "L-9")
    assert other.exit_code == 3 and "(sam@acme.com)" in other.stdout
    assert cli("sentlog", "check", "--campaign", "c-42").exit_code == 2  # neither --recipient nor --candidate


@pytest.mark.slow
def test_ab_assign_reads_the_default_store_that_ab_contamination_wrote(cli, here):
    logs = write_log(here / "w.log", clean_a=45, clean_b=43, mixed=12)
    assert cli("ab-contamination", "--test-id", TEST, logs, "--apply").exit_code == 0
    assert (here / "mailmortem.duckdb").exists()
    doc = json.loads(cli("ab-assign", "--test-id", TEST, "--candidate", "mix3@x.co", "--format", "json").stdout)
    assert (doc["variant"], doc["source"]) == ("A", "stored")
    with_b = [f"mix{i}@x.co" for i in range(12)]
    assert all(json.loads(cli("ab-assign", "--test-id", TEST, "--candidate", unit, "--format", "json").stdout)
               ["variant"] == "A" for unit in with_b)
