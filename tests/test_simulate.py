"""The simulator: its logs follow the vocabulary, and its ground truth is exactly what the files show.

The files are read back here with a deliberately simple reader (json, csv, a
logfmt tokenizer and the alias table of docs/log-vocabulary.md), independent of
mailmortem's own ingest, and the duplicates are recomputed by the dedupe key of
docs/log-vocabulary.md.
"""

from __future__ import annotations

import csv
import datetime as dt
import gzip
import json
import re
from collections import defaultdict
from pathlib import Path

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from forensics.errors import ConfigError, InputError
from forensics.simulate.run import KINDS, SYNTAXES, read_truth, simulate

FIVE = KINDS[:5]
ALIASES = {
    "ts": "ts time timestamp @timestamp datetime date", "event": "event evt action event_type",
    "worker": "worker worker_id agent agent_id instance consumer hostname host",
    "incarnation": "pid container container_id boot_id process_id",
    "campaign": "campaign campaign_id sequence sequence_id",
    "step": "step touch sequence_step template template_id",
    "recipient": "email to recipient rcpt rcpt_to lead_email candidate_email mail.to",
    "candidate": "lead lead_id candidate candidate_id contact_id prospect_id",
    "msg_id": "msg_id msg-id message_id message-id messageid msgid smtp-id",
    "shard": "shard shard_id batch batch_id partition", "lease": "lease lease_s lease_seconds ttl visibility_timeout",
    "test_id": "test_id test experiment experiment_id ab_test", "variant": "variant arm bucket",
    "status": "status result outcome", "attempt": "attempt try retry retries", "error": "error err exception",
}
CANON = {alias: canon for canon, names in ALIASES.items() for alias in names.split()}
EVENTS = {"send": "send sent email_sent send_ok delivered_to_provider", "claim": "claim claimed lease_acquired acquire",
          "renew": "renew lease_renew heartbeat extend", "release": "release released batch_done complete ack",
          "expire": "expire lease_expired expired", "start": "start worker_start startup boot started",
          "error": "error send_error send_failed exception"}
EVENT = {name: canon for canon, names in EVENTS.items() for name in names.split()}
EXTRAS = {"level", "latency_ms", "subject", "count", "mail.subject"}
OK = {None, "sent", "ok", "success", "accepted", "queued", "delivered"}
BARE_TS = re.compile(r"^\d{4}-\d\d-\d\dT\S+$")
PAIR = re.compile(r'\s*([^\s="]+)=("(?:[^"\\]|\\.)*"|[^\s"]*)(?=\s|$)')


# --- a small independent reader ----------------------------------------------------------

def parse_logfmt(line: str) -> dict | None:
    rec, pos = {}, 0
    first = line.split(" ", 1)[0]
    if BARE_TS.match(first):
        rec["ts"], pos = first, len(first)
    while pos < len(line):
        m = PAIR.match(line, pos)
        if not m:
            return None
        value = m.group(2)
        if value.startswith('"'):
            value = re.sub(r"\\(.)", r"\1", value[1:-1])
        rec[m.group(1)], pos = value, m.end()
    return rec or None


def _flatten(obj: dict, prefix: str = "") -> dict:
    out = {}
    for key, value in obj.items():
        if isinstance(value, dict):
            out.update(_flatten(value, f"{prefix}{key}."))
        else:
            out[prefix + key] = value
    return out


def raw_records(path: Path) -> tuple[list[dict], list[str]]:
    """Records (raw keys) and the non-record lines of one file."""
    opener = gzip.open if path.suffix == ".gz" else open
    with opener(path, "rt", encoding="utf-8", newline="") as f:
        lines = f.read().split("\n")
    lines = lines[:-1] if lines and lines[-1] == "" else lines
    syntax = path.name.replace(".gz", "").rsplit(".", 1)[1]
    recs, junk = [], []
    if syntax == "csv":
        header = next(csv.reader([lines[0]]))
        for line in lines[1:]:
            row = next(csv.reader([line]), [])
            if len(row) == len(header):
                recs.append({k: v for k, v in zip(header, row) if v != ""})
            else:
                junk.append(line)
        return recs, junk
    for line in lines:
        try:
            rec = _flatten(json.loads(line)) if syntax == "jsonl" else parse_logfmt(line)
        except ValueError:
            rec = None
        (recs.append(rec) if isinstance(rec, dict) else junk.append(line))
    return recs, junk


