"""Incidents are one per kind, campaign and step with figures per worker, and their next steps are complete
commands that stay safe when pasted into a shell."""

from __future__ import annotations

import json
import shlex
import subprocess

import pytest

from forensics.findings import build_document
from forensics.ingest.case import load_case

HOSTILE = "t$(touch PWNED)"


@pytest.mark.slow
def test_one_incident_per_kind_campaign_and_step_with_figures_per_worker():
    document = build_document(load_case(["sample_logs/parallel-worker"]), include_affected=False)
    keys = [(i["kind"], i["campaign"], i["step"], i["test_id"]) for i in document["incidents"]]
    assert len(keys) == len(set(keys)) == 1
    incident = document["incidents"][0]
    reached = {w["worker"]: w["reached"] for w in incident["per_worker"]}
    assert reached == {"sender-1": 336, "sender-2": 297, "sender-3": 165}
    assert "sender-1 336 (100%), sender-2 297 (88%), sender-3 165 (49%)" in incident["evidence"][0]
    assert incident["people"] == document["summary"]["duplicated_people"]


def _hostile_case(tmp_path):
    lines = [f'ts=2026-11-28T09:1{n}:00Z evt=sent worker=w1 campaign="{HOSTILE}" step=1 recipient=a@x.co '
             f'msg_id=m{n} test_id="{HOSTILE}" variant={v}' for n, v in enumerate("AB")]
    path = tmp_path / "odd name's log.log"
    path.write_text("\n".join(lines) + "\n", encoding="utf-8")
    return path


@pytest.mark.slow
def test_next_steps_are_complete_and_quoted(cli, tmp_path):
    path = _hostile_case(tmp_path)
    document = json.loads(cli("diagnose", path, "--format", "json").stdout)
    commands = [c for i in document["incidents"] for c in i["remediation"][1:]]
    assert commands and not [c for c in commands if "<" in c.replace("< ", "")]
    for command in commands:
        words = shlex.split(command.split(" > ")[0])
        assert words[0] == "mailmortem" and str(path) in words
        if "--test-id" in words:
            assert words[words.index("--test-id") + 1] == HOSTILE
        # pasted into a shell, nothing in it runs: echo the words instead of running mailmortem
        pasted = "printf '%s\\n' " + command.split(" > ")[0].removeprefix("mailmortem ")
        echoed = subprocess.run(["bash", "-c", pasted], cwd=tmp_path, capture_output=True, text=True).stdout
        assert echoed.splitlines() == words[1:]
    assert not (tmp_path / "PWNED").exists()


@pytest.mark.slow
def test_table_view_prints_the_same_commands(cli, tmp_path):
    path = _hostile_case(tmp_path)
    shown = [line.strip()[len("next: "):] for line in cli("diagnose", path).stdout.splitlines()
             if line.strip().startswith("next: ")]
    document = json.loads(cli("diagnose", path, "--format", "json").stdout)
    assert shown == [c for i in document["incidents"] for c in i["remediation"][1:]]
