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
