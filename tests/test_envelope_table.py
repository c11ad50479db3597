"""forensics.ingest.envelope_table: each envelope is one row, and everything that tells, takes off, simulates and
documents envelopes reads that row. A row that one of them misses fails here."""

from __future__ import annotations

import re
from pathlib import Path

import pytest

from forensics.ingest import detect, envelope_table, envelopes
from forensics.ingest.readers import unwrap as unwrapper
from forensics.ingest.envelope_table import C_KINDS, TABLE
from forensics.simulate import envelopes as simulated

ROOT = Path(__file__).resolve().parents[1]
LINES = ["ts=2026-11-28T09:00:00Z evt=sent email=a@example.com msg_id=<m1@x> worker=w1",
         "ts=2026-11-28T09:00:01Z evt=sent email=b@example.com msg_id=<m2@x> worker=w2"]
JSON_LINES = ['{"ts": "2026-11-28T09:00:00Z", "evt": "sent", "email": "a@example.com", "msg_id": "<m1@x>"}',
              '{"ts": "2026-11-28T09:00:01Z", "evt": "sent", "email": "b@example.com", "msg_id": "<m2@x>"}']
NAMES = [e.name for e in TABLE]


def _simulated(name: str) -> bytes:
    inner = JSON_LINES if name in simulated.JSON_ONLY or name == "cloudwatch-export" else LINES
    return simulated.wrap(name, inner).encode()


def test_the_table_is_what_the_readers_read():
    assert tuple(envelopes.ENVELOPES) == envelopes.NAMES == tuple(NAMES) and len(set(NAMES)) == len(NAMES)
    assert unwrapper.KINDS == {e.name: e.c_reader for e in TABLE if e.c_reader}
    assert [name for name, _ in detect._TEXT_SHAPES] == [e.name for e in sorted(TABLE, key=lambda e: e.tried)
                                                           if e.line_shape]


def test_each_envelope_is_told_by_its_own_row():
    # a line's shape or a JSON entry's keys, never both and never neither: detection holds no envelope of its own
    assert all((row.line_shape is None) != (row.entry is None) for row in TABLE)
    assert detect._JSON_ROWS == tuple(row for row in TABLE if row.entry)
    assert all(len(row.head_keys) >= 2 for row in detect._JSON_ROWS)


@pytest.mark.parametrize("name", NAMES)
def test_every_envelope_is_simulated_detected_taken_off_and_documented(name):
    row = envelope_table.ENVELOPES[name]
    assert name in simulated.LINE_WRAPPERS
    assert detect.detect_envelope(_simulated(name)).name == name
    assert re.search(rf"^-- name: {row.block}$", (ROOT / "queries" / "envelopes.sql").read_text(), re.M)
    if row.c_reader and unwrapper._unwrap is not None:
        text = _simulated(name)
        rows, flags, *_ = unwrapper._unwrap.unwrap(text, 0, len(text), envelope_table.c_kind(name), 2026, 12)
        assert not flags & unwrapper._unwrap.DEFER and rows == text.count(b"\n")
    documented = re.search(r"^## Envelopes\n(.*?)^## ", (ROOT / "docs" / "log-vocabulary.md").read_text(), re.M | re.S)
    assert re.search(rf"^\| (?:`[a-z0-9-]+`, )*`{re.escape(name)}`[ ,|]", documented.group(1), re.M)


def test_the_simulator_writes_only_the_table_s_envelopes():
    assert set(simulated.LINE_WRAPPERS) == set(NAMES) and set(simulated.DOCUMENTS) <= {
        e.name for e in TABLE if e.items != "$" or e.name == "cloud-logging"}


@pytest.mark.skipif(unwrapper._unwrap is None, reason="the compiled unwrapper was not built")
@pytest.mark.parametrize("kinds", [C_KINDS[:-1], (*C_KINDS, "SYSLOG"), (*C_KINDS[:-1], "FLUENTD")],
                         ids=["a reader left out", "a reader named twice", "a reader it does not have"])
def test_the_unwrapper_refuses_kinds_other_than_its_readers(kinds):
    module = unwrapper._unwrap
    try:
        with pytest.raises(ImportError, match="built with the readers .*rebuild it"):
            module.configure(kinds)
        with pytest.raises(ValueError, match="not configured"):
            module.unwrap(b"", 0, 0, 1, 2026, 12)
    finally:
        module.configure(C_KINDS)


@pytest.mark.skipif(unwrapper._unwrap is None, reason="the compiled unwrapper was not built")
def test_the_kind_numbers_are_the_table_s():
    module, text = unwrapper._unwrap, _simulated("syslog")
    try:
        module.configure(C_KINDS[::-1])  # the numbers are whatever the table says
        syslog = len(C_KINDS) - C_KINDS.index("SYSLOG")
        assert module.unwrap(text, 0, len(text), syslog, 2026, 12)[0] == text.count(b"\n")
    finally:
        module.configure(C_KINDS)