def canonical(raw: dict, path: Path) -> dict:
    rec = {CANON.get(k, k): v for k, v in raw.items()}
    rec["event"] = EVENT.get(rec.get("event")) if "event" in rec else None
    rec["file"] = path.name
    if rec.get("msg_id"):
        rec["msg_id"] = str(rec["msg_id"]).strip().strip("<>")
    if "recipient" in rec:
        rec["written"], rec["recipient"] = rec["recipient"], rec["recipient"].strip().lower()
    for key in ("step", "attempt", "incarnation"):
        if key in rec:
            rec[key] = str(rec[key])
    return rec


def read_case(result) -> list[dict]:
    return [canonical(raw, p) for p in result.files for raw in raw_records(p)[0]]


def is_real_send(rec: dict) -> bool:
    is_send = rec["event"] == "send" or (rec["event"] is None and rec.get("status") in OK - {None})
    return is_send and bool(rec.get("msg_id")) and rec.get("status") in OK


def sends_by_person(records: list[dict]) -> dict[tuple, dict]:
    groups = defaultdict(dict)
    for rec in records:
        if is_real_send(rec):
            groups[(rec["campaign"], rec["step"], rec["recipient"])][rec["msg_id"]] = rec
    return groups


def duplicates(records: list[dict]) -> dict[tuple, dict]:
    return {key: sends for key, sends in sends_by_person(records).items() if len(sends) > 1}


def when(rec: dict) -> float:
    ts = rec["ts"]
    if isinstance(ts, (int, float)) or str(ts).isdigit():
        return int(ts) / 1000
    return dt.datetime.fromisoformat(str(ts).replace("Z", "+00:00")).timestamp()


def lease_seconds(value) -> int:
    text = str(value)
    return int(text[:-1]) * 60 if text.endswith("m") else int(text.rstrip("s"))


def truth_keys(result) -> dict[tuple, dict]:
    return {(r["campaign"], r["step"], r["recipient"]): r for r in result.truth}


_CASES: dict = {}


@pytest.fixture(scope="module")
def case(tmp_path_factory):
    """Simulate once per distinct arguments in this module (each case takes a fraction of a second)."""
    def make(kind: str, people: int = 400, **options):
        key = (kind, people, tuple(sorted(options.items())))
        if key not in _CASES:
            out = tmp_path_factory.mktemp(kind)
            result = simulate(kind, people, out, **options)
            _CASES[key] = (result, read_case(result))
        return _CASES[key]
    return make


# --- ground truth ------------------------------------------------------------------------

@pytest.mark.slow
@pytest.mark.parametrize("kind", KINDS)
@pytest.mark.parametrize("options", [{}, {"thin": True, "syntax": "mixed"}, {"syntax": "jsonl", "gzip": True},
                                     {"syntax": "csv", "split_workers": False, "seed": 3}])
def test_truth_is_exactly_the_duplicates_in_the_files(case, kind, options):
    result, records = case(kind, **options)
    assert set(duplicates(records)) == set(truth_keys(result))
    assert result.truth, "every kind's case has duplicated people"
    assert read_truth(result.truth_path) == result.truth
    assert result.sends == sum(len(s) for s in sends_by_person(records).values())


@pytest.mark.slow
@given(kind=st.sampled_from(KINDS), seed=st.integers(0, 10_000), syntax=st.sampled_from(SYNTAXES),
       thin=st.booleans(), people=st.integers(20, 160))
