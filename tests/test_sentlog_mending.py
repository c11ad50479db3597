"""Issue 40: a backfill writes only what the export proves, and a re-run that reads more mends what it wrote.

On DuckDB and real PostgreSQL. The rows an earlier, lenient backfill wrote (campaign and step '', no time) are
made here with record_send, exactly as it stored them.
"""

from __future__ import annotations

import datetime as dt
import json
import tempfile
from pathlib import Path

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from forensics.providers import read_events
from forensics.providers.resolve import Stated
from remediation import audit, sentlog, sentlog_check
from remediation.errors import RefusedError
from remediation.store import open_store

HEADER = "Recipient,MessageID,Tag,Seq,Sent At\n"
ROWS = ("jane@acme.com,pm-1,backend-sr-dec,1,2026-12-01T10:00:00Z\n"
        "bob@acme.com,pm-2,backend-sr-dec,1,2026-12-01T10:00:05Z\n")
BASE = {"recipient": "Recipient", "msg_id": "MessageID"}


@pytest.fixture(params=["duckdb", "postgres"])
def db(request, tmp_path):
    if request.param == "duckdb":
        return str(tmp_path / "mm.duckdb")
    return request.getfixturevalue("pg_dsn")


def _read(tmp_path, mapping: dict, text: str = HEADER + ROWS):
    export = tmp_path / "postmark.csv"
    export.write_text(text)
    return read_events([str(export)], provider="csv", mapping={**BASE, **mapping})


def _rows(store) -> list[tuple]:
    cur = store.conn.execute("SELECT campaign, step, recipient, msg_id, sent_at FROM sent_log ORDER BY msg_id")
    return [tuple(r) for r in cur.fetchall()]


def _lenient_rows(store) -> None:
    """What the backfill before issue 40 stored for this export mapped by recipient and msg_id alone."""
    sentlog.ensure_schema(store)
    for address, msg_id in (("jane@acme.com", "pm-1"), ("bob@acme.com", "pm-2")):
        sentlog.record_send(store, None, None, address, msg_id)
    if store.kind == "postgres":
        store.conn.commit()


@pytest.mark.slow
def test_a_send_without_campaign_or_step_is_refused_with_counts_and_options_and_nothing_is_written(db, tmp_path):
    text = "Recipient,MessageID,Status\njane@acme.com,pm-1,Sent\nbob@acme.com,pm-2,Sent\n"
    store = open_store(db)
    with pytest.raises(RefusedError) as refused:
        sentlog.backfill_exports(store, _read(tmp_path, {}, text))
    message = str(refused.value)
    assert message.startswith("refused, nothing written: of 2 sends, 2 lack a campaign (pass --map campaign=COLUMN, "
                              "or --campaign NAME for the whole export); 2 lack a step (pass --map step=COLUMN, or "
                              "--step N for the whole export, or --no-step if it has no steps")
    assert "2 lack a send time (pass --map sent_at=COLUMN)" in message
    assert not sentlog.table_present(store)
    store.close()


@pytest.mark.slow
def test_a_rerun_that_reads_more_fills_the_blanks_of_the_same_rows_audited(db, tmp_path):
    store = open_store(db)
    _lenient_rows(store)
    shown = []

    def plan(summary):  # called before the write: the stored rows are still blank
        shown.append((summary["already_present"], summary["to_fill"], [r[:2] for r in _rows(store)]))

    summary = sentlog.backfill_exports(store, _read(tmp_path, {"campaign": "Tag", "step": "Seq"}), on_plan=plan)
    assert shown == [(2, 2, [("", ""), ("", "")])]
    assert (summary["inserted"], summary["already_present"], summary["filled"]) == (0, 2, 2)
    utc = dt.timezone.utc
    assert _rows(store) == [("backend-sr-dec", "1", "jane@acme.com", "pm-1", dt.datetime(2026, 12, 1, 10, tzinfo=utc)),
                            ("backend-sr-dec", "1", "bob@acme.com", "pm-2",
                             dt.datetime(2026, 12, 1, 10, 0, 5, tzinfo=utc))]
    assert sentlog.already_sent(store, "backend-sr-dec", "1", "jane@acme.com")
    filled = [r for r in audit.run_rows(store.conn, summary["run_id"]) if r["row_key"] == "2 rows filled"][0]
    assert filled["old_values"]["filled"][0] == ["pm-1", "jane@acme.com", {"campaign": "", "step": "",
                                                                            "sent_at": None}]
    assert filled["new_values"]["filled"][0] == ["pm-1", "jane@acme.com", {
        "campaign": "backend-sr-dec", "step": "1", "sent_at": "2026-12-01T10:00:00+00:00"}]
    again = sentlog.backfill_exports(store, _read(tmp_path, {"campaign": "Tag", "step": "Seq"}))
    assert (again["inserted"], again["filled"]) == (0, 0)
    store.close()


