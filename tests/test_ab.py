"""forensics.ab and remediation.ab: contamination numbers, SRM test, sticky arms, plan and apply."""

from __future__ import annotations

import datetime as dt
import hashlib
import math
import os
import subprocess
import sys

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from forensics.errors import ConfigError, InputError
from forensics import ab as analysis
from forensics.ab import (arm_for_fraction, assign_arm, hash_fraction, normalize_unit, parse_arms,
                          parse_weights, resolve_weights, srm_test)
from remediation import ab
from remediation.store import open_store

COLUMNS = ("source", "line", "ts", "worker", "incarnation", "campaign", "step", "recipient", "candidate",
           "msg_id", "shard", "test_id", "variant", "attempt")
T0 = dt.datetime(2026, 11, 28, 9, 0, tzinfo=dt.timezone.utc)


def send(recipient, variant, *, candidate=None, test_id="subj", minute=0, line=None, source="w1.log"):
    return {"source": source, "line": line if line is not None else minute, "ts": T0 + dt.timedelta(minutes=minute),
            "recipient": recipient, "candidate": candidate, "msg_id": f"m{recipient}{minute}{variant}",
            "test_id": test_id, "variant": variant, "campaign": "c-1", "step": "1"}


def sends_db(rows):
    """A DuckDB connection holding a `sends` table shaped like forensics.ingest.case's."""
    import duckdb
    import pyarrow as pa

    con = duckdb.connect()
    types = {"line": pa.int64(), "ts": pa.timestamp("us", tz="UTC")}
    table = pa.table({c: pa.array([r.get(c) for r in rows], types.get(c, pa.string())) for c in COLUMNS})
    con.register("sends_arrow", table)
    con.execute("CREATE TABLE sends AS SELECT * FROM sends_arrow")
    return con


def clean_units(arm, n, prefix=None):
    return [send(f"{prefix or arm.lower()}{i}@x.co", arm, minute=i) for i in range(n)]


def contaminated_units(first, second, n, prefix):
    rows = []
    for i in range(n):
        rows += [send(f"{prefix}{i}@x.co", first, minute=i), send(f"{prefix}{i}@x.co", second, minute=i + 60)]
    return rows


@pytest.fixture()
def hand_case():
    """60 clean A, 40 clean B, 5 saw A then B, 2 saw B then A: 107 people, 7 contaminated."""
    rows = clean_units("A", 60) + clean_units("B", 40)
    rows += contaminated_units("A", "B", 5, "ab") + contaminated_units("B", "A", 2, "ba")
    rows.append(send("other@x.co", "A", test_id="another-test"))
    return sends_db(rows)


# --- analysis, checked by hand ------------------------------------------------------------------

def test_counts_match_hand_computation(hand_case):
    report = analysis.analyse(hand_case, "subj")
    assert (report.units, report.contaminated, report.sends) == (107, 7, 114)
    assert report.contamination_rate == pytest.approx(7 / 107)
    arms = {a["variant"]: a for a in report.arms}
    assert (arms["A"]["units_all"], arms["A"]["units_clean"], arms["A"]["units_first_seen"]) == (67, 60, 65)
    assert (arms["B"]["units_all"], arms["B"]["units_clean"], arms["B"]["units_first_seen"]) == (47, 40, 42)
    assert (arms["A"]["sends"], arms["B"]["sends"]) == (67, 47)


def test_srm_on_clean_counts_matches_hand_and_scipy(hand_case):
    from scipy import stats

    srm = analysis.analyse(hand_case, "subj").srm
    # clean 60 vs 40 against 50/50: chi2 = (10² + 10²) / 50 = 4; with 1 dof p = erfc(sqrt(chi2 / 2)).
    assert srm["chi2"] == pytest.approx(4.0)
    assert srm["p_value"] == pytest.approx(math.erfc(math.sqrt(2.0)))
    assert srm["p_value"] == pytest.approx(stats.chi2.sf(4.0, 1))
    assert srm["mismatch"] is False  # 0.0455 is not below 0.001


