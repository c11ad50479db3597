"""forensics.kinds is the one table of incident kinds: the classifier, the CLI, the simulator and the
report all agree with it, and no other module keeps its own list."""

from __future__ import annotations

import ast
import re
import string
from pathlib import Path

import click
import pytest

import queries
from forensics import kinds
from forensics.kinds import KINDS, TABLE, command_values, kind_named

REPO = Path(__file__).resolve().parent.parent
SAMPLE_MIXED = REPO / "sample_logs" / "mixed"


INCIDENT = {"id": "INC-1", "campaign": "c", "step": "1", "test_id": "t", "first_recipient": "a@b.co"}


def _placeholders(template: str) -> set[str]:
    return {field for _, field, _, _ in string.Formatter().parse(template) if field}


def test_names_are_unique_and_in_table_order():
    assert len(set(KINDS)) == len(KINDS) == len(TABLE)
    assert [kind_named(name) for name in KINDS] == list(TABLE)


def test_every_kind_the_classifier_can_emit_is_in_the_table():
    sql = queries.get("classify_people").sql
    emitted = set(re.findall(r"\b(?:THEN|ELSE)\s+'([a-z][a-z-]*)'", sql))
    assert emitted == set(KINDS)


@pytest.mark.parametrize("kind", TABLE, ids=lambda k: k.name)
def test_every_entry_has_fix_next_command_sentence_and_evidence(kind):
    assert kind.fix.strip() and kind.sentence.strip()
    assert kind.next_command.startswith("mailmortem ")
    assert _placeholders(kind.next_command) <= set(command_values(INCIDENT))
    assert _placeholders(kind.sentence) <= {"who", "what", "shards", "test"}
    assert callable(kind.evidence)


def test_an_unknown_kind_is_refused():
    with pytest.raises(KeyError):
        kind_named("mixed")


def test_cli_kind_choices_equal_the_table():
    from mailmortem.cli.affected import affected
    from mailmortem.cli.simulate import simulate

    def choices(command) -> tuple:
        option = next(p for p in command.params if p.name == "kind")
        assert isinstance(option.type, click.Choice)
        return tuple(option.type.choices)

    assert choices(affected) == KINDS
    assert choices(simulate) == (*KINDS, "mixed")


def test_the_simulator_plays_every_kind():
    from forensics.simulate.run import KINDS as SCENARIOS
    from forensics.simulate.scenarios import INCIDENTS

    assert SCENARIOS == (*KINDS, "mixed")
    # ab-contamination is played on top of one of the others (the variant re-drawn on a re-send).
    assert set(INCIDENTS) | {"ab-contamination"} == set(KINDS)


@pytest.mark.slow
def test_summary_counts_every_kind_in_table_order():
    from forensics.classify import classify, summary
    from forensics.ingest.case import load_case

    case = load_case([str(SAMPLE_MIXED)])
    classify(case.con)
    assert tuple(summary(case.con)["by_kind"]) == KINDS


@pytest.mark.slow
def test_every_kind_yields_evidence_a_command_and_a_sentence_on_the_mixed_sample():
    from forensics.findings import build_document
    from forensics.ingest.case import load_case
    from forensics.report.model import incident_sentence

    incidents = build_document(load_case([str(SAMPLE_MIXED)]), include_affected=False)["incidents"]
    assert {i["kind"] for i in incidents} == set(KINDS)
    for incident in incidents:
        kind = kind_named(incident["kind"])
        assert incident["evidence"] and all(line.strip() for line in incident["evidence"])
        assert incident["remediation"][0] == kind.fix
        assert incident["remediation"][1].split()[:2] == kind.next_command.split()[:2]
        assert "{" not in incident["remediation"][1]
        assert incident_sentence(incident).endswith("%.")


def _kind_lists(tree: ast.AST):
    """Literal tuples, lists, sets and dicts whose string items name every kind."""
    for node in ast.walk(tree):
        items = node.keys if isinstance(node, ast.Dict) else getattr(node, "elts", None)
        if isinstance(node, (ast.Tuple, ast.List, ast.Set, ast.Dict)) and items:
            names = {i.value for i in items if isinstance(i, ast.Constant) and isinstance(i.value, str)}
            if set(KINDS) <= names:
                yield node.lineno


@pytest.mark.slow
def test_no_other_module_keeps_its_own_list_of_kinds():
    own = Path(kinds.__file__).resolve()
    copies = [f"{path.relative_to(REPO)}:{line}"
              for folder in ("forensics", "mailmortem", "remediation", "queries", "benchmarks")
              for path in sorted((REPO / folder).rglob("*.py")) if path.resolve() != own
              for line in _kind_lists(ast.parse(path.read_text(encoding="utf-8")))]
    copies += [f"tests/accuracy.py:{line}"
               for line in _kind_lists(ast.parse((REPO / "tests" / "accuracy.py").read_text(encoding="utf-8")))]
    assert not copies
