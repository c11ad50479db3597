"""One person (the same candidate id) sent one step at two addresses is listed on its own, never hidden by
the per-address dedupe key and never counted as one of the five kinds."""

from __future__ import annotations

import json

import pytest

LINES = [
    "2026-11-28T09:10:00Z evt=sent worker=w1 campaign=c-1 step=1 recipient=jane@acme.com lead_id=P-7 msg_id=m1",
    "2026-11-28T09:20:00Z evt=sent worker=w1 campaign=c-1 step=1 recipient=jane.doe@gmail.com lead_id=P-7 msg_id=m2",
    "2026-11-28T09:30:00Z evt=sent worker=w1 campaign=c-1 step=2 recipient=jane@acme.com lead_id=P-7 msg_id=m3",
    "2026-11-28T09:40:00Z evt=sent worker=w1 campaign=c-1 step=1 recipient=bob@acme.com lead_id=P-8 msg_id=m4",
]


@pytest.mark.slow
def test_a_candidate_at_two_addresses_is_listed_apart_from_the_kinds(cli, tmp_path):
    path = tmp_path / "mail-send.log"
    path.write_text("\n".join(LINES) + "\n", encoding="utf-8")
    doc = json.loads(cli("diagnose", path, "--format", "json").stdout)
    assert doc["summary"]["duplicated_people"] == 0 and doc["incidents"] == []
    assert [(r["candidate"], r["campaign"], r["step"], r["recipients"], r["sends"])
            for r in doc["candidates_at_two_addresses"]] == [
        ("P-7", "c-1", "1", ["jane.doe@gmail.com", "jane@acme.com"], 2)]
    table = cli("diagnose", path).stdout
    assert "1 candidate(s) got the same step at two or more addresses" in table
    assert "P-7  campaign c-1 step 1  jane.doe@gmail.com, jane@acme.com" in table
    assert "No duplicates" not in table
    assert cli("diagnose", path, "--fail-on-duplicates").exit_code == 3
