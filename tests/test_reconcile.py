"""Reconciliation of the log's sends with provider history, by message id and recipient."""

from __future__ import annotations

import pytest

import datetime as dt
from pathlib import Path

import duckdb

from forensics.reconcile import load_provider_sends, reconcile

FIX = Path(__file__).parent / "fixtures" / "providers"


@pytest.mark.slow
def test_reconcile_finds_all_three_cases():
    con = duckdb.connect()
    con.execute("CREATE TABLE sends (source TEXT, line BIGINT, ts TIMESTAMPTZ, worker TEXT, incarnation TEXT, "
                "campaign TEXT, step TEXT, recipient TEXT, candidate TEXT, msg_id TEXT, shard TEXT, test_id TEXT, "
                "variant TEXT, attempt INTEGER)")
    ts = dt.datetime(2026, 11, 28, tzinfo=dt.timezone.utc)
    con.executemany("INSERT INTO sends (source, line, ts, campaign, step, recipient, msg_id) VALUES (?,?,?,?,?,?,?)", [
        ("log", 1, ts, "c-42", "1", "jane@acme.com", "AAAAAAAAAAAAAAAAAAAAAA"),
        ("log", 2, ts, "c-42", "1", "zed@acme.com", "never-sent"),
    ])
    assert load_provider_sends(con, [str(FIX / "sendgrid-events.jsonl")]) == 5
    found = reconcile(con)
    assert [r["msg_id"] for r in found["log_sends_not_at_provider"]["sample"]] == ["never-sent"]
    missing = {(r["msg_id"], r["recipient"]) for r in found["provider_sends_not_in_log"]["sample"]}
    assert ("BBBBBBBBBBBBBBBBBBBBBB", "jane@acme.com") in missing and ("AAAAAAAAAAAAAAAAAAAAAA", "jane@acme.com") not in missing
    dupes = found["provider_confirmed_duplicates"]
    assert dupes["count"] == 1 and dupes["sample"][0]["recipient"] == "jane@acme.com"
