"""The durable sent_log on real PostgreSQL and DuckDB: check-before-send, record, backfill, concurrency."""

from __future__ import annotations

import datetime as dt
import threading
from pathlib import Path

import pytest

from forensics.errors import InputError
from forensics.providers import read_events
from forensics.providers.resolve import Stated
from remediation import sentlog
from remediation.store import open_store

FIX = Path(__file__).parent / "fixtures" / "providers"
# The SendGrid fixture's send to dave@acme.com names campaign c-7 and no step: backed up only when the user says
# the export has no steps there (stored as a row that counts for every step of c-7).
NO_STEP = Stated(no_step=True)


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


@pytest.mark.slow
def test_backfill_then_rerun_inserts_nothing(db):
    read = read_events([str(FIX / "sendgrid-events.jsonl"), str(FIX / "ses-firehose.jsonl")])
    store = open_store(db)
    first = sentlog.backfill_exports(store, read, stated=NO_STEP)
    again = sentlog.backfill_exports(store, read, stated=NO_STEP)
    assert (first["sends_found"], first["inserted"], first["already_present"]) == (6, 6, 0)
    assert (again["inserted"], again["already_present"]) == (0, 6)
    assert sentlog.count_rows(store) == 6
    assert sentlog.already_sent(store, "c-9", "2", "Ann@Example.org")
    dupes = [(d["campaign"], d["recipient"], d["sends"]) for d in first["duplicates_in_export"]]
    assert dupes == [("c-42", "jane@acme.com", 2)]
    store.close()


@pytest.mark.slow
def test_export_without_sends_is_an_error(db):
    read = read_events([str(FIX / "opens-only.json")])
    with pytest.raises(InputError, match="no send events"):
        sentlog.backfill_exports(open_store(db), read)


@pytest.mark.slow
def test_concurrent_overlapping_backfills_lose_and_double_nothing(pg_dsn):
    a = read_events([str(FIX / "sendgrid-events.jsonl"), str(FIX / "ses-firehose.jsonl")])
    b = read_events([str(FIX / "ses-firehose.jsonl"), str(FIX / "mailgun-events-page.json")])
    results, errors, barrier = [], [], threading.Barrier(4)

    def run(read):
        store = open_store(pg_dsn)
        try:
            barrier.wait()
            results.append(sentlog.backfill_exports(store, read, stated=NO_STEP)["inserted"])
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


# ----------------------------------------------------------------- bulk paths: new table, empty table, populated table


def _schema(conn) -> list:
    rows = conn.execute("SELECT indexdef FROM pg_indexes WHERE tablename = 'sent_log' ORDER BY indexname").fetchall()
    rows += conn.execute("SELECT conname, pg_get_constraintdef(oid) FROM pg_constraint "
                         "WHERE conrelid = 'sent_log'::regclass ORDER BY conname").fetchall()
    rows += conn.execute("SELECT column_name, data_type, is_nullable, column_default FROM information_schema.columns "
                         "WHERE table_name = 'sent_log' ORDER BY ordinal_position").fetchall()
    return rows


@pytest.mark.slow
def test_first_backfill_indexes_after_loading_and_ends_with_the_ensure_schema_table(pg_dsn):
    import psycopg

    read = read_events([str(FIX / "sendgrid-events.jsonl")])
    store = open_store(pg_dsn)
    assert sentlog.backfill_exports(store, read, stated=NO_STEP)["inserted"] == 4
    with psycopg.connect(pg_dsn, autocommit=True) as conn:
        loaded = _schema(conn)
        conn.execute("DROP TABLE sent_log")
        sentlog.ensure_schema(conn)
        assert _schema(conn) == loaded
        assert len([r for r in loaded if str(r[0]).startswith("CREATE")]) == 2  # the key and the lookup index
    # the key is live: a second run and a hand-recorded duplicate are both refused
    assert sentlog.backfill_exports(store, read, stated=NO_STEP)["inserted"] == 4  # table re-created above
    assert not sentlog.record_send(store, "c-42", "1", "jane@acme.com", "AAAAAAAAAAAAAAAAAAAAAA")
    store.close()


def _rows(store) -> list[tuple]:
    cur = store.conn.execute("SELECT campaign, step, recipient, candidate, msg_id, sent_at, provider, source_file "
                             "FROM sent_log ORDER BY msg_id, recipient")
    return [tuple(r) for r in cur.fetchall()]


