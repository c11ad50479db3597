"""Logs written in the conventions of common logging stacks (tests/fixtures/stacks/README.md): each is
diagnosed exactly with no flags, or refused; none is answered "No duplicates"."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

STACKS = Path(__file__).parent / "fixtures" / "stacks"
REFUSED = {"lograge": "recognised no send", "opentelemetry": "no mail-send records found"}
DUPLICATED = 3  # tests/fixtures/stacks/make_stacks.py


@pytest.mark.slow
@pytest.mark.parametrize("stack", sorted(p.stem for p in STACKS.glob("*.jsonl")))
def test_a_stacks_log_is_diagnosed_exactly_or_refused(cli, stack):
    result = cli("diagnose", STACKS / f"{stack}.jsonl", "--format", "json")
    if stack in REFUSED:
        assert result.exit_code == 1 and REFUSED[stack] in result.stderr
        assert "No duplicates" not in result.output
        return
    assert result.exit_code == 0, result.stderr
    document = json.loads(result.stdout)
    assert document["complete"] is True and document["summary"]["duplicated_people"] == DUPLICATED
    assert document["summary"]["sends"] == 15 and document["summary"]["by_kind"]["parallel-worker"] == DUPLICATED


def test_there_are_at_least_ten_stacks():
    assert len(list(STACKS.glob("*.jsonl"))) >= 11
