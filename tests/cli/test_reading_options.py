"""One reading, carried everywhere (issue 39 items 5 and 6): every command that reads logs takes the same reading
options, a mailmortem.toml in the working directory is read and said, the next steps a run prints repeat how it
read the logs and run as printed, lists are written with -o (the old file kept when the command fails), and a
provider export among the LOGS is read as the provider's history."""

from __future__ import annotations

import csv
import io
import json
import shlex

import click
import pytest

from mailmortem.cli import COMMANDS, main
from mailmortem.cli.reading import CASE_FLAGS, READING_FLAGS


def _line(minute: int, worker: str, campaign: str, to: str, mid: str, cand: str, extra: str = "") -> str:
    return (f"ts=2026-11-28T09:{minute:02d}:00Z evt=sent worker={worker} campaign={campaign} step=1 To={to} "
            f"mid=<{mid}@app> lead={cand}{extra}\n")


# The team's own names: `To` and `mid` (mapped by a config), `exp` for the A/B test (mapped by --field).
# c1: ann and bob each sent by two workers (parallel-worker); c2 (test t1): cy got both variants.
CASE = (_line(1, "w1", "c1", "ann@x.co", "a1", "cand-ann") + _line(2, "w2", "c1", "ann@x.co", "a2", "cand-ann")
        + _line(3, "w1", "c1", "bob@x.co", "b1", "cand-bob") + _line(4, "w2", "c1", "bob@x.co", "b2", "cand-bob")
        + _line(5, "w1", "c1", "dee@x.co", "d1", "cand-dee")
        + _line(6, "w1", "c2", "cy@x.co", "c1", "cand-cy", " exp=t1 variant=A")
        + _line(7, "w2", "c2", "cy@x.co", "c2", "cand-cy", " exp=t1 variant=B")
        + _line(8, "w1", "c2", "eve@x.co", "e1", "cand-eve", " exp=t1 variant=A"))
CONFIG = '[fields]\nrecipient = "To"\nmsg_id = "mid"\n'


@pytest.fixture()
def case(tmp_path, monkeypatch):
    """The mapped case in tmp_path/logs, its config in tmp_path/conf; the working directory is tmp_path."""
    (tmp_path / "logs").mkdir()
    (tmp_path / "logs" / "mail send.log").write_text(CASE, encoding="utf-8")
    (tmp_path / "conf").mkdir()
    (tmp_path / "conf" / "team $(x).toml").write_text(CONFIG, encoding="utf-8")
    monkeypatch.chdir(tmp_path)
    return tmp_path


def _csv(path) -> list[dict]:
    return list(csv.DictReader(io.StringIO(path.read_text(encoding="utf-8"))))


@pytest.mark.slow
def test_a_mapped_cases_next_steps_run_as_printed_and_write_their_lists(cli, case):
    log = case / "logs" / "mail send.log"  # the team's own event wording, read only when --event maps it
    log.write_text(log.read_text(encoding="utf-8").replace("evt=sent", 'evt="mail out"'), encoding="utf-8")
    given = ["logs", "--config", "conf/team $(x).toml", "--field", "test_id=exp", "--event", "send=mail out",
             "--no-infer", "--since", "2026-11-28T09:00Z"]
    document = json.loads(cli("diagnose", *given, "--format", "json").stdout)
    assert {i["kind"]: i["people"] for i in document["incidents"]} == {"parallel-worker": 2, "ab-contamination": 1}
    commands = [c for i in document["incidents"] for c in i["remediation"][1:]] + document.get("next", [])
    runnable = [shlex.split(c) for c in commands if shlex.split(c)[1] in ("affected", "ab-contamination")]
    for words in runnable:
        assert words[0] == "mailmortem" and ">" not in words
        assert "send=mail out" in words and "--no-infer" in words
        result = cli(*words[1:])
        assert result.exit_code == 0, (words, result.stderr)
    assert len(runnable) == 4  # each incident's list, the ab exclusions, the whole case's list
    by_id = {i["kind"]: i["id"] for i in document["incidents"]}
    parallel = _csv(case / f"apology-exclusions-{by_id['parallel-worker']}.csv")
    assert {(r["recipient"], r["candidate"]) for r in parallel} == {("ann@x.co", "cand-ann"), ("bob@x.co", "cand-bob")}
    assert [r["recipient"] for r in _csv(case / f"apology-exclusions-{by_id['ab-contamination']}.csv")] == ["cy@x.co"]
    assert {r["recipient"] for r in _csv(case / "apology-exclusions.csv")} == {"ann@x.co", "bob@x.co", "cy@x.co"}
    assert "cy@x.co" in (case / f"ab-exclusions-{by_id['ab-contamination']}.csv").read_text(encoding="utf-8")


@pytest.mark.slow
def test_a_list_written_with_o_keeps_the_old_file_when_the_command_fails(cli, case):
    target = case / "apology-exclusions.csv"
    target.write_text("the list from yesterday\n", encoding="utf-8")
    failed = cli("affected", "logs", "--config", "conf/team $(x).toml", "--incident", "INC-9", "--format", "csv",
                 "-o", target)
    assert failed.exit_code == 1 and "no incident INC-9" in failed.stderr
    assert target.read_text(encoding="utf-8") == "the list from yesterday\n"
    assert sorted(p.name for p in case.iterdir()) == ["apology-exclusions.csv", "conf", "logs"]  # no temp left
    done = cli("affected", "logs", "--config", "conf/team $(x).toml", "--format", "csv", "-o", target)
    assert done.exit_code == 0 and done.stdout == ""
    assert {r["recipient"] for r in _csv(target)} == {"ann@x.co", "bob@x.co", "cy@x.co"}