@settings(max_examples=12, deadline=None, suppress_health_check=[HealthCheck.function_scoped_fixture])
def test_truth_matches_files_for_any_seed(tmp_path_factory, kind, seed, syntax, thin, people):
    out = tmp_path_factory.mktemp("any")
    result = simulate(kind, people, out, seed=seed, syntax=syntax, thin=thin)
    assert set(duplicates(read_case(result))) == set(truth_keys(result))


@pytest.mark.parametrize("kind", FIVE)
def test_a_single_kind_case_has_only_that_kind(case, kind):
    result, _ = case(kind)
    kinds = {r["kind"] for r in result.truth}
    if kind == "ab-contamination":
        assert "ab-contamination" in kinds and len(kinds) <= 2  # plus the mechanism, where the variant held
    else:
        assert kinds == {kind}
    assert all(r["recipient"] == r["recipient"].strip().lower() for r in result.truth)


def test_mixed_case_has_every_kind_each_on_its_own_campaign(case):
    result, _ = case("mixed", 800)
    assert {r["kind"] for r in result.truth} == set(FIVE)
    mechanism_of = defaultdict(set)
    for r in result.truth:
        mechanism_of[r["campaign"]].add(r["cause"] or r["kind"])
    assert all(len(m) == 1 for m in mechanism_of.values())


def test_contaminated_people_got_two_variants_and_the_rest_one(case):
    result, records = case("ab-contamination")
    dups = duplicates(records)
    for key, row in truth_keys(result).items():
        variants = {s.get("variant") for s in dups[key].values()}
        assert all(s.get("test_id") == "subj-2026-11" for s in dups[key].values())
        if row["kind"] == "ab-contamination":
            assert variants == {"A", "B"} and row["cause"] in ("retry", "state-loss", "parallel-worker")
        else:
            assert len(variants) == 1 and row["cause"] == ""


# --- the evidence each kind leaves -------------------------------------------------------

def _of(records, event):
    return [r for r in records if r["event"] == event]


@pytest.mark.parametrize("seed,people", [(5, 400), (0, 60), (1, 1000), (2, 25)])
def test_lease_expiry_second_claim_after_the_lease_and_first_holder_still_sending(case, seed, people):
    result, records = case("lease-expiry", people, seed=seed)
    dups = duplicates(records)
    shards = {s["shard"] for sends in dups.values() for s in sends.values()}
    assert len(shards) == 1, "duplicates are confined to one shard"
    shard = shards.pop()
    # a line the log shipper delivered twice is one claim
    claims = sorted({(when(r), r["worker"]): r for r in _of(records, "claim") if r["shard"] == shard}.values(),
                    key=when)
    first, second = claims[0], claims[1]
    assert first["worker"] != second["worker"]
    assert when(second) >= when(first) + lease_seconds(first["lease"])
    assert not [r for r in _of(records, "renew") if r["shard"] == shard and r["worker"] == first["worker"]]
    late = [s for sends in dups.values() for s in sends.values()
            if s["worker"] == first["worker"] and when(s) > when(second)]
    assert late, "the first holder is still sending after the second claim"


def test_lease_expiry_lease_is_written_in_several_units():
    import random

    from forensics.simulate.render import choose_dialect
    styles = {choose_dialect(random.Random(i), "logfmt").lease for i in range(40)}
    assert styles == {"s", "m", "plain"}


def test_state_loss_restart_has_a_start_record_and_a_new_pid(case):
    result, records = case("state-loss")
    dups = duplicates(records)
    (worker,) = {s["worker"] for sends in dups.values() for s in sends.values()}
    starts = [when(r) for r in _of(records, "start") if r["worker"] == worker]
    for sends in list(dups.values())[:50]:
        a, b = sorted(sends.values(), key=when)[:2]
        assert a["incarnation"] != b["incarnation"]
        assert any(when(a) < t < when(b) for t in starts)


