"""A run that lost evidence says so first, in the headline and the JSON, and never exits as if all-clear."""

from __future__ import annotations

import json

import pytest

SEND = "2026-11-28T09:1{n}:00.000Z evt=sent worker=w{w} campaign=c-1 step=1 recipient={who} msg_id=m{n}{w}"
NOISE = ["", '10.0.0.1 - - [28/Nov/2026:08:49:33 +0000] "GET /healthz HTTP/1.1" 200 2 "-" "kube-probe/1.29"',
         "Traceback (most recent call last):", '  File "/app/sender.py", line 214, in deliver',
         "TimeoutError: timeout waiting for ack"]
BROKEN_SEND = '{"ts": "2026-11-28T09:19:00Z", "action": "sent", "to": "bob@acme.com'  # cut mid-record


def _log(tmp_path, lines):
    path = tmp_path / "mail-send.log"
    path.write_text("\n".join(lines) + "\n", encoding="utf-8")
    return path


def _sends(duplicated: bool):
    people = ["ann@acme.com", "ann@acme.com" if duplicated else "cy@acme.com"]
    return [SEND.format(n=n, w=n, who=who) for n, who in enumerate(people)]


@pytest.mark.slow
@pytest.mark.parametrize("duplicated,code", [(False, 0), (True, 3)])
def test_noise_loses_nothing(cli, tmp_path, duplicated, code):
    path = _log(tmp_path, _sends(duplicated)[:1] + NOISE + _sends(duplicated)[1:])
    doc = json.loads(cli("diagnose", path, "--format", "json").stdout)
    assert doc["complete"] is True and doc["lost_evidence"]["lines"] == 0
    assert cli("diagnose", path, "--fail-on-duplicates").exit_code == code


@pytest.mark.slow
@pytest.mark.parametrize("duplicated", [False, True])
def test_a_skipped_send_line_makes_the_run_incomplete(cli, tmp_path, duplicated):
    path = _log(tmp_path, _sends(duplicated) + [BROKEN_SEND] + NOISE)
    doc = json.loads(cli("diagnose", path, "--format", "json").stdout)
    assert doc["complete"] is False
    assert doc["lost_evidence"]["by_file"] == [{"path": str(path), "lines": 1, "first_lines": [3]}]
    table = cli("diagnose", path)
    assert table.stdout.startswith("INCOMPLETE: 1 skipped line(s) look like mail-send records")
    assert f"{path}:3" in table.stdout.splitlines()[0]
    assert "No duplicates: every person" not in table.stdout
    assert cli("diagnose", path, "--fail-on-duplicates").exit_code == 4  # wins over 3


def test_a_line_naming_an_address_is_evidence(cli, tmp_path):
    path = _log(tmp_path, _sends(False) + ["garbled: delivered to dee@acme.com?"])
    doc = json.loads(cli("diagnose", path, "--format", "json").stdout)
    assert doc["complete"] is False and doc["lost_evidence"]["lines"] == 1