@pytest.mark.slow
def test_a_stored_value_that_disagrees_is_reported_and_never_overwritten(db, tmp_path):
    store = open_store(db)
    sentlog.ensure_schema(store)
    sentlog.record_send(store, "other-campaign", "", "jane@acme.com", "pm-1")
    if store.kind == "postgres":
        store.conn.commit()
    summary = sentlog.backfill_exports(store, _read(tmp_path, {"campaign": "Tag", "step": "Seq"}))
    assert (summary["inserted"], summary["filled"], summary["disagreeing"]) == (1, 0, 1)
    assert summary["differences"][0]["stored_campaign"] == "other-campaign"
    assert summary["differences"][0]["export_campaign"] == "backend-sr-dec"
    assert _rows(store)[0][:2] == ("other-campaign", "")  # not even its blank step is filled from a disagreeing row
    store.close()


@pytest.mark.slow
def test_a_backfill_undo_stays_refused_and_says_how_to_mend(tmp_path):
    store = open_store(str(tmp_path / "m.duckdb"))
    run_id = sentlog.backfill_exports(store, _read(tmp_path, {"campaign": "Tag", "step": "Seq"}))["run_id"]
    with pytest.raises(RefusedError, match="undo is refused.*run backfill-sentlog again with the options that read "
                                           r"more of the export \(--map, --campaign-key, --step-key\)"):
        audit.undo(store.conn, run_id)
    store.close()


@pytest.mark.slow
def test_stated_values_fill_only_what_the_export_leaves_blank_and_a_disagreeing_one_is_refused(tmp_path):
    text = HEADER + "jane@acme.com,pm-1,,1,2026-12-01T10:00:00Z\nbob@acme.com,pm-2,c-9,,2026-12-01T10:00:05Z\n"
    read = _read(tmp_path, {"campaign": "Tag", "step": "Seq"}, text)
    with pytest.raises(RefusedError, match=r"1 name another campaign than --campaign 'c-1'"):
        sentlog.backfill_exports(None, read, dry_run=True, stated=Stated(campaign="c-1", no_step=True))
    summary = sentlog.backfill_exports(None, read, dry_run=True, stated=Stated(campaign="C-9", no_step=True))
    assert summary["per_campaign_step"] == [{"campaign": "C-9", "step": "1", "rows": 1},
                                            {"campaign": "c-9", "step": "(none: counts for every step)", "rows": 1}]
    assert summary["no_step_rows"] == 1


def test_check_says_a_row_without_a_step_counts_for_every_step_and_where_a_missing_time_comes_from(db):
    store = open_store(db)
    sentlog.ensure_schema(store)
    sentlog.record_send(store, "c-1", "", "jane@acme.com", "m-1")
    sentlog.record_send(store, "c-1", "1", "bob@acme.com", "m-2")
    if store.kind == "postgres":
        store.conn.commit()
    said = sentlog_check.describe(sentlog_check.check(store, "c-1", "1", "jane@acme.com"), "jane@acme.com", "c-1", "1")
    assert said["line"].startswith("already sent: jane@acme.com sent c-1 (step not recorded: counts for every step) "
                                   "(msg m-1, time not recorded: the provider export's send time fills it")
    assert (said["step"], said["counts_for_every_step"], said["time_recorded"]) == (None, True, False)
    store.close()


# ------------------------------------------------------------------------------------------------ property

FIELDS = {"campaign": "cx", "step": "sx", "sent_at": "tx", "candidate": "kx"}  # names no inference reads
label = st.sampled_from(["", "a", "B", "07"])


