"""Property tests: any line in, a record or a counted skip out, never a crash."""

from __future__ import annotations

import tempfile
from pathlib import Path

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from forensics.ingest.case import load_case

pytestmark = pytest.mark.slow  # hypothesis: hundreds of generated logs through DuckDB

GOOD = b"ts=2026-11-28T09:00:00Z event=send worker=w1 email=a@b.co msg_id=<anchor@x>\n"

# A lone CR counts as a line break for DuckDB (as for most viewers); lines here have none.
no_nul_bytes = st.binary(max_size=400).map(lambda b: b.replace(b"\x00", b"").replace(b"\n", b" ").replace(b"\r", b" "))
unicode_line = st.text(st.characters(blacklist_characters="\x00\n\r", blacklist_categories=("Cs",)), max_size=300)
logfmt_like = st.lists(
    st.tuples(st.sampled_from(["ts", "event", "email", "msg_id", "worker", "lease", "attempt", "x", "=", '"']),
              st.text(st.characters(blacklist_characters="\x00\n\r", blacklist_categories=("Cs",)), max_size=30)),
    max_size=8,
).map(lambda kv: " ".join(f"{k}={v}" for k, v in kv))
json_like = st.recursive(st.none() | st.booleans() | st.integers() | st.text(max_size=20),
                         lambda inner: st.dictionaries(st.sampled_from(["ts", "to", "mail", "event", "msg_id"]), inner, max_size=4)
                         | st.lists(inner, max_size=3), max_leaves=10)

SETTINGS = settings(max_examples=40, deadline=None, suppress_health_check=[HealthCheck.too_slow])


def _check(lines: list[bytes], suffix: str = ".log", truncate: bool = False) -> None:
    with tempfile.TemporaryDirectory() as tmp:
        path = Path(tmp) / f"case{suffix}"
        body = GOOD + b"".join(line + b"\n" for line in lines)
        path.write_bytes(body[:-1] if truncate and lines else body)
        case = load_case([str(path)])
        [summary] = case.inputs
        assert summary.records + summary.skipped == summary.lines
        # DuckDB's reader does not count blank lines at the very end of a file.
        assert len(lines) + 1 - _trailing_blank(lines) <= summary.lines <= len(lines) + 1
        assert case.con.execute("SELECT count(*) FROM events WHERE msg_id = 'anchor@x'").fetchone()[0] == 1


def _trailing_blank(lines: list[bytes]) -> int:
    count = 0
    for line in reversed(lines):
        if line.strip(b" \t\r\x0b\x0c"):
            break
        count += 1
    return count


@SETTINGS
@given(st.lists(no_nul_bytes, max_size=5), st.booleans())
def test_any_bytes_become_records_or_counted_skips(lines, truncate):
    _check(lines, truncate=truncate)


@SETTINGS
@given(st.lists(unicode_line | logfmt_like, max_size=6))
def test_any_unicode_line_is_handled(lines):
    _check([line.encode("utf-8") for line in lines])


@SETTINGS
@given(st.lists(json_like.map(lambda v: __import__("json").dumps(v)), max_size=5))
def test_json_values_of_any_shape(lines):
    good = b'{"ts": "2026-11-28T09:00:00Z", "event": "send", "email": "a@b.co", "msg_id": "<anchor@x>"}'
    with tempfile.TemporaryDirectory() as tmp:
        path = Path(tmp) / "case.jsonl"
        path.write_bytes(good + b"\n" + b"".join(l.encode() + b"\n" for l in lines))
        [summary] = load_case([str(path)]).inputs
        assert summary.records + summary.skipped == summary.lines
        assert summary.lines == len(lines) + 1 - _trailing_blank([l.encode() for l in lines])


def test_a_huge_line_is_handled():
    _check([b"event=send msg_id=" + b"x" * 2_000_000, b"a" * 5_000_000])


# --- logfmt round trip: what a well-formed line says is what is read ------------------------------------------

_value_text = st.text(st.characters(blacklist_categories=("Cs", "Cc")), min_size=1, max_size=16).filter(
    lambda v: v.strip() == v)
# a quoted value that itself looks like more pairs, e.g. error="retry lead=x worker=w9"
_pairs_inside = st.lists(st.tuples(st.sampled_from(["lead", "worker", "campaign", "step", "shard", "error", "x"]),
                                   st.text(st.characters(whitelist_categories=("L", "N")), max_size=6)),
                         min_size=1, max_size=3).map(lambda kv: " ".join(f"{k}={v}" for k, v in kv))
