"""The durable sent_log on real PostgreSQL and DuckDB: check-before-send, record, backfill, concurrency."""

from __future__ import annotations

import datetime as dt
import threading
from pathlib import Path

import pytest

from forensics.errors import InputError
from forensics.providers import read_events
from remediation import sentlog
from remediation.store import open_store

FIX = Path(__file__).parent / "fixtures" / "providers"


@pytest.fixture(params=["duckdb", "postgres"])
def db(request, tmp_path):
    if request.param == "duckdb":
        return str(tmp_path / "mm.duckdb")
    return request.getfixturevalue("pg_dsn")


def _commit(store):
    if store.kind == "postgres":
        store.conn.commit()


def test_check_record_check_normalises_addresses(db):
    store = open_store(db)
    sentlog.ensure_schema(store)
    assert not sentlog.already_sent(store, "c-42", "1", "Jane@Acme.com")
    assert sentlog.record_send(store, "c-42", "1", " Jane@Acme.COM ", "<m-1@app>", dt.datetime.now(dt.timezone.utc))
    assert not sentlog.record_send(store, "c-42", "1", "jane@acme.com", "m-1@app")  # same (msg_id, recipient)
    _commit(store)
    assert sentlog.already_sent(store, "c-42", "1", "jane@acme.com")
    assert sentlog.already_sent(store, "c-42", None, "jane@acme.com")  # any step
    assert not sentlog.already_sent(store, "c-42", "2", "jane@acme.com")
    assert not sentlog.already_sent(store, "c-43", "1", "jane@acme.com")
    store.close()


def test_unknown_step_row_blocks_every_step(db):
    store = open_store(db)
    sentlog.ensure_schema(store)
    sentlog.record_send(store, "c-1", None, "a@b.c", "m")
    _commit(store)
    assert sentlog.already_sent(store, "c-1", "3", "a@b.c")
    store.close()


def test_record_send_does_not_commit_inside_a_callers_transaction(pg_dsn):
    import psycopg

    with psycopg.connect(pg_dsn) as setup:
        sentlog.ensure_schema(setup)
        setup.commit()
    with psycopg.connect(pg_dsn) as conn:
        with conn.transaction() as tx:
            sentlog.record_send(conn, "c-1", "1", "a@b.c", "m-1")
            raise_rollback = psycopg.Rollback(tx)
            raise raise_rollback
    with psycopg.connect(pg_dsn) as conn:
        assert not sentlog.already_sent(conn, "c-1", "1", "a@b.c")


def test_backfill_then_rerun_inserts_nothing(db):
    read = read_events([str(FIX / "sendgrid-events.jsonl"), str(FIX / "ses-firehose.jsonl")])
    store = open_store(db)
    first = sentlog.backfill_exports(store, read)
    again = sentlog.backfill_exports(store, read)
    assert (first["sends_found"], first["inserted"], first["already_present"]) == (6, 6, 0)
    assert (again["inserted"], again["already_present"]) == (0, 6)
    assert sentlog.count_rows(store) == 6
    assert sentlog.already_sent(store, "c-9", "2", "Ann@Example.org")
    dupes = [(d["campaign"], d["recipient"], d["sends"]) for d in first["duplicates_in_export"]]
    assert dupes == [("c-42", "jane@acme.com", 2)]
    store.close()


def test_export_without_sends_is_an_error(db):
    read = read_events([str(FIX / "opens-only.json")])
    with pytest.raises(InputError, match="no send events"):
        sentlog.backfill_exports(open_store(db), read)


def test_concurrent_overlapping_backfills_lose_and_double_nothing(pg_dsn):
    a = read_events([str(FIX / "sendgrid-events.jsonl"), str(FIX / "ses-firehose.jsonl")])
    b = read_events([str(FIX / "ses-firehose.jsonl"), str(FIX / "mailgun-events-page.json")])
    results, errors, barrier = [], [], threading.Barrier(4)

    def run(read):
        store = open_store(pg_dsn)
        try:
            barrier.wait()
            results.append(sentlog.backfill_exports(store, read)["inserted"])
        except Exception as exc:  # pragma: no cover - reported below
            errors.append(exc)
        finally:
            store.close()

    threads = [threading.Thread(target=run, args=(r,)) for r in (a, b, a, b)]
    for t in threads:
        t.start()
    for t in threads:
        t.join()
    assert not errors
    store = open_store(pg_dsn)
    assert sentlog.count_rows(store) == 7  # 4 SendGrid + 2 SES + 1 Mailgun, each once
    assert sum(results) == 7
    store.close()