def test_weights_change_the_expected_split(hand_case):
    srm = analysis.analyse(hand_case, "subj", weights={"A": 60, "B": 40}).srm
    assert srm["expected"] == pytest.approx([60.0, 40.0])
    assert srm["chi2"] == pytest.approx(0.0) and srm["p_value"] == pytest.approx(1.0)


def test_large_imbalance_is_flagged_as_sample_ratio_mismatch():
    from scipy import stats

    srm = srm_test({"A": 600, "B": 400})
    assert srm["chi2"] == pytest.approx(40.0)
    assert srm["p_value"] == pytest.approx(stats.chi2.sf(40.0, 1)) and srm["mismatch"] is True


def test_three_arms_with_weights_matches_scipy_chisquare():
    from scipy import stats

    srm = srm_test({"A": 510, "B": 260, "C": 230}, {"A": 50, "B": 25, "C": 25})
    expected = stats.chisquare([510, 260, 230], f_exp=[500, 250, 250])
    assert srm["dof"] == 2
    assert srm["chi2"] == pytest.approx(expected.statistic) and srm["p_value"] == pytest.approx(expected.pvalue)
    # by hand: 100/500 + 100/250 + 400/250 = 2.2
    assert srm["chi2"] == pytest.approx(2.2)


def test_srm_not_testable_with_one_arm():
    assert srm_test({"A": 10}) is None
    assert srm_test({"A": 0, "B": 0}) is None


def test_weighted_arm_nobody_received_counts_as_zero(hand_case):
    report = analysis.analyse(hand_case, "subj", weights={"A": 1, "B": 1, "C": 1})
    arms = {a["variant"]: a for a in report.arms}
    assert arms["C"]["units_clean"] == 0 and report.srm["observed"] == [60, 40, 0]
    assert report.srm["mismatch"] is True


def test_variant_missing_from_weights_is_an_error(hand_case):
    with pytest.raises(ConfigError, match="'B' is in the logs but not in --weights"):
        analysis.analyse(hand_case, "subj", weights={"A": 1, "C": 1})


@pytest.mark.slow
@pytest.mark.parametrize("clean, bad, warned", [
    (990, 10, True),    # 1.0 % and 10 people
    (991, 9, False),    # fewer than 10 people
    (991, 10, False),   # 10 people but under 1 %
    (81, 19, True),
])
def test_contamination_warning_needs_one_percent_and_ten_people(clean, bad, warned):
    rows = clean_units("A", clean) + contaminated_units("A", "B", bad, "bad")
    report = analysis.analyse(sends_db(rows), "subj")
    assert report.contaminated == bad and report.contamination_warning is warned


def test_first_seen_variant_is_earliest_send_with_ties_broken_by_file_position():
    rows = [
        send("late@x.co", "B", minute=5), send("late@x.co", "A", minute=1),
        send("tie@x.co", "B", minute=3, line=20), send("tie@x.co", "A", minute=3, line=10),
    ]
    units = {u["unit"]: u for u in analysis.analyse(sends_db(rows), "subj").contaminated_units}
    assert units["late@x.co"]["first_variant"] == "A" and units["late@x.co"]["variants"] == ["A", "B"]
    assert units["tie@x.co"]["first_variant"] == "A"


def test_unit_is_candidate_id_else_address():
    rows = [
        send("old@x.co", "A", candidate="cand-1", minute=1), send("new@x.co", "B", candidate=" cand-1 ", minute=2),
        send("p@x.co", "A", minute=1), send("p@x.co", "A", minute=2),
        send("q@x.co", "A", candidate="Q@X.co", minute=1), send("q@x.co", "B", candidate="", minute=2),
    ]
    report = analysis.analyse(sends_db(rows), "subj")
    assert report.units == 3
    units = {u["unit"]: u for u in report.contaminated_units}
    assert set(units) == {"cand-1", "q@x.co"}
    assert units["cand-1"]["recipients"] == ["new@x.co", "old@x.co"]


def test_sends_without_variant_or_person_are_counted_not_analysed():
    rows = clean_units("A", 3) + clean_units("B", 3) + [send("nov@x.co", None), send(None, "A")]
    report = analysis.analyse(sends_db(rows), "subj")
    assert (report.sends, report.sends_without_variant, report.sends_without_unit, report.units) == (8, 1, 1, 6)