_value = _value_text | _pairs_inside | _pairs_inside.map(lambda s: f'say "{s}" now')
# canonical field -> the key written for it
_ROUND_TRIP_KEYS = {"worker": "worker", "campaign": "campaign", "step": "step", "shard": "shard",
                    "candidate": "lead", "error": "error", "status": "status"}


def _logfmt_value(value: str) -> str:
    if value and not any(c.isspace() or c in '"\\=' for c in value):
        return value
    return '"' + value.replace("\\", "\\\\").replace('"', '\\"') + '"'


def _read_back(name: str, text: str, fields, field_map=None) -> list[dict]:
    """The canonical `fields` of every record of a file `name` holding `text`, in line order."""
    with tempfile.TemporaryDirectory() as tmp:
        path = Path(tmp) / name
        path.write_text(text, encoding="utf-8")
        case = load_case([str(path)], field_map=field_map)
        rows = case.con.execute(f"SELECT {', '.join(fields)} FROM events ORDER BY line_no").fetchall()
    return [dict(zip(fields, row)) for row in rows]


@SETTINGS
@given(st.lists(st.fixed_dictionaries({}, optional={canon: _value for canon in _ROUND_TRIP_KEYS}),
                min_size=1, max_size=4), st.randoms(use_true_random=False))
def test_logfmt_fields_read_back_as_written(records, rnd):
    lines = []
    for n, record in enumerate(records):
        pairs = [f"{_ROUND_TRIP_KEYS[canon]}={_logfmt_value(v)}" for canon, v in record.items()]
        rnd.shuffle(pairs)
        lines.append(" ".join([f"ts=2026-11-28T09:00:0{n}Z event=send msg_id=<m{n}@x>", *pairs]))
    read = _read_back("case.log", "\n".join(lines) + "\n", _ROUND_TRIP_KEYS)
    assert read == [{canon: record.get(canon) for canon in _ROUND_TRIP_KEYS} for record in records]


# --- JSON Lines round trip: any string value (quotes, backslashes, unicode, `k=v` text) is read back as written --

_json_value = _value_text | _pairs_inside | st.integers(-10**6, 10**6)
_JSON_KEYS = {"worker": "agent", "campaign": "campaign_id", "step": "touch", "shard": "batch",
              "candidate": "lead_id", "error": "err", "status": "outcome"}


@SETTINGS
@given(st.lists(st.fixed_dictionaries({}, optional={canon: _json_value for canon in _JSON_KEYS}),
                min_size=1, max_size=4), st.booleans())
def test_json_fields_read_back_as_written(records, nested):
    import json

    lines = []
    for n, record in enumerate(records):
        fields = {_JSON_KEYS[canon]: v for canon, v in record.items()}
        base = {"ts": f"2026-11-28T09:00:0{n}Z", "event": "send", "msg_id": f"<m{n}@x>"}
        lines.append(json.dumps({**base, "meta": fields} if nested else {**base, **fields}))
    # nested: the fields sit under "meta" and are named by --field canonical=meta.key
    mapping = {canon: f"meta.{key}" for canon, key in _JSON_KEYS.items()} if nested else None
    read = _read_back("case.jsonl", "\n".join(lines) + "\n", _JSON_KEYS, mapping)
    assert read == [{canon: str(record[canon]) if canon in record else None for canon in _JSON_KEYS}
                    for record in records]


# --- CSV round trip: cells with commas, quotes and `k=v` text are read back as written, in any column order ---

_CSV_KEYS = {"worker": "worker_id", "campaign": "campaign", "step": "step", "shard": "shard_id",
             "candidate": "candidate_id", "error": "error", "status": "result"}


@SETTINGS
@given(st.lists(st.fixed_dictionaries({canon: _value_text | _pairs_inside | st.just("") for canon in _CSV_KEYS}),
                min_size=1, max_size=4), st.permutations(list(_CSV_KEYS)))
def test_csv_cells_read_back_as_written(records, order):
    import csv
    import io

    out = io.StringIO()
    writer = csv.writer(out, lineterminator="\n")
    writer.writerow(["timestamp", "event", "message_id", *(_CSV_KEYS[canon] for canon in order)])
    for n, record in enumerate(records):
        writer.writerow([f"2026-11-28T09:00:0{n}Z", "send", f"<m{n}@x>", *(record[canon] for canon in order)])
    # an empty cell is an absent field (docs/log-vocabulary.md)
    assert _read_back("case.csv", out.getvalue(), _CSV_KEYS) == [
        {canon: record[canon] or None for canon in _CSV_KEYS} for record in records]