def test_state_loss_replays_the_list_in_the_same_order(case):
    result, records = case("state-loss", seed=2)
    dups = duplicates(records)
    firsts = sorted(dups, key=lambda k: min(when(s) for s in dups[k].values()))
    second = {k: sorted(when(s) for s in dups[k].values())[1] for k in dups}
    in_order = sum(second[a] < second[b] for a, b in zip(firsts, firsts[1:]))
    assert in_order >= 0.95 * (len(firsts) - 1)  # a failed-then-retried send may land a little later


def test_parallel_workers_each_sent_the_same_people(case):
    result, records = case("parallel-worker")
    dups = duplicates(records)
    assert all(len({s["worker"] for s in sends.values()}) == len(sends) for sends in dups.values())
    people = sends_by_person(records)
    step = next(iter(dups))[:2]
    listed = [k for k in people if k[:2] == step]
    assert len(dups) >= 0.7 * len(listed), "both workers cover most of the same list"


@pytest.mark.parametrize("seed", range(4))
def test_parallel_worker_claims_overlap_without_any_lease_expiring(case, seed):
    result, records = case("parallel-worker", seed=seed)
    by_shard = defaultdict(list)
    for claim in _of(records, "claim"):
        by_shard[claim["shard"]].append(claim)
    assert not _of(records, "expire")
    for claims in by_shard.values():
        claims.sort(key=when)
        assert all(when(c) < when(claims[0]) + lease_seconds(claims[0]["lease"]) for c in claims[1:])


def test_retries_are_isolated_people_resent_by_the_same_process_soon_after(case):
    result, records = case("retry", 1500, seed=1)
    dups = duplicates(records)
    assert 0.004 * 1500 < len(dups) < 0.04 * 1500
    errors = {(e["recipient"], e["worker"]) for e in _of(records, "error") if e.get("error") == "timeout waiting for ack"}
    for (campaign, step, recipient), sends in dups.items():
        a, b = sorted(sends.values(), key=when)[:2]
        assert a["worker"] == b["worker"] and a["incarnation"] == b["incarnation"]
        assert 1 <= when(b) - when(a) <= 180
        assert (recipient, a["worker"]) in errors or int(b["attempt"]) >= 2


@pytest.mark.slow
def test_thin_evidence_has_no_claims_starts_pids_attempts_or_errors(case):
    for kind in FIVE:
        _, records = case(kind, thin=True, syntax="mixed")
        assert {r["event"] for r in records} <= {"send", None}
        assert not any("incarnation" in r or "attempt" in r for r in records)


@pytest.mark.slow
def test_full_evidence_cases_mostly_use_claims_whatever_the_kind(case):
    with_claims = [kind for kind in FIVE for seed in range(3) if _of(case(kind, seed=seed)[1], "claim")]
    assert len(with_claims) >= 10


# --- what must never be reported ---------------------------------------------------------

def test_not_a_duplicate_traps_are_present(case):
    result, records = case("retry", 1500, seed=1)
    truth = truth_keys(result)
    people = sends_by_person(records)
    ids = [r["msg_id"] for r in records if is_real_send(r)]
    assert len(ids) > len(set(ids)), "a log shipper delivered some send lines twice"
    failed = {(r["campaign"], r["step"], r["recipient"]) for r in records
              if r["event"] == "send" and r.get("status") in ("failed", "timeout") and not r.get("msg_id")}
    assert any(key in people and len(people[key]) == 1 and key not in truth for key in failed)
    steps, campaigns = defaultdict(set), defaultdict(set)
    for campaign, step, recipient in people:
        steps[(campaign, recipient)].add(step)
        campaigns[recipient].add(campaign)
    assert any(len(s) >= 3 for s in steps.values()), "multi-step sequences"
    assert any(len(c) >= 2 for c in campaigns.values()), "people in two campaigns"
    written = defaultdict(set)
    for r in records:
        if is_real_send(r):
            written[r["recipient"]].add(r["written"].strip())
    assert any(len(w) > 1 for w in written.values()), "one address in two letter cases"