def test_unknown_test_id_names_the_tests_that_exist(hand_case):
    with pytest.raises(InputError, match=r"no sends with test_id 'nope' \(tests in these logs: another-test, subj\)"):
        analysis.analyse(hand_case, "nope")


# --- parsers --------------------------------------------------------------------------------------

def test_parse_weights_examples():
    assert parse_weights("A=50,B=50") == {"A": 50.0, "B": 50.0}
    assert parse_weights(" control = 0.9 , treatment=0.1") == {"control": 0.9, "treatment": 0.1}
    for bad, message in [("A=50", "at least two"), ("A=50,B", "ARM=WEIGHT"), ("A=x,B=1", "not a number"),
                         ("A=0,B=1", "positive"), ("A=1,A=2", "twice"), ("A=nan,B=1", "positive"),
                         ("=1,B=1", "printable")]:
        with pytest.raises(ConfigError, match=message):
            parse_weights(bad)


def _weights_hold(weights) -> None:
    assert len(weights) >= 2 and all(w > 0 and math.isfinite(w) for w in weights.values())
    assert all(arm == arm.strip() and arm for arm in weights)


def _arms_hold(arms) -> None:
    assert len(arms) == len(set(arms)) >= 2


@pytest.mark.slow
@pytest.mark.parametrize("parse, holds", [(parse_weights, _weights_hold), (parse_arms, _arms_hold)],
                         ids=["weights", "arms"])
@settings(max_examples=300, deadline=None)
@given(text=st.text())
def test_option_parsers_never_crash(parse, holds, text):
    try:
        parsed = parse(text)
    except ConfigError:
        return
    holds(parsed)


def test_resolve_weights():
    assert resolve_weights(None, None) == {"A": 1.0, "B": 1.0}
    assert resolve_weights(["x", "y", "z"], None) == {"x": 1.0, "y": 1.0, "z": 1.0}
    assert resolve_weights(["B", "A"], {"A": 9.0, "B": 1.0}) == {"A": 9.0, "B": 1.0}
    with pytest.raises(ConfigError, match="different arms"):
        resolve_weights(["A", "C"], {"A": 1.0, "B": 1.0})


# --- sticky hash arms -------------------------------------------------------------------------------

IDS = [f"cand-{i}" for i in range(10_000)]
EQUAL = {"A": 1.0, "B": 1.0}


def test_hash_is_the_documented_sha256_so_arms_survive_upgrades():
    digest = hashlib.sha256(b"s1|subj-2026-11|cand-42").digest()
    assert hash_fraction("s1", "subj-2026-11", "cand-42") == int.from_bytes(digest[:8], "big") / 2**64
    assert assign_arm("subj-2026-11", "cand-42", EQUAL, salt="s1") == ("A" if digest[0] < 128 else "B")


def test_zero_flips_over_ten_thousand_ids_and_balanced_arms():
    first = [assign_arm("subj-2026-11", c, EQUAL) for c in IDS]
    again = [assign_arm("subj-2026-11", c, {"B": 50, "A": 50}) for c in IDS]  # weights order does not matter
    assert sum(a != b for a, b in zip(first, again)) == 0
    # Binomial(10 000, 0.5): sd = 50; 4 sd is a one-in-15 000 miss for a fair hash.
    assert abs(first.count("A") - 5000) <= 200


def test_same_arms_in_a_fresh_interpreter_with_another_hash_seed():
    code = ("from forensics.ab import assign_arm\n"
            "print(''.join(assign_arm('subj', f'cand-{i}', {'A': 1, 'B': 1}) for i in range(10000)))")
    env = dict(os.environ, PYTHONHASHSEED="12345")
    out = subprocess.run([sys.executable, "-c", code], env=env, capture_output=True, text=True, check=True).stdout
    assert out.strip() == "".join(assign_arm("subj", f"cand-{i}", EQUAL) for i in range(10_000))


