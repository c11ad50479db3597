"""The docs/ pages that describe contracts stay true to the code, and point nowhere outside the repository."""

from __future__ import annotations

import json
import re
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parent.parent
DOCS = ROOT / "docs"


def _page(name: str) -> str:
    return (DOCS / name).read_text(encoding="utf-8")


def _table_rows(text: str, heading: str) -> list[list[str]]:
    """The cells of the first table after `heading`, header row and separator left out."""
    rows: list[list[str]] = []
    for line in text.split(heading, 1)[1].splitlines():
        if line.startswith("|"):
            rows.append([cell.strip() for cell in line.strip("|").split(" | ")])
        elif rows:
            break
    return rows[2:]


def _names(cell: str) -> list[str]:
    return re.findall(r"`([^`]+)`", cell)


def test_the_field_table_is_the_alias_table():
    from forensics.ingest.fields import ALIASES

    rows = _table_rows(_page("log-vocabulary.md"), "## Fields")
    documented = {_names(row[0])[0]: tuple(_names(row[1])) for row in rows}
    assert documented == ALIASES


def test_the_event_table_is_what_ingest_maps():
    import duckdb

    import queries

    con = duckdb.connect()
    queries.script(con, "ingest_macros")
    rows = _table_rows(_page("log-vocabulary.md"), "## Events")
    assert [_names(row[0])[0] for row in rows] == ["send", "claim", "renew", "release", "expire", "start", "error"]
    for row in rows:
        canonical = _names(row[0])[0]
        for name in _names(row[1]):
            assert con.execute("SELECT mm_event(?)", [f" {name.upper()} "]).fetchone()[0] == canonical, name


def test_the_success_statuses_are_what_ingest_accepts():
    import duckdb

    import queries

    con = duckdb.connect()
    queries.script(con, "ingest_macros")
    line = next(line for line in _page("log-vocabulary.md").splitlines() if "its status is absent or one of" in line)
    for status in _names(line):
        assert con.execute("SELECT mm_ok_status(?)", [status.upper()]).fetchone()[0], status
    for status in ("failed", "error", "rejected", "bounced", "dropped", "timeout", "pending"):
        assert not con.execute("SELECT mm_ok_status(?)", [status]).fetchone()[0], status


def test_every_kind_is_described_with_the_next_command_diagnose_names():
    from forensics.kinds import KINDS, kind_named

    page = _page("incident-kinds.md")
    assert tuple(_names(row[0])[0] for row in _table_rows(page, "## The kinds")) == KINDS
    commands = {_names(row[0])[0]: _names(row[1])[0] for row in _table_rows(page, "## Evidence") if _names(row[0])}
    shown = {"campaign": "CAMPAIGN", "step": "STEP", "test_id": "TEST", "address": "ADDRESS", "logs": "LOGS",
             "logs_options": "--logs LOGS", "exports": "--provider-export EXPORT", "id": "INC-n"}
    assert commands == {kind: kind_named(kind).next_command.format(**shown) for kind in KINDS}


@pytest.fixture(scope="module")
def mixed_document():
    from forensics.findings import build_document
    from forensics.ingest.case import load_case

    return build_document(load_case([str(ROOT / "sample_logs" / "mixed")]))


@pytest.mark.slow
def test_the_json_example_is_real_output(mixed_document):
    page = _page("diagnose-json.md")
    example = json.loads(re.search(r"```json\n(.*?)```", page, re.S).group(1))
    real = json.loads(json.dumps(mixed_document, default=str))
    assert list(example) == list(real)
    assert example["summary"] == real["summary"]
    shown = example["inputs"][0]
    same_file = [i for i in real["inputs"] if i["path"].endswith(shown["path"])]
    assert same_file == [{**shown, "path": same_file[0]["path"]}]
    assert example["incidents"][0] in real["incidents"]
    assert example["affected"][0] in real["affected"]


def test_every_field_of_the_json_is_in_its_table(mixed_document):
    page = _page("diagnose-json.md")
    sections = {"inputs": "## `inputs`", "reading": "## `reading`", "summary": "## `summary`",
                "incidents": "## `incidents`", "affected": "## `affected`"}
    for key, heading in sections.items():
        documented = {name for row in _table_rows(page, heading) for name in _names(row[0])}
        value = mixed_document[key]
        produced = set(value if isinstance(value, dict) else value[0])
        assert produced == documented, key


