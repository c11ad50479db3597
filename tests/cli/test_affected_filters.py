"""`affected` never answers an empty apology list for a filter that names nothing in the logs."""

from __future__ import annotations

import csv
import io

import pytest

CASE = "sample_logs/parallel-worker"


@pytest.mark.slow
@pytest.mark.parametrize("args,named", [
    (("--incident", "INC-9"), "incidents: INC-1)"),
    (("--kind", "retry"), "kinds found: parallel-worker"),
    (("--campaign", "spring-launch"), "cto-outreach"),
])
def test_unmatched_filter_is_an_error_naming_what_exists(cli, args, named):
    result = cli("affected", CASE, *args, "--format", "csv")
    assert result.exit_code == 1 and result.stdout == ""
    assert result.stderr.startswith("Error: ") and named in result.stderr and result.stderr.count("\n") == 1


@pytest.mark.slow
def test_matching_filters_still_list_people(cli):
    rows = list(csv.DictReader(io.StringIO(cli("affected", CASE, "--incident", "INC-1", "--format", "csv").stdout)))
    assert rows and {r["incident"] for r in rows} == {"INC-1"}
    by_campaign = cli("affected", CASE, "--campaign", "cto-outreach", "--format", "csv")
    assert by_campaign.exit_code == 0 and "cto-outreach" in by_campaign.stdout


MIXED = "sample_logs/mixed"


@pytest.mark.slow
def test_each_filter_keeps_exactly_the_rows_it_names(cli):
    every = list(csv.DictReader(io.StringIO(cli("affected", MIXED, "--format", "csv").stdout)))
    last = every[-1]
    for option, column in (("--kind", "kind"), ("--incident", "incident"), ("--campaign", "campaign")):
        result = cli("affected", MIXED, option, last[column], "--format", "csv")
        assert list(csv.DictReader(io.StringIO(result.stdout))) == [r for r in every if r[column] == last[column]]


@pytest.mark.slow
def test_the_table_shows_a_capped_list_and_counts_the_rest(cli, monkeypatch):
    from mailmortem.cli import affected

    people = len(cli("affected", MIXED, "--format", "jsonl").stdout.splitlines())
    monkeypatch.setattr(affected, "TABLE_PEOPLE", 7)
    lines = cli("affected", MIXED).stdout.splitlines()
    assert f"{people} people affected (the first 7; all with --format csv)" in " ".join(lines)
    assert sum("@" in line for line in lines) == 7
