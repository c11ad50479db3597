"""The classifier against the simulator's ground truth, and the cases that are never duplicates."""

from __future__ import annotations

import pytest

from forensics.classify import classify
from forensics.findings import build_document
from forensics.ingest.case import load_case
from forensics.simulate.run import KINDS, simulate
from tests.accuracy import f1_by_kind, false_people, predicted_of, truth_of

FORMS = (("logfmt", True, False), ("jsonl", True, True), ("csv", False, False), ("mixed", True, False))
# `-m "not slow"` scores one case with full evidence, the cheapest to simulate and read (tests/durations.txt), so
# the quick run holds an accuracy test; the full run scores every kind in every form, with full and thin evidence
QUICK = ("lease-expiry", "logfmt")
CASES = [pytest.param(kind, syntax, split, gz, marks=() if (kind, syntax) == QUICK else pytest.mark.slow)
         for kind in KINDS for syntax, split, gz in FORMS]


def _score(tmp_path, kind, syntax, split, gz, thin):
    result = simulate(kind, 800, tmp_path, seed=11, syntax=syntax, split_workers=split, gzip=gz, thin=thin)
    truth, predicted = truth_of(tmp_path), predicted_of(result.files)
    assert truth, "the simulator wrote no duplicates"
    return truth, predicted


@pytest.mark.parametrize("kind,syntax,split,gz", CASES)
def test_full_evidence_f1_at_least_095(tmp_path, kind, syntax, split, gz):
    truth, predicted = _score(tmp_path, kind, syntax, split, gz, thin=False)
    assert not false_people(truth, predicted)
    scores = f1_by_kind(truth, predicted)
    assert all(scores.get(k, 0) >= 0.95 for k in set(truth.values())), scores


@pytest.mark.slow
@pytest.mark.parametrize("kind,syntax,split,gz", CASES)
def test_thin_evidence_f1_at_least_085(tmp_path, kind, syntax, split, gz):
    truth, predicted = _score(tmp_path, kind, syntax, split, gz, thin=True)
    assert not false_people(truth, predicted)
    scores = f1_by_kind(truth, predicted)
    assert all(scores.get(k, 0) >= 0.85 for k in set(truth.values())), scores


def _diagnose(tmp_path, lines):
    log = tmp_path / "case.log"
    log.write_text("\n".join(lines) + "\n", encoding="utf-8")
    return build_document(load_case([str(log)]))


T = "2026-11-28T09:{:02d}:00Z"


@pytest.mark.slow
def test_not_duplicates_are_never_reported(tmp_path):
    doc = _diagnose(tmp_path, [
        # two steps of a sequence, and the same person in two campaigns
        f"ts={T.format(0)} event=send worker=w1 campaign=c1 step=1 email=a@x.co msg_id=<1@m>",
        f"ts={T.format(1)} event=send worker=w1 campaign=c1 step=2 email=a@x.co msg_id=<2@m>",
        f"ts={T.format(2)} event=send worker=w1 campaign=c2 step=1 email=a@x.co msg_id=<3@m>",
        # the same msg_id logged twice (with and without brackets)
        f"ts={T.format(3)} event=send worker=w1 campaign=c1 step=1 email=b@x.co msg_id=<4@m>",
        f"ts={T.format(3)} event=send worker=w1 campaign=c1 step=1 email=b@x.co msg_id=4@m",
        # a failed attempt, then one success
        f"ts={T.format(4)} event=send worker=w1 campaign=c1 step=1 email=c@x.co status=timeout",
        f"ts={T.format(5)} event=send worker=w1 campaign=c1 step=1 email=c@x.co msg_id=<5@m> status=failed",
        f"ts={T.format(6)} event=send worker=w1 campaign=c1 step=1 email=c@x.co msg_id=<6@m>",
    ])
    assert doc["summary"]["duplicated_people"] == 0 and doc["incidents"] == []
    assert doc["summary"]["sends"] == 5