def test_case_variants_of_one_address_count_as_one_person(case):
    result, records = case("parallel-worker", 600)
    truth = truth_keys(result)
    mixed_case = [key for key, sends in duplicates(records).items()
                  if len({s["written"] for s in sends.values()}) > 1]
    assert mixed_case and all(key in truth for key in mixed_case)


def test_some_sends_have_no_event_field(case):
    bare = [r for seed in range(4) for r in case("retry", seed=seed)[1] if r["event"] is None and is_real_send(r)]
    assert bare


# --- the files ----------------------------------------------------------------------------

def test_same_seed_same_bytes_other_seed_other_bytes(tmp_path):
    def contents(out, seed):
        result = simulate("mixed", 300, out, seed=seed, syntax="mixed", gzip=True)
        return {p.name: p.read_bytes() for p in sorted(out.iterdir())}, result
    a, _ = contents(tmp_path / "a", 11)
    b, _ = contents(tmp_path / "b", 11)
    c, _ = contents(tmp_path / "c", 12)
    a.pop("README.md"), b.pop("README.md"), c.pop("README.md")
    assert a == b and a != c


@pytest.mark.slow
def test_every_key_written_is_in_the_vocabulary(case):
    for seed in range(3):
        for syntax in ("logfmt", "jsonl", "csv"):
            result, _ = case("mixed", 200, seed=seed, syntax=syntax)
            for path in result.files:
                keys = {k for raw in raw_records(path)[0] for k in raw}
                assert keys - set(CANON) <= EXTRAS, (path.name, keys - set(CANON))


def test_noise_lines_are_there_and_go_with_no_noise(case):
    result, _ = case("state-loss", syntax="mixed")
    junk = [line for p in result.files for line in raw_records(p)[1]]
    assert "" in junk and "Traceback (most recent call last):" in junk
    assert any('"GET /healthz HTTP/1.1"' in line for line in junk)
    endings = [p.read_bytes().endswith(b"\n") for p in result.files]
    assert endings.count(False) == 1, "one file ends in a truncated line"
    quiet, _ = case("state-loss", syntax="mixed", noise=False)
    assert not [line for p in quiet.files for line in raw_records(p)[1]]
    assert all(p.read_bytes().endswith(b"\n") for p in quiet.files)


def test_file_layout_per_worker_single_and_gzip(case):
    split, _ = case("retry", syntax="mixed")
    assert len(split.files) >= 3 and all(p.name.startswith("worker-") for p in split.files)
    assert {p.suffix for p in split.files} == {".log", ".jsonl", ".csv"}
    single, _ = case("retry", syntax="jsonl", split_workers=False, gzip=True)
    assert [p.name for p in single.files] == ["mail-send.jsonl.gz"]
    assert single.truth_path.name == "truth.csv" and single.truth_path.read_text().startswith("campaign,step")


def test_readme_says_what_happened_and_how(case):
    result, _ = case("lease-expiry", thin=True, syntax="mixed")
    text = result.readme_path.read_text()
    assert "lease-expiry" in text and "400 people" in text
    assert f"--kind lease-expiry --people 400 --out {result.truth_path.parent} --seed 0 --syntax mixed --thin" in text


def test_bad_arguments_are_config_errors(tmp_path):
    for args, kwargs in ((("nope", 100), {}), (("retry", 5), {}), (("retry", 100), {"syntax": "xml"}),
                         (("retry", 100), {"syntax": "mixed", "split_workers": False})):
        with pytest.raises(ConfigError):
            simulate(*args, tmp_path / "x", **kwargs)


def test_refuses_a_non_empty_directory_that_is_not_a_simulation(tmp_path):
    (tmp_path / "prod.log").write_text("precious\n")
    with pytest.raises(InputError):
        simulate("retry", 50, tmp_path)
    assert (tmp_path / "prod.log").read_text() == "precious\n"