def test_weighted_split_and_salt_reshuffles():
    arms = [assign_arm("t", c, {"A": 80, "B": 20}) for c in IDS]
    assert abs(arms.count("A") - 8000) <= 4 * math.sqrt(10_000 * 0.8 * 0.2)
    plain = [assign_arm("t", c, EQUAL) for c in IDS]
    salted = [assign_arm("t", c, EQUAL, salt="v2") for c in IDS]
    assert abs(sum(a != b for a, b in zip(plain, salted)) - 5000) <= 200  # independent draws


def test_candidate_is_normalised_like_the_logs():
    assert normalize_unit("  Cand-7 ") == "Cand-7"
    assert normalize_unit(" Jane@Acme.COM ") == "jane@acme.com"
    assert assign_arm("t", "Jane@Acme.com", EQUAL) == assign_arm("t", "jane@acme.com ", EQUAL)
    with pytest.raises(ConfigError):
        normalize_unit("   ")


def test_arm_boundaries():
    weights = {"A": 1.0, "B": 1.0, "C": 2.0}
    assert [arm_for_fraction(f, weights) for f in (0.0, 0.2499, 0.25, 0.4999, 0.5, 0.9999999)] == \
        ["A", "A", "B", "B", "C", "C"]


# --- plan and apply -------------------------------------------------------------------------------

HOSTILE = '=cmd|"/c calc"!A1, \'quoted\'; DROP TABLE ab_assignments; --\n\x1b[31m<script>'


@pytest.fixture()
def plan_case():
    rows = clean_units("A", 3) + clean_units("B", 2) + contaminated_units("B", "A", 2, "mix")
    rows += [send("h@x.co", "A", candidate=HOSTILE, minute=1), send("h@x.co", "B", candidate=HOSTILE, minute=2)]
    con = sends_db(rows)
    report = analysis.analyse(con, "subj")
    return ab.build_plan(con, report, "2026-11-30T10:12:03Z-7f3a")


def table_rows(store, table):
    cur = store.conn.execute(f"SELECT * FROM {table} ORDER BY unit")  # test-only inspection
    columns = [d[0] for d in cur.description]
    return [dict(zip(columns, r)) for r in cur.fetchall()]


def test_plan_lists_exclusions_and_first_seen_assignments(plan_case):
    assert plan_case.summary()["exclusions"] == 3 and plan_case.summary()["assignments"] == 8
    exclusions = plan_case.exclusions.to_pylist()
    assert {r["unit"] for r in exclusions} == {"mix0@x.co", "mix1@x.co", HOSTILE}
    assert all(r["variants"] == "A,B" and r["reason"] == "multiple-variants" for r in exclusions)
    assignments = {r["unit"]: r["variant"] for r in plan_case.assignments.to_pylist()}
    assert assignments["mix0@x.co"] == "B" and assignments[HOSTILE] == "A" and assignments["b1@x.co"] == "B"


@pytest.fixture(params=["duckdb", "postgres"])
def store(request, tmp_path):
    target = str(tmp_path / "state.duckdb") if request.param == "duckdb" else request.getfixturevalue("pg_dsn")
    opened = open_store(target)
    yield opened
    opened.close()


def _commit(store):
    if store.kind == "postgres":
        store.conn.commit()


@pytest.mark.slow
def test_apply_writes_exactly_the_plan_then_nothing(store, plan_case):
    first = ab.apply_plan(store, plan_case)
    assert (first.exclusions_written, first.assignments_written, first.assignments_existing) == (3, 8, 0)
    excluded = table_rows(store, "ab_exclusions")
    assert {r["unit"] for r in excluded} == {"mix0@x.co", "mix1@x.co", HOSTILE}  # hostile text stored verbatim
    assert {r["run_id"] for r in excluded} == {"2026-11-30T10:12:03Z-7f3a"}
    assigned = {r["unit"]: r for r in table_rows(store, "ab_assignments")}
    assert assigned[HOSTILE]["variant"] == "A" and assigned[HOSTILE]["source"] == "first-seen:2026-11-30T10:12:03Z-7f3a"
    _commit(store)
    second = ab.apply_plan(store, plan_case)
    assert (second.exclusions_written, second.assignments_written, second.assignments_existing) == (0, 0, 8)
    assert len(table_rows(store, "ab_assignments")) == 8


