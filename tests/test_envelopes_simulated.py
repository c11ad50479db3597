"""The simulator's logs re-delivered through every platform diagnose like the plain logs (same people, same
kinds), and any line wrapped then unwrapped reads back the same record."""

from __future__ import annotations

import datetime as dt
import json
import tempfile
from pathlib import Path

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from forensics.findings import build_document
from forensics.ingest.case import load_case
from forensics.ingest.fields import ALIASES
from forensics.ingest.load import Reading
from forensics.kinds import KINDS as INCIDENT_KINDS
from forensics.simulate import envelopes as wrap
from forensics.simulate.run import simulate

SYNTAXES = ("logfmt", "jsonl")
READING = Reading(year=2026)


def diagnosis(paths) -> tuple:
    document = build_document(load_case([str(p) for p in paths], reading=READING))
    people = sorted((a["campaign"], a["step"], a["recipient"], a["kind"]) for a in document["affected"])
    return people, document["summary"]


@pytest.fixture(scope="module")
def simulated(tmp_path_factory) -> dict:
    """Per syntax: the simulator's worker files and their plain diagnosis."""
    found = {}
    for syntax in SYNTAXES:
        out = tmp_path_factory.mktemp(f"plain-{syntax}")
        result = simulate("mixed", 240, out, seed=5, syntax=syntax)
        files = sorted(result.files)
        found[syntax] = (files, diagnosis(files))
        assert found[syntax][1][0], "the simulated case has duplicates to find"
    return found


def rewrapped(files: list[Path], folder: Path, name: str, document: bool = False) -> list[Path]:
    """Each worker file as the platform `name` would have delivered it."""
    wrapped = []
    for path in files:
        text = path.read_text(encoding="utf-8")
        *lines, last = text.split("\n")
        target = folder / f"{path.stem}.{name}{'.json' if document else '.log'}"
        if name == "cloudwatch-export":  # the export's object names: <task>/<log stream>/000000.gz
            target = folder / path.stem / "000000"
            target.parent.mkdir()
        target.write_text(wrap.wrap(name, lines, last, document=document), encoding="utf-8")
        wrapped.append(target)
    return wrapped


def _matrix() -> list:
    cases = []
    for name in wrap.NAMES:
        for syntax in SYNTAXES:
            if (syntax == "jsonl" and name in wrap.LOGFMT_ONLY) or (syntax == "logfmt" and name in wrap.JSON_ONLY):
                continue
            fast = name in ("docker-json", "journald") and syntax == "logfmt"
            cases.append(pytest.param(name, syntax, False, marks=() if fast else pytest.mark.slow,
                                      id=f"{name}-{syntax}"))
    for name in wrap.DOCUMENTS:
        for syntax in SYNTAXES:
            cases.append(pytest.param(name, syntax, True, marks=pytest.mark.slow, id=f"{name}-document-{syntax}"))
    return cases


@pytest.mark.slow
@pytest.mark.parametrize("name,syntax,document", _matrix())
def test_a_wrapped_case_diagnoses_like_the_plain_one(simulated, tmp_path, name, syntax, document):
    files, plain = simulated[syntax]
    wrapped = rewrapped(files, tmp_path, name, document)
    case = load_case([str(p) for p in wrapped], reading=READING)
    assert {i.envelope for i in case.inputs} == {name}
    assert diagnosis(wrapped) == plain


@pytest.mark.slow
def test_a_case_of_many_envelopes_diagnoses_like_the_plain_one(simulated, tmp_path):
    files, plain = simulated["logfmt"]
    names = ["docker-json", "cri", "syslog", "python-logging", "loki"]
    wrapped = [rewrapped([path], tmp_path, names[i % len(names)])[0] for i, path in enumerate(files)]
    assert diagnosis(wrapped) == plain


@pytest.mark.slow
def test_lines_longer_than_docker_and_containerd_pieces_are_joined(simulated, tmp_path):
    files, _ = simulated["jsonl"]
    long = json.dumps({"ts": "2026-11-28T09:00:00Z", "event": "send", "worker": "w9", "email": "long@example.com",
                       "msg_id": "<long@x>", "note": "x" * (2 * wrap.DOCKER_CHUNK + 100)})
    for name in ("docker-json", "cri"):
        path = tmp_path / f"long.{name}.log"
        path.write_text(wrap.wrap(name, ["", long, ""]), encoding="utf-8")
        assert path.read_text(encoding="utf-8").count("\n") >= 5  # written in pieces
        case = load_case([str(path)])
        assert case.con.execute("SELECT line_no, recipient FROM events").fetchall() == [(2, "long@example.com")]


# --- any line wrapped then unwrapped reads back the same record ----------------------------------

TEXT = st.text(st.characters(blacklist_categories=("Cc", "Cs", "Zl", "Zp", "Co", "Cn")), min_size=1, max_size=24)
WORD = st.text("abcdefghijklmnopqrstuvwxyz0123456789-_.", min_size=1, max_size=12)
COLUMNS = ("ts", "event", "worker", "incarnation", "campaign", "step", "recipient", "msg_id", "status", "error")


