"""Send reservations on real PostgreSQL and DuckDB: all keys or none, checks, release, settled by a backfill."""

from __future__ import annotations

import datetime as dt

import pyarrow as pa
import pytest

from remediation import reservations, sentlog
from remediation.errors import RefusedError
from remediation.store import open_store

NOW = dt.datetime.now(dt.timezone.utc)


@pytest.fixture(params=["duckdb", "postgres"])
def store(request, tmp_path):
    target = str(tmp_path / "mm.duckdb") if request.param == "duckdb" else request.getfixturevalue("pg_dsn")
    opened = open_store(target)
    sentlog.ensure_schema(opened)
    _commit(opened)
    yield opened
    opened.close()


def _commit(store):
    if store.kind == "postgres":
        store.conn.commit()


def _reserve(store, address, candidate=None, worker="w1", token=1):
    taken = reservations.reserve(store, "c-1", "1", address, candidate, worker, token)
    _commit(store)
    return taken


def test_a_send_takes_every_key_of_the_person_or_none(store):
    assert _reserve(store, "jane@acme.com", "cand-7").ok
    other_address_same_person = _reserve(store, "jane@home.example", "cand-7", worker="w2", token=2)
    assert not other_address_same_person.ok and other_address_same_person.holder["worker"] == "w1"
    assert _reserve(store, "jane@home.example", None, worker="w3", token=3).ok  # its key was withdrawn
    assert not _reserve(store, "jane@acme.com", None, worker="w4", token=4).ok
    assert reservations.reservation_id("c-1", "1", "x@y", "cand-7") == reservations.reservation_id("c-1", "1", "z@w",
                                                                                                  "cand-7")


def test_an_unconfirmed_reservation_counts_as_sent_and_is_listed(store):
    _reserve(store, "jane@acme.com")
    assert sentlog.already_sent(store, "c-1", "1", " Jane Doe <JANE@acme.com>")
    assert sentlog.already_sent(store, "c-1", None, "jane@acme.com")
    assert not sentlog.recorded(store, "c-1", "1", "jane@acme.com")
    assert sentlog.last_send(store, "c-1", "1", "jane@acme.com")["unconfirmed"] is True
    assert [r["recipient"] for r in reservations.unconfirmed(store)] == ["jane@acme.com"]
    sentlog.record_send(store, "c-1", "1", "jane@acme.com", "m-1")
    _commit(store)
    assert reservations.unconfirmed(store) == []  # a recorded send settles it


def test_release_by_a_person_is_refused_when_a_send_is_recorded_or_nothing_is_reserved(store):
    _reserve(store, "jane@acme.com")
    _reserve(store, "bob@acme.com")
    sentlog.record_send(store, "c-1", "1", "bob@acme.com", "m-bob")
    _commit(store)
    with pytest.raises(RefusedError, match="has a recorded send"):
        reservations.release_plan(store, "c-1", "1", "bob@acme.com")
    with pytest.raises(RefusedError, match="no reservation for carol@acme.com"):
        reservations.release_plan(store, "c-1", "1", "carol@acme.com")
    plan = reservations.release_plan(store, "c-1", "1", "JANE@acme.com ")
    assert reservations.release(store, plan, "person:test", "checked") == 1
    assert not sentlog.already_sent(store, "c-1", "1", "jane@acme.com")
    released = store.conn.execute("SELECT recipient, released_by, reason FROM send_reservation_released").fetchall()
    assert [tuple(r) for r in released] == [("jane@acme.com", "person:test", "checked")]


def _sends(*rows):
    names = ("recipient", "msg_id", "sent_at", "campaign", "step")
    return pa.table({name: [row[i] for row in rows] for i, name in enumerate(names)},
                    schema=pa.schema([(n, pa.timestamp("us", tz="UTC") if n == "sent_at" else pa.string())
                                      for n in names]))