@pytest.mark.slow
def test_a_send_logged_three_times_is_one_send_and_a_real_resend_beside_it_is_still_a_duplicate(tmp_path):
    send = f"ts={T.format(0)} event=send worker=w1 campaign=c1 step=1 email=a@x.co msg_id=<1@m>"
    doc = _diagnose(tmp_path, [
        send, send, send,  # one send, its line logged three times (a log shipper's retries)
        f"ts={T.format(1)} event=send worker=w1 campaign=c1 step=1 email=b@x.co msg_id=<2@m>",
        f"ts={T.format(2)} event=send worker=w2 campaign=c1 step=1 email=b@x.co msg_id=<3@m>",
    ])
    assert doc["summary"]["sends"] == 3
    assert [(p["recipient"], len(p["sends"])) for p in doc["affected"]] == [("b@x.co", 2)]


@pytest.mark.slow
def test_a_saved_case_pairs_each_send_with_its_own_file_and_line(tmp_path):
    # two files whose sends sit on the same line numbers: a send is known by its file and line, never by the
    # line alone (the first send of each pair, the earlier one, is w2's, in the second file)
    first, second = tmp_path / "w1.log", tmp_path / "w2.log"
    first.write_text(f"ts={T.format(5)} event=send worker=w1 campaign=c1 step=1 email=a@x.co candidate=cand-1 "
                     f"msg_id=<1@m>\n", encoding="utf-8")
    second.write_text(f"ts={T.format(1)} event=send worker=w2 campaign=c1 step=1 email=a@x.co candidate=cand-2 "
                      f"msg_id=<2@m>\n", encoding="utf-8")
    case = load_case([str(first), str(second)], database=str(tmp_path / "case.duckdb"))
    classify(case.con, save=True)
    pairs = case.con.execute("SELECT worker1, worker2, candidate, seq FROM dup_pairs").fetchall()
    assert pairs == [("w2", "w1", "cand-2", 1)]
    sends = case.con.execute("SELECT source, line, msg_id FROM main.sends ORDER BY msg_id").fetchall()
    assert sends == [(str(first), 1, "1@m"), (str(second), 1, "2@m")]


@pytest.mark.slow
def test_case_variants_of_one_address_are_one_person(tmp_path):
    doc = _diagnose(tmp_path, [
        f"ts={T.format(0)} event=send worker=w1 pid=1 campaign=c1 step=1 email=Jane@Acme.com msg_id=<1@m>",
        f"ts={T.format(1)} event=error worker=w1 pid=1 campaign=c1 step=1 email=jane@acme.com error=timeout",
        f"ts={T.format(1)} event=send worker=w1 pid=1 campaign=c1 step=1 email=\" jane@ACME.com\" msg_id=<2@m> attempt=2",
    ])
    [person] = doc["affected"]
    assert person["recipient"] == "jane@acme.com" and person["kind"] == "retry"


@pytest.mark.slow
def test_differing_variants_take_precedence_and_keep_the_mechanism_as_cause(tmp_path):
    doc = _diagnose(tmp_path, [
        f"ts={T.format(0)} event=send worker=w1 pid=1 campaign=c1 step=1 email=a@x.co msg_id=<1@m> test_id=t1 variant=A",
        f"ts={T.format(1)} event=start worker=w1 pid=2",
        f"ts={T.format(2)} event=send worker=w1 pid=2 campaign=c1 step=1 email=a@x.co msg_id=<2@m> test_id=t1 variant=B",
    ])
    [person] = doc["affected"]
    assert (person["kind"], person["cause"]) == ("ab-contamination", "state-loss")
    [incident] = doc["incidents"]
    assert incident["test_id"] == "t1" and 0 <= incident["confidence"] <= 1