@pytest.mark.slow
def test_every_field_of_the_window_is_in_its_table():
    from forensics.findings import build_document
    from forensics.ingest.case import load_case
    from forensics.ingest.window import Window, parse_bound

    case = load_case([str(ROOT / "sample_logs" / "mixed")], limits=Window(parse_bound("1h"), None))
    window = build_document(case, include_affected=False)["window"]
    documented = {name for row in _table_rows(_page("diagnose-json.md"), "## `window`") for name in _names(row[0])}
    assert set(window) == documented
    assert window["since_given"] == "1h" and window["records_in_window"] < window["records"]


@pytest.mark.parametrize("page", sorted(p.name for p in DOCS.glob("*.md")) + ["../README.md"])
def test_the_docs_point_nowhere_outside_the_repository(page):
    text = _page(page)
    assert not re.search(r"\]\((\.\./|/|https?:)", text), page
    assert "shared/" not in text, page
    for target in re.findall(r"\]\(([^)#]+)", text):
        assert ((DOCS / page).parent / target).is_file(), (page, target)


def test_every_provider_has_its_marker_fields_documented():
    from forensics.providers.detect import DETECTED

    rows = _table_rows(_page("sentlog.md"), "### Which provider wrote a file")
    named = " ".join(row[0] for row in rows).lower()
    assert all(provider in named for provider in DETECTED) and "`csv`" in named and "`jsonl`" in named


@pytest.fixture(scope="module")
def provider_only_document(tmp_path_factory):
    from forensics.provider_only import diagnose_exports
    from forensics.providers import ExportSpec

    export = tmp_path_factory.mktemp("export") / "sent.csv"
    export.write_text("recipient,msg_id,sent_at,campaign,step\na@b.c,m1,2026-11-28T09:00:00Z,c,1\n"
                      "a@b.c,m2,2026-11-28T09:01:00Z,c,1\n")
    return json.loads(json.dumps(diagnose_exports(ExportSpec((str(export),))), default=str))


def test_every_field_of_the_provider_only_json_is_in_its_table(provider_only_document):
    page = _page("diagnose-json.md")
    section = provider_only_document["provider_only"]
    tables = {"## `provider_only`": section, "`grouping`:": section["grouping"], "`summary`:": section["summary"],
              "A provider duplicate": section["duplicates"][0]}
    for heading, value in tables.items():
        documented = {name for row in _table_rows(page, heading) for name in _names(row[0])}
        assert set(value) == documented, heading
    assert list(provider_only_document) == ["version", "complete", "provider_only"]


@pytest.mark.slow
def test_every_reconciliation_finding_is_in_its_table(tmp_path):
    from forensics.ingest.case import load_case
    from forensics.reconcile import load_provider_sends, reconcile

    log, export = tmp_path / "send.log", tmp_path / "sent.csv"
    log.write_text("ts=2026-11-28T09:00:00Z event=send campaign=c step=1 email=a@b.c msg_id=m1\n")
    export.write_text("recipient,msg_id,campaign,step\na@b.c,m1,c,1\na@b.c,m2,c,1\n")
    con = load_case([str(log)]).con
    load_provider_sends(con, [str(export)])
    found = reconcile(con)
    page = _page("diagnose-json.md")
    assert [_names(row[0])[0] for row in _table_rows(page, "## `reconciliation`")] == list(found)
    duplicate = found["provider_duplicates_missed_by_log"]["sample"][0]
    documented = {name for row in _table_rows(page, "A provider duplicate") for name in _names(row[0])}
    assert set(duplicate) == documented | {"not_in_log"}


def test_the_code_map_names_every_module_of_the_ingest_path_and_every_sql_file():
    """docs/architecture.md is the newcomer's map: a module or SQL file added without a line there is missing from it."""
    text = _page("architecture.md")
    ingest = ROOT / "forensics" / "ingest"
    modules = [p.relative_to(ingest).as_posix() for p in sorted(ingest.rglob("*"))
               if p.suffix in (".py", ".c", ".h") and p.name != "__init__.py"]
    sql = [p.name for p in sorted((ROOT / "queries").glob("*.sql"))]
    missing = [name for name in modules + sql if f"`{name}`" not in text and f"`{Path(name).name}`" not in text]
    assert not missing, f"docs/architecture.md does not name: {missing}"