@pytest.mark.slow
def test_a_backfill_confirms_the_sent_and_releases_those_it_shows_unsent(store):
    for address in ("sent@acme.com", "unsent@acme.com", "old@acme.com", "unknown-time@acme.com"):
        _reserve(store, address)
    later = dt.datetime.now(dt.timezone.utc) + dt.timedelta(seconds=1)
    sends = _sends(("Sent <SENT@acme.com>", "m-1", later, "c-1", "1"),
                   ("old@acme.com", "m-2", NOW - dt.timedelta(hours=2), "c-0", "1"),  # long before: no proof
                   ("unknown-time@acme.com", "m-3", None, "c-9", "1"),  # any send of unknown time holds it
                   ("someone@else.com", "m-4", later + dt.timedelta(seconds=20), "c-1", "1"))
    short = sentlog.backfill(store, sends, clock_margin_s=60)  # the export does not reach 60 s past them
    assert short.extra["reservations"] == {"confirmed": 1, "released": []}
    result = sentlog.backfill(store, sends, clock_margin_s=5)
    assert [r["recipient"] for r in result.extra["reservations"]["released"]] == ["old@acme.com", "unsent@acme.com"]
    assert [r["recipient"] for r in reservations.unconfirmed(store)] == ["unknown-time@acme.com"]
    assert not sentlog.already_sent(store, "c-1", "1", "unsent@acme.com")
    assert sentlog.recorded(store, "c-1", "1", "sent@acme.com")


def test_library_backfill_stores_addresses_in_their_normal_form(store):
    sentlog.backfill(store, _sends(("Jane Doe <Jane@Acme.com>\u00a0", "m-1", NOW, "c-1", "1"),
                                   ("\tJANE@acme.com", "m-1", NOW, "c-1", "1")))
    assert [tuple(r) for r in store.conn.execute("SELECT recipient, msg_id FROM sent_log").fetchall()] == \
        [("jane@acme.com", "m-1")]


@pytest.mark.slow
def test_a_reservation_holds_the_person_for_every_spelling_of_its_campaign_and_step(store):
    assert _reserve(store, "jane@acme.com").ok  # c-1, step 1
    other = reservations.reserve(store, " C-1", "01", "jane@acme.com", None, "w2", 2)
    assert not other.ok and other.holder["worker"] == "w1"
    assert sentlog.already_sent(store, "C-1", "001", "jane@acme.com")
    assert [r["recipient"] for r in reservations.unconfirmed(store, "C-1", "01")] == ["jane@acme.com"]
    plan = reservations.release_plan(store, "C-1 ", "01", "jane@acme.com")
    assert reservations.release(store, plan, "person:test", "checked") == 1
    assert not sentlog.already_sent(store, "c-1", "1", "jane@acme.com")
    sentlog.record_send(store, "C-1", "1", "bob@acme.com", "m-bob")
    reservations.reserve(store, "c-1", "1", "bob@acme.com", None, "w3", 3)  # its send was recorded as C-1
    _commit(store)
    assert [r["recipient"] for r in reservations.unconfirmed(store)] == ["bob@acme.com"]  # counts as sent
    plan = reservations.release_plan(store, "c-1", "1", "bob@acme.com")
    assert reservations.release(store, plan, "person:test", "checked") == 1
    assert sentlog.already_sent(store, "c-1", "1", "bob@acme.com")  # released, still sent: the sent-log says so


def test_a_reservation_in_another_spelling_waits_for_the_one_being_made(pg_dsn):
    """Two senders spelling one campaign two ways reserve one person at once: the second waits for the first
    to commit, then finds it (the table's key alone would let both through)."""
    import threading

    import psycopg

    with psycopg.connect(pg_dsn, autocommit=True) as setup:
        sentlog.ensure_schema(setup)
    first, second = psycopg.connect(pg_dsn), psycopg.connect(pg_dsn)
    try:
        assert reservations.reserve(first, "c-1", "1", "jane@acme.com", None, "w1", 1).ok  # not committed yet
        waiter = second.execute("SELECT pg_backend_pid()").fetchone()[0]
        second.commit()
        outcome = {}
        thread = threading.Thread(target=lambda: outcome.update(
            taken=reservations.reserve(second, "C-1", "01", "jane@acme.com", None, "w2", 2)))
        thread.start()
        with psycopg.connect(pg_dsn, autocommit=True) as watch:
            while not watch.execute("SELECT EXISTS (SELECT 1 FROM pg_locks WHERE pid = %s AND NOT granted)",
                                    (waiter,)).fetchone()[0]:
                assert thread.is_alive(), outcome
        first.commit()
        thread.join()
        assert not outcome["taken"].ok and outcome["taken"].holder["worker"] == "w1"
    finally:
        first.close()
        second.close()
