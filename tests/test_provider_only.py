"""Provider-only grouping (forensics.provider_only / reconcile): what counts as one campaign step."""

from __future__ import annotations

import datetime as dt
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
    reconcile.store_provider_sends(con, SimpleNamespace(sends=lambda: _table(rows)))
    queries.run(con, "provider_no_log_sends")
    grouped_by = reconcile.choose_grouping(reconcile.grouping_coverage(con, reconcile.NO_LOG), with_log=False)
    reconcile.find_provider_duplicates(con, grouped_by, reconcile.NO_LOG)
    return grouped_by, reconcile.provider_duplicates(con)


send = st.tuples(st.sampled_from(("c1", "c2")), st.sampled_from(("1", "2", "3")), st.sampled_from(PEOPLE),
                 st.sampled_from(SPELLINGS), st.booleans())


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


def test_a_file_without_any_grouping_is_refused_beside_one_that_has_it(tmp_path):
    from forensics.provider_only import diagnose_exports
    from forensics.providers import ExportSpec

    good, bare = tmp_path / "good.csv", tmp_path / "bare.csv"
    good.write_text("recipient,msg_id,campaign,step\na@b.c,m1,c,1\n")
    bare.write_text("recipient,msg_id\na@b.c,m2\n")
    with pytest.raises(InputError, match=f"^{bare}: its sends name no campaign and step"):
        diagnose_exports(ExportSpec((str(good), str(bare))))