@st.composite
def records(draw) -> dict:
    # worker and pid are always given: where a record has none, the envelope's are taken (test_envelopes)
    record = {"event": draw(st.sampled_from(["send", "claim", "error", "start"])), "worker": draw(WORD),
              "pid": draw(WORD),
              "campaign": draw(TEXT), "step": str(draw(st.integers(1, 9))),
              "email": f"{draw(WORD)}@example.com", "msg_id": f"<{draw(WORD)}@x>", "error": draw(TEXT)}
    if draw(st.booleans()):
        moment = draw(st.datetimes(dt.datetime(2020, 1, 1), dt.datetime(2030, 1, 1)))
        record = {"ts": moment.replace(microsecond=moment.microsecond // 1000 * 1000).isoformat() + "Z", **record}
    return record


def logfmt(record: dict) -> str:
    def value(text: str) -> str:
        if text and not any(c in text for c in ' ="\\'):
            return text
        return '"' + text.replace("\\", "\\\\").replace('"', '\\"') + '"'
    return " ".join(f"{key}={value(text)}" for key, text in record.items())


def read_back(text: str, suffix: str = ".log") -> dict | None:
    with tempfile.TemporaryDirectory() as tmp:
        path = Path(tmp) / f"case{suffix}"
        path.write_text(text, encoding="utf-8")
        try:
            case = load_case([str(path)], reading=READING)
        except Exception as exc:  # noqa: BLE001 - a record read back is the property; say what came instead
            return {"error": str(exc)}
        rows = case.con.execute(f"SELECT {', '.join(COLUMNS)} FROM events").fetchall()
    return dict(zip(COLUMNS, rows[0])) if len(rows) == 1 else {"rows": rows}


@pytest.mark.slow
@settings(max_examples=40, deadline=None, suppress_health_check=[HealthCheck.too_slow,
                                                                 HealthCheck.function_scoped_fixture])
@given(records(), st.sampled_from(SYNTAXES), st.sampled_from(wrap.NAMES), st.booleans())
def test_any_line_wrapped_then_unwrapped_reads_back_the_same_record(record, syntax, name, document):
    if (syntax == "jsonl" and name in wrap.LOGFMT_ONLY) or (syntax == "logfmt" and name in wrap.JSON_ONLY):
        syntax = "logfmt" if syntax == "jsonl" else "jsonl"
    document = document and name in wrap.DOCUMENTS
    [stamp] = wrap.stamps(1)
    # a record without a time takes the envelope's: the plain line it must equal carries that time
    reference = record if "ts" in record else {"ts": stamp.isoformat(), **record}
    line = json.dumps(record, ensure_ascii=False) if syntax == "jsonl" else logfmt(record)
    plain = json.dumps(reference, ensure_ascii=False) if syntax == "jsonl" else logfmt(reference)
    expected = read_back(plain + "\n")
    assert "ts" in expected and expected["ts"] is not None
    assert read_back(wrap.wrap(name, [line], document=document), ".json" if document else ".log") == expected


# --- workers told apart only by the envelope -------------------------------------------------------------

# where each platform names the sender: a systemd unit (or a syslog tag) with its pid, a pod, a Cloud Run instance,
# a container, an ECS task's log stream
SENDER_FIELDS = {"journald": "unit", "syslog": "unit", "rfc5424": "unit", "loki": "container",
                 "cloud-logging": "container", "docker-json": "container", "cloudwatch": "container"}


def _pop(record: dict, aliases: set):
    key = next((k for k in record if k.lower() in aliases), None)
    return record.pop(key) if key else None


def told_by_envelope(files: list[Path], folder: Path, name: str) -> list[Path]:
    """Each worker file as the platform `name` delivers it with the worker (and, for a unit, its pid) taken out of
    every record and named by the envelope instead."""
    field, wrapped = SENDER_FIELDS[name], []
    for path in files:
        records = [json.loads(line) for line in path.read_text(encoding="utf-8").splitlines() if line.strip()]
        workers = {str(w) for w in (_pop(r, WORKER_KEYS) for r in records) if w is not None}
        [worker] = workers  # the simulator writes one file per worker
        senders, pid, pids = [], "1", {}
        for record in records:
            if field == "unit":  # a unit's processes are its incarnations, each a pid (digits, as syslog writes)
                incarnation = _pop(record, INCARNATION_KEYS)
                pid = pids.setdefault(incarnation, str(4100 + len(pids))) if incarnation is not None else pid
                senders.append({"unit": worker, "pid": pid})
            else:
                senders.append({"container": worker})
        target = folder / f"{path.stem}.{name}.log"
        target.write_text(wrap.wrap(name, [json.dumps(r) for r in records], senders=senders), encoding="utf-8")
        wrapped.append(target)
    return wrapped


WORKER_KEYS = set(ALIASES["worker"])
INCARNATION_KEYS = set(ALIASES["incarnation"])


@pytest.mark.slow
@settings(max_examples=10, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(st.sampled_from(INCIDENT_KINDS), st.sampled_from(sorted(SENDER_FIELDS)), st.integers(0, 10_000))
def test_workers_told_apart_only_by_the_envelope_are_diagnosed_as_when_the_record_names_them(kind, name, seed):
    with tempfile.TemporaryDirectory() as tmp:
        folder = Path(tmp)
        result = simulate(kind, 24, folder / "plain", seed=seed, syntax="jsonl", noise=False)
        files = sorted(result.files)
        (folder / "wrapped").mkdir()
        assert diagnosis(told_by_envelope(files, folder / "wrapped", name)) == diagnosis(files)