def test_existing_assignment_is_never_changed(store, plan_case):
    q = "INSERT INTO ab_assignments VALUES ('subj', 'mix0@x.co', 'A', current_timestamp, 'ab-assign')"
    store.conn.execute(ab.queries.get("ab_create_assignments").sql)
    store.conn.execute(q)  # test-only setup: an assignment made before the incident review
    _commit(store)
    applied = ab.apply_plan(store, plan_case)
    assert (applied.assignments_written, applied.assignments_existing, applied.assignments_differing) == (7, 1, 1)
    assigned = {r["unit"]: r for r in table_rows(store, "ab_assignments")}
    assert (assigned["mix0@x.co"]["variant"], assigned["mix0@x.co"]["source"]) == ("A", "ab-assign")
    assert ab.stored_assignment(store, "subj", "mix0@x.co")["variant"] == "A"


def test_a_failure_part_way_rolls_back_everything(store, plan_case):
    # An ab_assignments that refuses arm B makes the second INSERT fail after the first succeeded.
    store.conn.execute("CREATE TABLE ab_assignments (test_id TEXT, unit TEXT, variant TEXT CHECK (variant <> 'B'),"
                       " assigned_at TIMESTAMPTZ, source TEXT, PRIMARY KEY (test_id, unit))")
    _commit(store)
    with pytest.raises(ab.DatabaseError, match="could not write the A/B plan"):
        ab.apply_plan(store, plan_case)
    if store.kind == "postgres":
        store.conn.rollback()
    present = store.conn.execute("SELECT count(*) FROM information_schema.tables"
                                 " WHERE table_name = 'ab_exclusions'").fetchone()[0]
    assert present == 0  # even the CREATE TABLE of ab_exclusions was undone
    assert table_rows(store, "ab_assignments") == []


def test_stored_assignment_absent_table_and_row(store):
    assert ab.stored_assignment(store, "subj", "x") is None
    store.conn.execute(ab.queries.get("ab_create_assignments").sql)
    _commit(store)
    assert ab.stored_assignment(store, "subj", "x") is None


def test_run_id_shape():
    run_id = ab.new_run_id(dt.datetime(2026, 11, 30, 10, 12, 3, tzinfo=dt.timezone.utc))
    assert run_id.startswith("2026-11-30T10:12:03Z-") and len(run_id) == len("2026-11-30T10:12:03Z-7f3a")


def test_concurrent_applies_on_postgres_write_each_row_once(pg_dsn, plan_case):
    from concurrent.futures import ThreadPoolExecutor

    stores = [open_store(pg_dsn) for _ in range(4)]
    try:
        with ThreadPoolExecutor(len(stores)) as pool:
            results = list(pool.map(lambda s: ab.apply_plan(s, plan_case), stores))
        assert sum(r.exclusions_written for r in results) == 3
        assert sum(r.assignments_written for r in results) == 8
        assert len(table_rows(stores[0], "ab_assignments")) == 8
    finally:
        for store in stores:
            store.close()


@pytest.mark.slow
def test_a_test_id_is_one_test_in_every_spelling(store, plan_case):
    ab.apply_plan(store, plan_case)  # test "subj"
    _commit(store)
    assert ab.stored_assignment(store, " SUBJ", "mix0@x.co")["variant"] == "B"
    rows = clean_units("A", 3) + clean_units("B", 2) + contaminated_units("B", "A", 2, "mix")
    con = sends_db([dict(row, test_id="Subj ") for row in rows])
    report = analysis.analyse(con, "SUBJ")
    assert (report.units, report.contaminated) == (7, 2)
    again = ab.pending(store, ab.build_plan(con, report, "run-2"))
    assert (again.exclusions.num_rows, again.assignments.num_rows, again.kept) == (0, 0, 7)
    applied = ab.apply_plan(store, again)
    assert (applied.exclusions_written, applied.assignments_written) == (0, 0)
    assert len(table_rows(store, "ab_assignments")) == 8