@pytest.mark.slow
def test_a_send_without_a_variant_is_no_second_variant_and_a_saved_case_lists_each_persons_variants(tmp_path):
    log = tmp_path / "case.log"
    log.write_text("\n".join([
        # a@: variant A, then a re-send that logged none: one variant, a retry
        f"ts={T.format(0)} event=send worker=w1 pid=1 campaign=c1 step=1 email=a@x.co msg_id=<1@m> test_id=t1 variant=A",
        f"ts={T.format(1)} event=send worker=w1 pid=1 campaign=c1 step=1 email=a@x.co msg_id=<2@m> attempt=2",
        # b@: B, B, then A on a third send (the first two sends agree): contaminated all the same
        f"ts={T.format(2)} event=send worker=w1 pid=1 campaign=c1 step=1 email=b@x.co msg_id=<3@m> test_id=t1 variant=B",
        f"ts={T.format(3)} event=send worker=w1 pid=1 campaign=c1 step=1 email=b@x.co msg_id=<4@m> test_id=t1 variant=B",
        f"ts={T.format(4)} event=send worker=w2 pid=7 campaign=c1 step=1 email=b@x.co msg_id=<5@m> test_id=t1 variant=A",
    ]) + "\n", encoding="utf-8")
    case = load_case([str(log)], database=str(tmp_path / "case.duckdb"))
    classify(case.con, save=True)
    people = case.con.execute("SELECT recipient, kind, variants, workers FROM dup_people ORDER BY recipient").fetchall()
    assert people == [("a@x.co", "retry", ["A", None], ["w1"]),
                      ("b@x.co", "ab-contamination", ["A", "B"], ["w1", "w2"])]


@pytest.mark.slow
def test_lease_expiry_evidence_names_the_shard_and_both_claims(tmp_path):
    doc = _diagnose(tmp_path, [
        f"ts={T.format(0)} event=claim worker=w1 shard=s-7 lease=15m",
        f"ts={T.format(1)} event=send worker=w1 shard=s-7 campaign=c1 step=1 email=a@x.co msg_id=<1@m>",
        f"ts={T.format(16)} event=claim worker=w2 shard=s-7 lease=15m",
        f"ts={T.format(17)} event=send worker=w2 shard=s-7 campaign=c1 step=1 email=a@x.co msg_id=<2@m>",
        f"ts={T.format(18)} event=send worker=w1 shard=s-7 campaign=c1 step=1 email=b@x.co msg_id=<3@m>",
    ])
    [incident] = doc["incidents"]
    assert incident["kind"] == "lease-expiry" and incident["shards"] == ["s-7"]
    assert any("claimed again" in line and "15 min" in line for line in incident["evidence"])
    assert any("kept sending 1 messages" in line for line in incident["evidence"])


@pytest.mark.slow
def test_renewed_lease_means_parallel_not_expiry(tmp_path):
    doc = _diagnose(tmp_path, [
        f"ts={T.format(0)} event=claim worker=w1 shard=s-7 lease=15m",
        f"ts={T.format(1)} event=send worker=w1 shard=s-7 campaign=c1 step=1 email=a@x.co msg_id=<1@m>",
        f"ts={T.format(10)} event=renew worker=w1 shard=s-7 lease=15m",
        f"ts={T.format(16)} event=claim worker=w2 shard=s-7 lease=15m",
        f"ts={T.format(17)} event=send worker=w2 shard=s-7 campaign=c1 step=1 email=a@x.co msg_id=<2@m>",
    ])
    assert doc["incidents"][0]["kind"] == "parallel-worker"


def test_one_provider_id_for_several_recipients_is_several_sends(tmp_path):
    doc = _diagnose(tmp_path, [
        f"ts={T.format(0)} event=send worker=w1 campaign=c1 step=1 email=a@x.co msg_id=XBg2anf2TqCy6WXKQFhieQ",
        f"ts={T.format(0)} event=send worker=w1 campaign=c1 step=1 email=b@x.co msg_id=XBg2anf2TqCy6WXKQFhieQ",
    ])
    assert doc["summary"]["sends"] == 2 and doc["summary"]["duplicated_people"] == 0