# --- the command ----------------------------------------------------------------------------

def test_cli_writes_case_and_summary(cli, tmp_path):
    out = tmp_path / "case"
    result = cli("simulate", "--kind", "retry", "--people", "300", "--out", out, "--syntax", "jsonl")
    assert result.exit_code == 0, result.stderr
    assert "real sends" in result.stdout and "duplicated people" in result.stdout and "retry" in result.stdout
    assert (out / "truth.csv").is_file() and list(out.glob("worker-*.jsonl"))


def test_cli_overwrites_an_earlier_simulation_only(cli, tmp_path):
    out = tmp_path / "case"
    assert cli("simulate", "--kind", "retry", "--people", "100", "--out", out).exit_code == 0
    assert cli("simulate", "--kind", "retry", "--people", "100", "--out", out, "--syntax", "csv").exit_code == 0
    assert not list(out.glob("*.log")) and list(out.glob("*.csv"))
    other = tmp_path / "theirs"
    other.mkdir()
    (other / "notes.txt").write_text("x")
    refused = cli("simulate", "--kind", "retry", "--people", "100", "--out", other)
    assert refused.exit_code == 1
    assert refused.stderr.startswith("Error: refusing to write into") and refused.stderr.count("\n") == 1


def test_cli_usage_errors_exit_2_and_bad_combinations_exit_1(cli, tmp_path):
    assert cli("simulate", "--kind", "retry", "--people", "5", "--out", tmp_path / "a").exit_code == 2
    assert cli("simulate", "--kind", "oops", "--people", "50", "--out", tmp_path / "b").exit_code == 2
    bad = cli("simulate", "--kind", "retry", "--people", "50", "--out", tmp_path / "c", "--syntax", "mixed",
              "--single-file")
    assert bad.exit_code == 1 and bad.stderr.startswith("Error: --syntax mixed")


def test_cli_help_has_examples(cli):
    result = cli("simulate", "--help")
    assert result.exit_code == 0 and "Examples:" in result.stdout and "mailmortem simulate --kind" in result.stdout


# --- the committed samples --------------------------------------------------------------------

SAMPLES = Path(__file__).resolve().parent.parent / "sample_logs"


def test_sample_logs_cover_every_kind_and_stay_small():
    assert sorted(p.name for p in SAMPLES.iterdir() if p.is_dir()) == sorted(KINDS)
    assert sum(p.stat().st_size for p in SAMPLES.rglob("*") if p.is_file()) < 2_000_000
    names = [p.name for p in SAMPLES.rglob("worker-*")]
    assert any(".jsonl" in n for n in names) and any(".csv" in n for n in names) and any(n.endswith(".gz") for n in names)
    listed = (SAMPLES / "README.md").read_text()
    for kind in KINDS:
        line = next(line for line in listed.splitlines() if line.startswith(f"- `{kind}/`"))
        hit = int(re.search(r"([\d,]+) hit", line).group(1).replace(",", ""))
        assert hit == len(read_truth(SAMPLES / kind / "truth.csv")), kind


@pytest.mark.parametrize("kind", KINDS)
def test_each_sample_is_exactly_what_its_readme_command_makes(cli, tmp_path, kind):
    import shlex

    folder = SAMPLES / kind
    readme = (folder / "README.md").read_text()
    command = re.search(r"Generated with: `mailmortem simulate ([^`]*)`", readme).group(1)
    args = shlex.split(command)
    original = args[args.index("--out") + 1]
    args[args.index("--out") + 1] = str(tmp_path / kind)
    assert cli("simulate", *args).exit_code == 0
    made = {p.name: p.read_bytes() for p in (tmp_path / kind).iterdir()}
    made["README.md"] = made["README.md"].replace(str(tmp_path / kind).encode(), original.encode())
    assert made == {p.name: p.read_bytes() for p in folder.iterdir()}