@pytest.mark.slow
def test_mailmortem_toml_in_the_working_directory_is_read_and_said(cli, case):
    (case / "mailmortem.toml").write_text(CONFIG, encoding="utf-8")
    shown = cli("diagnose", "logs")
    assert shown.exit_code == 0, shown.stderr
    assert ("Fields mapped by mailmortem.toml (found in the working directory; --no-config ignores it): "
            "recipient ← To, msg_id ← mid") in shown.stdout
    assert "duplicated people 3" in shown.stdout
    document = json.loads(cli("diagnose", "logs", "--format", "json").stdout)
    assert document["reading"]["config"] == {"path": "mailmortem.toml", "found_in_working_directory": True,
                                             "fields": {"recipient": "To", "msg_id": "mid"}, "events": {}}
    assert "--config" not in " ".join(document["next"])  # found again where the next step runs
    ignored = cli("diagnose", "logs", "--no-config", "--format", "json")
    assert "Fields mapped" not in ignored.stderr and '"config": null' in ignored.stdout
    (case / "mailmortem.toml").write_text("[fields\n", encoding="utf-8")
    broken = cli("affected", "logs")
    assert broken.exit_code == 1 and broken.stderr.startswith("Error: config file mailmortem.toml is not valid TOML")


POSTMARK = {"TotalCount": 3, "Messages": [
    {"MessageID": f"{mid}", "Status": "Sent", "ReceivedAt": f"2026-11-28T09:{minute}:00Z", "Recipients": [to],
     "Metadata": {"campaign": "c-3", "step": "1"}}
    for mid, minute, to in (("m-1", "01", "hal@x.co"), ("m-2", "02", "ida@x.co"), ("m-3", "30", "hal@x.co"))]}


@pytest.mark.slow
def test_a_provider_export_among_the_logs_is_read_as_the_providers_history(cli, tmp_path):
    (tmp_path / "app.log").write_text("".join(
        f"ts=2026-11-28T09:{m}:00Z event=send worker=w1 campaign=c-3 step=1 email={to} msg_id={mid}\n"
        for mid, m, to in (("m-1", "01", "hal@x.co"), ("m-2", "02", "ida@x.co"))), encoding="utf-8")
    (tmp_path / "postmark-outbound.json").write_text(json.dumps(POSTMARK, indent=1), encoding="utf-8")
    shown = cli("diagnose", tmp_path)
    assert shown.exit_code == 0, shown.stderr
    assert shown.stdout.startswith("PROVIDER-CONFIRMED DUPLICATES: the provider sent 1 person")
    assert f"Read as the provider's send history, not as logs: {tmp_path}/postmark-outbound.json (postmark)" \
        in shown.stdout
    document = json.loads(cli("diagnose", tmp_path, "--format", "json").stdout)
    assert document["reading"]["provider_exports"] == [{"path": f"{tmp_path}/postmark-outbound.json",
                                                        "provider": "postmark"}]
    assert [i["path"] for i in document["inputs"]] == [f"{tmp_path}/app.log"]
    assert document["reconciliation"]["provider_duplicates_missed_by_log"]["count"] == 1


def _commands():
    ctx = click.Context(main)
    for name in sorted(COMMANDS):
        command = main.get_command(ctx, name)
        for sub in command.list_commands(ctx) if isinstance(command, click.Group) else [None]:
            yield (f"{name} {sub}" if sub else name), (command.get_command(ctx, sub) if sub else command)


def _reads_logs(command) -> str | None:
    """"LOGS" for a command taking LOGS, "--logs" for one reading logs by an option, None for the others."""
    names = {p.name for p in command.params}
    return "LOGS" if "paths" in names else "--logs" if "logs" in names else None


def test_every_command_that_reads_logs_takes_every_reading_option_from_one_decorator():
    # `fields` samples the keys of LOGS and takes only the options that decide how keys are read
    reading = {name: command for name, command in _commands() if _reads_logs(command) and name != "fields"}
    assert {"diagnose", "affected", "report", "ab-contamination", "requeue-stale"} <= set(reading)
    helps = {}
    for name, command in reading.items():
        flags = {opt: param for param in command.params for opt in param.opts}
        wanted = READING_FLAGS + (CASE_FLAGS if _reads_logs(command) == "LOGS" else ())
        if name == "watch":  # its --since says which lines already written count; a watch has no end time
            wanted = tuple(flag for flag in wanted if flag not in ("--since", "--until"))
        assert set(wanted) <= set(flags), f"{name} lacks {sorted(set(wanted) - set(flags))}"
        for flag in wanted:  # declared once: the same help on every command
            assert helps.setdefault(flag, flags[flag].help) == flags[flag].help, (name, flag)


def test_fields_takes_every_option_that_decides_how_keys_are_read():
    fields = dict(_commands())["fields"]
    flags = {opt for param in fields.params for opt in param.opts}
    assert {"--syntax", "--field", "--event", "--config", "--no-config", "--no-infer", "--envelope"} <= flags