@pytest.mark.slow
def test_the_restart_named_by_a_state_loss_incident_is_one_persons_incarnation_change(tmp_path):
    # b@ was re-sent by a new incarnation of w1; a@ (listed first) after the same start record, but by the old
    # incarnation: the incident's "incarnation X → Y" must be b's, never a's i1 → i1
    doc = _diagnose(tmp_path, [
        f"ts={T.format(0)} event=send worker=w1 pid=i1 campaign=c step=1 email=a@x.co msg_id=1",
        f"ts={T.format(1)} event=send worker=w1 pid=i1 campaign=c step=1 email=b@x.co msg_id=2",
        f"ts={T.format(2)} event=start worker=w1 pid=i2",
        f"ts={T.format(3)} event=send worker=w1 pid=i1 campaign=c step=1 email=a@x.co msg_id=3",
        f"ts={T.format(4)} event=send worker=w1 pid=i2 campaign=c step=1 email=b@x.co msg_id=4",
    ])
    [incident] = doc["incidents"]
    assert incident["kind"] == "state-loss" and incident["people"] == 2
    assert any("incarnation i1 → i2" in line for line in incident["evidence"]), incident["evidence"]


def test_reach_counts_people_not_sends_whoever_sent_twice(tmp_path):
    # the people each worker reached are distinct addresses: a worker's second send to one person does not
    # add one, nor does a send with no worker (counted from sends less the repeated ones)
    doc = _diagnose(tmp_path, [
        f"ts={T.format(0)} event=send worker=w1 campaign=c1 step=1 email=a@x.co msg_id=<1@m>",
        f"ts={T.format(1)} event=send worker=w1 campaign=c1 step=1 email=a@x.co msg_id=<2@m>",
        f"ts={T.format(2)} event=send worker=w2 campaign=c1 step=1 email=a@x.co msg_id=<3@m>",
        f"ts={T.format(3)} event=send worker=w1 campaign=c1 step=1 email=b@x.co msg_id=<4@m>",
        f"ts={T.format(4)} event=send worker=w2 campaign=c1 step=1 email=c@x.co msg_id=<5@m>",
        f"ts={T.format(5)} event=send campaign=c1 step=1 email=d@x.co msg_id=<6@m>",
        f"ts={T.format(6)} event=send worker=w2 campaign=c1 step=1 email=e@x.co msg_id=<7@m>",
        f"ts={T.format(7)} event=send worker=w2 campaign=c1 step=1 email=e@x.co msg_id=<8@m>",
    ])
    [incident] = doc["incidents"]
    assert [(w["worker"], w["reached"], w["duplicated_people"]) for w in incident["per_worker"]] == [
        ("w2", 3, 2), ("w1", 2, 1)]


def _two_incarnations(tmp_path, times_a, times_b):
    people = ["a@x.co", "b@x.co", "c@x.co"]
    lines = [f"ts={T.format(t)} event=send worker=mailer pid={pid} campaign=c step=1 email={email} msg_id={pid}-{t}"
             for pid, times in (("4100", times_a), ("4101", times_b)) for t, email in zip(times, people)]
    return _diagnose(tmp_path, sorted(lines))


@pytest.mark.slow
def test_two_incarnations_of_one_worker_sending_at_once_are_parallel_workers_not_a_restart(tmp_path):
    # one worker name (a host, say), two processes whose sends interleave: a restart cannot overlap itself
    [incident] = _two_incarnations(tmp_path, (0, 2, 4), (1, 3, 5))["incidents"]
    assert (incident["kind"], incident["people"]) == ("parallel-worker", 3)
    assert any("two incarnations of one worker that sent at the same time (mailer: 4100 and 4101" in line
               and "not a restart" in line for line in incident["evidence"]), incident["evidence"]


@pytest.mark.slow
def test_a_restart_is_named_only_when_the_first_incarnation_stopped_before_the_second_began(tmp_path):
    [incident] = _two_incarnations(tmp_path, (0, 1, 2), (3, 4, 5))["incidents"]
    assert (incident["kind"], incident["people"]) == ("state-loss", 3)
    assert any("incarnation 4100 → 4101, the first's last send before the second's first" in line
               for line in incident["evidence"]), incident["evidence"]
