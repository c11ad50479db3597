"""Provider-only grouping (forensics.provider_only / reconcile): what counts as one campaign step."""

from __future__ import annotations

import datetime as dt
from pathlib import Path
from types import SimpleNamespace

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

import queries
from forensics import reconcile
from forensics.addresses import normalize_address
from forensics.errors import InputError
from forensics.providers.reader import COLUMNS

T0 = dt.datetime(2026, 11, 28, 9, tzinfo=dt.timezone.utc)
PEOPLE = ("ann@example.com", "bob@example.com", "cy@example.com")
# How one address may be written in an export: all the same person once normalised.
SPELLINGS = (lambda a: a, str.upper, lambda a: f"  {a}\t", lambda a: f"Someone <{a.title()}>")


def _table(rows: list[dict]):
    import pyarrow as pa

    types = {"source_line": pa.int64(), "sent_at": pa.timestamp("us", tz="UTC")}
    return pa.table({c: pa.array([r.get(c) for r in rows], types.get(c, pa.string())) for c in COLUMNS})


def _grouped(rows: list[dict]) -> tuple[str | None, list[dict]]:
    import duckdb

    con = duckdb.connect()
    queries.script(con, "address_duckdb_macro")
    reconcile.store_provider_sends(con, SimpleNamespace(collapsed=lambda: _table(rows)))
    queries.run(con, "provider_no_log_sends")
    grouped_by = reconcile.choose_grouping(reconcile.grouping_coverage(con, reconcile.NO_LOG), with_log=False)
    reconcile.find_provider_duplicates(con, grouped_by, reconcile.NO_LOG)
    return grouped_by, reconcile.provider_duplicates(con)


send = st.tuples(st.sampled_from(("c1", "c2")), st.sampled_from(("1", "2", "3")), st.sampled_from(PEOPLE),
                 st.sampled_from(SPELLINGS), st.booleans())


@pytest.mark.slow
@settings(max_examples=60, deadline=None)
@given(sends=st.lists(send, min_size=1, max_size=25), labelled=st.sampled_from(("metadata", "template", "subject")))
def test_the_grouping_never_calls_two_different_steps_a_duplicate(sends, labelled):
    # Each step has its own template/subject, the way a sequence's steps do; under metadata every subject is the
    # same (a thread's "Re:" aside), and metadata still wins. Recipients are written in any spelling.
    rows = []
    for n, (campaign, step, person, spelling, late) in enumerate(sends):
        row = {"provider": "generic", "verdict": "sent", "msg_id": f"m{n}", "source_file": "x", "source_line": n,
               "recipient": normalize_address(spelling(person)),
               "sent_at": T0 + dt.timedelta(minutes=n + (600 if late else 0))}
        if labelled == "metadata":
            row.update(campaign=campaign, step=step, subject="Quick question")
        else:
            row.update({labelled: f"{labelled} {campaign}/{step}"})
        rows.append(row)
    truth = {n: (c, s, p) for n, (c, s, p, _, _) in enumerate(sends)}
    grouped_by, found = _grouped(rows)
    assert grouped_by == labelled
    for dup in found:
        assert len({truth[int(m[1:])] for m in dup["msg_ids"]}) == 1, dup
    expected = {key for key in truth.values() if list(truth.values()).count(key) >= 2}
    assert {truth[int(d["msg_ids"][0][1:])] for d in found} == expected


def test_with_no_grouping_at_all_nothing_is_a_duplicate():
    rows = [{"provider": "csv", "verdict": "sent", "msg_id": f"m{n}", "recipient": "a@b.c", "source_file": "x"}
            for n in range(3)]
    assert _grouped(rows) == (None, [])