@pytest.mark.slow
@pytest.mark.parametrize("before", ["missing", "empty", "populated"])
def test_every_load_path_stores_the_same_rows_as_duckdb(pg_dsn, tmp_path, before):
    paths = [str(FIX / "sendgrid-events.jsonl"), str(FIX / "ses-firehose.jsonl"), str(FIX / "mailgun-events-page.json")]
    read = read_events(paths)
    reference = open_store(str(tmp_path / "ref.duckdb"))
    assert sentlog.backfill_exports(reference, read, stated=NO_STEP)["inserted"] == 7
    store = open_store(pg_dsn)
    if before != "missing":
        sentlog.ensure_schema(store)
    if before == "populated":  # recorded by an agent before the backfill: kept as it is
        sentlog.record_send(store, "by-agent", "9", "fay@example.com", "20261129.1.ABC@mg.example.com")
        _commit(store)
    result = sentlog.backfill_exports(store, read, stated=NO_STEP)
    assert (result["inserted"], result["already_present"]) == ((6, 1) if before == "populated" else (7, 0))
    expected = _rows(reference)
    if before == "populated":
        agent = [r for r in _rows(store) if r[0] == "by-agent"]
        assert len(agent) == 1 and agent[0][2:5] == ("fay@example.com", None, "20261129.1.ABC@mg.example.com")
        expected = [r for r in expected if r[2] != "fay@example.com"]
        assert [r for r in _rows(store) if r[0] != "by-agent"] == expected
    else:
        assert _rows(store) == expected
    # times survive the CSV round trip to the microsecond, in UTC
    fay = [r for r in _rows(reference) if r[2] == "fay@example.com"][0]
    assert fay[5] == dt.datetime(2025, 11, 29, 7, 6, 40, 123456, tzinfo=dt.timezone.utc)
    store.close()
    reference.close()


@pytest.mark.slow
def test_backfill_keeps_the_earliest_of_duplicate_sends(db):
    import pyarrow as pa

    utc = dt.timezone.utc
    sends = pa.table({
        "campaign": [None, "c-2", "c-1", None], "step": [None, "2", "1", None],
        "recipient": ["a@b.c", "a@b.c", "a@b.c", "d@e.f"], "candidate": [None, None, "L-1", None],
        "msg_id": ["m-1", "m-1", "m-1", "m-2"],
        "sent_at": pa.array([None, dt.datetime(2026, 1, 2, tzinfo=utc), dt.datetime(2026, 1, 1, tzinfo=utc), None],
                            pa.timestamp("us", tz="UTC")),
        "provider": ["x", "y", "z", "z"], "source_file": ["f1", "f2", "f3", "f3"],
    })
    store = open_store(db)
    result = sentlog.backfill(store, sends)
    assert (result.staged, result.inserted, result.already_present) == (4, 2, 0)
    hit = sentlog.last_send(store, "c-1", "1", "a@b.c")
    assert hit["msg_id"] == "m-1" and hit["provider"] == "z"  # the earliest known time wins, not the first row
    assert sentlog.already_sent(store, "", None, "d@e.f")  # no campaign known: recorded as ''
    again = sentlog.backfill(store, sends)
    assert (again.inserted, again.already_present) == (0, 2)
    store.close()


@pytest.mark.slow
def test_backfill_waits_for_an_agents_uncommitted_record_and_then_skips_it(pg_dsn):
    import psycopg

    read = read_events([str(FIX / "sendgrid-events.jsonl")])
    with psycopg.connect(pg_dsn) as setup:
        sentlog.ensure_schema(setup)
        setup.commit()
    agent = psycopg.connect(pg_dsn)
    sentlog.record_send(agent, "c-42", "1", "bob@acme.com", "AAAAAAAAAAAAAAAAAAAAAA")  # open transaction
    results: list = []

    def run():
        store = open_store(pg_dsn)
        try:
            results.append(sentlog.backfill_exports(store, read, stated=NO_STEP))
        except Exception as exc:  # pragma: no cover - asserted below
            results.append(exc)
        finally:
            store.close()

    worker = threading.Thread(target=run)
    worker.start()
    worker.join(1.0)
    assert worker.is_alive() and not results  # held off while the agent's record is uncommitted
    agent.commit()
    agent.close()
    worker.join(30)
    assert (results[0]["inserted"], results[0]["already_present"]) == (3, 1)
    store = open_store(pg_dsn)
    assert sentlog.count_rows(store) == 4
    store.close()


@pytest.mark.slow
@pytest.mark.parametrize("before", ["missing", "empty", "populated"])
def test_a_broken_unique_promise_fails_and_loads_nothing(pg_dsn, before):
    import pyarrow as pa

    from forensics.errors import DatabaseError

    sends = pa.table({"recipient": ["a@b.c", "a@b.c", "x@y.z"], "msg_id": ["m-1", "m-1", "m-2"],
                      "provider": ["p", "p", "p"]})
    store = open_store(pg_dsn)
    if before != "missing":
        sentlog.ensure_schema(store)
    if before == "populated":
        sentlog.record_send(store, "c", "1", "q@r.s", "m-0")
        _commit(store)
    with pytest.raises(DatabaseError, match="backfill failed"):
        sentlog.backfill(store, sends, unique_keys=True)
    sentlog.ensure_schema(store)
    assert sentlog.count_rows(store) == (1 if before == "populated" else 0)
    assert sentlog.backfill(store, sends).inserted == 2  # without the promise: deduplicated
    store.close()
