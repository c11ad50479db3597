"""`sentlog check` compares campaign and step in normal form, on DuckDB and PostgreSQL, and refuses a
--campaign/--step that names nothing in the sent-log instead of answering "not sent"."""

from __future__ import annotations

import datetime as dt

import pytest

from remediation import reservations, sentlog
from remediation.store import open_store

NOW = dt.datetime(2026, 11, 28, 9, 0, tzinfo=dt.timezone.utc)


@pytest.fixture(params=["duckdb", "postgres"])
def db(request, tmp_path):
    """A sent-log holding campaign C1: jane step 1, sam step 2, lee with no step."""
    target = str(tmp_path / "mm.duckdb") if request.param == "duckdb" else request.getfixturevalue("pg_dsn")
    store = open_store(target)
    sentlog.ensure_schema(store)
    for step, who in (("1", "jane"), ("2", "sam"), ("", "lee")):
        sentlog.record_send(store, "C1", step, f"{who}@acme.com", f"m-{who}", NOW)
    if store.kind == "postgres":
        store.conn.commit()
    store.close()
    return target


def check(cli, db, campaign, *args):
    return cli("sentlog", "check", "--db", db, "--campaign", campaign, *args)


@pytest.mark.parametrize("campaign,step", [("C1", None), ("c1", None), (" C1", None), ("C1", "01"), ("c1 ", " 1"),
                                           ("C1", "1")])
def test_every_spelling_of_the_stored_campaign_and_step_is_already_sent(cli, db, campaign, step):
    result = check(cli, db, campaign, "--recipient", "jane@acme.com", *(("--step", step) if step else ()))
    assert result.exit_code == 3, result.output
    assert result.stdout.startswith("already sent: jane@acme.com got ") and "(msg m-jane, 2026-11-28" in result.stdout


def test_a_person_never_sent_in_an_existing_campaign_is_not_sent(cli, db):
    result = check(cli, db, "c1", "--step", "1", "--recipient", "nobody@acme.com")
    assert (result.exit_code, result.stdout) == (0, "not sent: nobody@acme.com has no record for c1 step 1\n")


def test_a_row_of_unknown_step_is_already_sent_for_any_step(cli, db):
    assert check(cli, db, "c1", "--step", "9", "--recipient", "lee@acme.com").exit_code == 3


@pytest.mark.parametrize("campaign,step,named", [
    ("c-1", None, "the sent-log's campaigns: 'C1'"),
    ("C 1", None, "the sent-log's campaigns: 'C1'"),
    ("c1", "3", "the sent-log's steps of campaign 'c1': '', '1', '2'"),
])
def test_a_filter_that_names_nothing_is_refused_naming_what_exists(cli, db, campaign, step, named):
    result = check(cli, db, campaign, "--recipient", "nobody@acme.com", *(("--step", step) if step else ()))
    assert (result.exit_code, result.stdout) == (1, "")
    flag = f"--step {step!r}" if step else f"--campaign {campaign!r}"
    assert result.stderr.startswith(f"Error: {flag} matches no sent-log row") and result.stderr.count("\n") == 1
    assert named in result.stderr and "--no-sends-yet" in result.stderr


def test_no_sends_yet_answers_for_a_new_campaign(cli, db):
    result = check(cli, db, "c-99", "--step", "1", "--recipient", "jane@acme.com", "--no-sends-yet")
    assert result.exit_code == 0
    assert result.stdout == ("not sent: jane@acme.com has no record for c-99 step 1 "
                             "(--no-sends-yet: the sent-log holds no such campaign)\n")


def test_a_refused_hostile_campaign_is_shown_escaped(cli, db):
    result = check(cli, db, "c\x1b[2J\u202e1", "--recipient", "nobody@acme.com")
    assert result.exit_code == 1 and "\x1b" not in result.stderr and "\u202e" not in result.stderr


def test_a_reservation_in_another_spelling_is_already_sent(cli, db):
    store = open_store(db)
    reservations.reserve(store, "c1", "03", "kim@acme.com", None, "w1", 1)
    if store.kind == "postgres":
        store.conn.commit()
    store.close()
    result = check(cli, db, "C1", "--step", "3", "--recipient", "kim@acme.com")  # a hit goes before any refusal
    assert result.exit_code == 3 and result.stdout.startswith("already sent (unconfirmed): kim@acme.com was reserved")