@pytest.mark.slow
def test_a_file_without_any_grouping_beside_one_with_it_makes_the_run_incomplete(tmp_path):
    from forensics.provider_only import diagnose_exports
    from forensics.providers import ExportSpec

    good, bare = tmp_path / "good.csv", tmp_path / "bare.csv"
    good.write_text("recipient,msg_id,campaign,step\na@b.c,m1,c,1\n")
    bare.write_text("recipient,msg_id\na@b.c,m2\n")
    document = diagnose_exports(ExportSpec((str(good), str(bare))))
    assert document["complete"] is False
    assert document["provider_only"]["grouping"]["files_not_grouped"] == [str(bare)]
    bare2 = tmp_path / "bare2.csv"
    bare2.write_text("recipient,msg_id\na@b.c,m3\n")
    with pytest.raises(InputError, match=f"^{bare} and 1 more: their sends name no campaign and step"):
        diagnose_exports(ExportSpec((str(bare), str(bare2))))


def _export_of(case_dir: Path, out: Path, drop_metadata: bool = False) -> Path:
    """A SendGrid event export of every real send in a simulated case (custom args carry campaign and step)."""
    import json

    from forensics.ingest.case import load_case

    sends = load_case([str(case_dir)]).con.table("sends").arrow().read_all().to_pylist()
    with out.open("w") as f:
        for n, s in enumerate(sends):
            event = {"event": "processed", "email": s["recipient"], "sg_event_id": f"e{n}",
                     "sg_message_id": f"{s['msg_id']}.filter1.1.1.0", "timestamp": s["ts"].timestamp()}
            if not drop_metadata:
                event.update(campaign=s["campaign"], step=s["step"])
            f.write(json.dumps(event) + "\n")
    return out


MIXED = Path(__file__).resolve().parent.parent / "sample_logs" / "mixed"


@pytest.mark.slow
def test_the_providers_history_alone_finds_the_people_the_logs_do(tmp_path):
    # The simulated mixed case (all five kinds): the export of its real sends, read without the logs, names the
    # same duplicated (campaign, step, person) as the log diagnosis, and as the simulator's truth.
    import csv

    from forensics.findings import build_document
    from forensics.ingest.case import load_case
    from forensics.provider_only import diagnose_exports
    from forensics.providers import ExportSpec

    export = _export_of(MIXED, tmp_path / "events.jsonl")
    found = diagnose_exports(ExportSpec((str(export),)))["provider_only"]
    by_provider = {(d["campaign"], d["step"], d["recipient"]) for d in found["duplicates"]}
    by_log = {(a["campaign"], a["step"], a["recipient"]) for a in build_document(load_case([str(MIXED)]))["affected"]}
    with (MIXED / "truth.csv").open() as f:
        truth = {(r["campaign"], r["step"], r["recipient"]) for r in csv.DictReader(f)}
    assert by_provider == by_log == truth and len(truth) == found["summary"]["duplicated_people"] == 631


@pytest.mark.slow
def test_a_lost_worker_log_leaves_duplicates_only_the_provider_shows_and_they_are_said_first(tmp_path, cli):
    # The state-loss worker's log is gone (redeployed container): the other two logs with the full export.
    import shutil

    export = _export_of(MIXED, tmp_path / "events.jsonl")
    logs = tmp_path / "logs"
    logs.mkdir()
    for name in ("worker-outreach-worker-2.log.gz", "worker-outreach-worker-3.jsonl.gz"):
        shutil.copy(MIXED / name, logs / name)
    result = cli("diagnose", logs, "--provider-export", export, "--fail-on-duplicates")
    assert result.exit_code == 4  # a skipped line in worker 3's file that looks like a send: 4 wins over 3
    first = result.stdout.splitlines()[0]
    assert first.startswith("PROVIDER-CONFIRMED DUPLICATES: the provider sent ") and "which the log does not show" in first
    document = json_of(cli("diagnose", logs, "--provider-export", export, "--format", "json"))
    missed = document["reconciliation"]["provider_duplicates_missed_by_log"]
    assert missed["count"] > 200 and missed["sends_not_in_log"] >= missed["count"]


def json_of(result) -> dict:
    import json

    assert result.exit_code == 0, result.stderr
    return json.loads(result.stdout)