@pytest.mark.slow
@settings(max_examples=20, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(rows=st.lists(st.tuples(label, label, st.one_of(st.just(""), st.integers(1_700_000_000, 1_800_000_000)),
                               label), min_size=1, max_size=6),
       mapped=st.sets(st.sampled_from(sorted(FIELDS))), no_step=st.booleans())
def test_a_backfill_refuses_or_writes_what_the_export_says_and_a_fuller_one_mends_it_to_the_full_result(
        rows, mapped, no_step):
    text = "to,mid," + ",".join(FIELDS.values()) + "\n" + "".join(
        f"p{i}@x.co,m-{i},{c},{s},{t},{k}\n" for i, (c, s, t, k) in enumerate(rows))
    with tempfile.TemporaryDirectory() as tmp:
        export = Path(tmp) / "e.csv"
        export.write_text(text)

        def read(fields):
            mapping = {"recipient": "to", "msg_id": "mid", **{f: FIELDS[f] for f in fields}}
            return read_events([str(export)], provider="csv", mapping=mapping)

        stated = Stated(no_step=no_step and "step" not in mapped)
        partial, fresh = (open_store(str(Path(tmp) / n)) for n in ("p.duckdb", "n.duckdb"))
        try:
            blank = {f: [not r[i] for r in rows] for i, f in enumerate(FIELDS)}
            lacks = [f for f in ("campaign", "step", "sent_at") if (f not in mapped or any(blank[f]))
                     and not (f == "step" and stated.no_step and (f not in mapped))]
            try:
                sentlog.backfill_exports(partial, read(mapped), stated=stated)
            except RefusedError:
                assert lacks
                assert not sentlog.table_present(partial)
            else:
                assert not lacks
                stored = {r[3]: r for r in _rows(partial)}
                for i, (c, s, t, _k) in enumerate(rows):
                    row = stored[f"m-{i}"]
                    assert (row[0], row[1]) == (c, s if "step" in mapped else "")
                    assert row[4] == dt.datetime.fromtimestamp(t, dt.timezone.utc)
            everything = read(FIELDS)
            refused_full = _try(fresh, everything)
            assert refused_full == any(any(blank[f]) for f in ("campaign", "step", "sent_at"))
            if not refused_full:
                _try(partial, everything)
                assert _full_rows(partial) == _full_rows(fresh)
        finally:
            for store in (partial, fresh):
                store.close()


def _try(store, read) -> bool:
    """Backfill; True when refused."""
    try:
        sentlog.backfill_exports(store, read)
    except RefusedError:
        return True
    return False


def _full_rows(store) -> list:
    cur = store.conn.execute("SELECT campaign, step, recipient, candidate, msg_id, sent_at FROM sent_log ORDER BY msg_id")
    return json.loads(json.dumps([list(r) for r in cur.fetchall()], default=str))


@pytest.mark.slow
def test_a_blank_candidate_string_is_filled_like_a_missing_one(db, tmp_path):
    store = open_store(db)
    sentlog.ensure_schema(store)
    sentlog.record_send(store, "backend-sr-dec", "1", "jane@acme.com", "pm-1", candidate="")
    if store.kind == "postgres":
        store.conn.commit()
    text = "Recipient,MessageID,Tag,Seq,Sent At,Lead\njane@acme.com,pm-1,backend-sr-dec,1,2026-12-01T10:00:00Z,k-7\n"
    summary = sentlog.backfill_exports(store, _read(tmp_path, {"campaign": "Tag", "step": "Seq", "candidate": "Lead"},
                                                    text))
    assert (summary["filled"], summary["disagreeing"]) == (1, 0)
    assert store.conn.execute("SELECT candidate FROM sent_log").fetchone()[0] == "k-7"
    store.close()


def test_a_campaign_blank_in_normal_form_is_not_read(tmp_path):
    text = HEADER + "jane@acme.com,pm-1,\u200b,1,2026-12-01T10:00:00Z\n"
    read = _read(tmp_path, {"campaign": "Tag", "step": "Seq"}, text)
    with pytest.raises(RefusedError, match="1 lack a campaign"):
        sentlog.backfill_exports(None, read, dry_run=True)
    assert sentlog.backfill_exports(None, read, dry_run=True, stated=Stated(campaign="c-1"))["per_campaign_step"] == [
        {"campaign": "c-1", "step": "1", "rows": 1}]


def test_the_exports_own_duplicates_compare_campaign_and_step_in_normal_form(tmp_path):
    text = HEADER + "jane@acme.com,pm-1,c-1,01,2026-12-01T10:00:00Z\njane@acme.com,pm-2,C-1,1,2026-12-01T11:00:00Z\n"
    summary = sentlog.backfill_exports(None, _read(tmp_path, {"campaign": "Tag", "step": "Seq"}, text), dry_run=True)
    assert [(d["recipient"], d["sends"], d["msg_ids"]) for d in summary["duplicates_in_export"]] == [
        ("jane@acme.com", 2, ["pm-1", "pm-2"])]
