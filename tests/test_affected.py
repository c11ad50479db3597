"""The affected list streamed in batches: a person whose sends straddle two batches is still one row."""

from __future__ import annotations

import pytest

from pathlib import Path

from forensics import affected, classify
from forensics.ingest.case import load_case

MIXED = Path(__file__).resolve().parents[1] / "sample_logs" / "mixed"


def _rows(monkeypatch, batch_rows: int) -> list[dict]:
    monkeypatch.setattr(affected, "BATCH_ROWS", batch_rows)
    case = load_case([str(MIXED)])
    classify.classify(case.con)
    return [row for frame in affected.frames(case.con) for row in frame.to_dicts()]


@pytest.mark.slow
def test_batches_cut_inside_a_persons_sends_give_the_same_people(monkeypatch):
    whole = _rows(monkeypatch, affected.BATCH_ROWS)
    assert len(whole) > 100 and all(len(row["sends"]) >= 2 for row in whole)
    for small in (1, 2, 3, 7):  # every person's sends cut across batches somewhere
        assert _rows(monkeypatch, small) == whole
