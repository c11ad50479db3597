"""Every command that reads provider exports reads them the same way (issue 13 item 6).

The same --provider/--map/--*-key/--year/--tz options, passed through to the reader; a refusal says what
to pass, in options the refusing command accepts; next steps read the export as this run did.
"""

from __future__ import annotations

import json
import shlex

import click
import pytest

READING = ("--provider", "--map", "--campaign-key", "--step-key", "--candidate-key", "--year", "--tz")


def _commands():
    from mailmortem.cli import COMMANDS, main

    ctx = click.Context(main)
    for name in COMMANDS:
        command = main.get_command(ctx, name)
        for sub in (command.commands.values() if isinstance(command, click.Group) else [command]):
            yield sub.name, sub


def _options(command) -> dict:
    return {opt: param for param in command.params for opt in param.opts}


def test_every_command_that_reads_exports_takes_the_same_reading_options():
    readers = {name: _options(cmd) for name, cmd in _commands() if "--provider-export" in _options(cmd)}
    assert set(readers) == {"affected", "backfill-sentlog", "diagnose", "report"}
    reference = readers["backfill-sentlog"]
    for name, options in readers.items():
        for flag in READING:
            assert flag in options, f"{name} lacks {flag}"
            mine, theirs = options[flag], reference[flag]
            assert (mine.help, mine.multiple, str(mine.type)) == (theirs.help, theirs.multiple, str(theirs.type)), flag
            assert getattr(mine.type, "choices", None) == getattr(theirs.type, "choices", None)


N = 40  # sends in the log and in the export, one for one


def _log_and_export(tmp_path, header: str):
    log, export = tmp_path / "send.log", tmp_path / "export.csv"
    log.write_text("".join(
        f"ts=2026-11-28T09:{i:02d}:00Z event=send worker=w1 campaign=c-1 step=1 email=p{i}@example.com "
        f"msg_id=<{i:04d}.x9.{i}@app.example>\n" for i in range(N)))
    export.write_text(header + "\n" + "".join(
        f"p{i}@example.com,<{i:04d}.x9.{i}@app.example>,2026-11-28T09:{i:02d}:00Z,c-1,1\n" for i in range(N)))
    return log, export


def _reconciled(result) -> dict:
    assert result.exit_code == 0, result.stderr
    rec = json.loads(result.stdout)["reconciliation"]
    return {name: found["count"] for name, found in rec.items()}


@pytest.mark.slow
def test_a_one_for_one_export_reconciles_with_nothing_missing_and_nothing_extra(cli, tmp_path):
    # Read as SendGrid's activity export, every id was cut at its first '.': N missing + N extra.
    log, export = _log_and_export(tmp_path, "recipient,msg_id,sent_at,campaign,step")
    counts = _reconciled(cli("diagnose", log, "--provider-export", export, "--format", "json"))
    assert counts == {"log_sends_not_at_provider": 0, "provider_sends_not_in_log": 0,
                      "provider_confirmed_duplicates": 0, "provider_duplicates_missed_by_log": 0,
                      "provider_sends_unplaced": 0}


@pytest.mark.slow
@pytest.mark.parametrize("command", ["diagnose", pytest.param("report", marks=pytest.mark.slow), "backfill-sentlog"])
def test_a_refused_export_says_what_to_pass_and_that_works(cli, tmp_path, command):
    log, export = _log_and_export(tmp_path, "email,message_id,timestamp,campaign,step")
    head = {"diagnose": ["diagnose", log, "--format", "json"], "report": ["report", log, "--format", "md"],
            "backfill-sentlog": ["backfill-sentlog", "--dry-run", "--format", "json"]}[command]
    refused = cli(*head, "--provider-export", export)
    assert refused.exit_code == 1 and refused.stdout == ""
    assert refused.stderr == (f"Error: {export}: unknown CSV layout, no provider's marker columns (columns: email, "
                              "message_id, timestamp, campaign, step); pass --provider csv --map recipient=COLUMN "
                              "--map msg_id=COLUMN, or --provider sendgrid for SendGrid's activity export\n")
    told = cli(*head, "--provider-export", export, "--provider", "csv", "--map", "recipient=email",
               "--map", "msg_id=message_id")
    assert told.exit_code == 0, told.stderr
    if command == "diagnose":
        assert set(_reconciled(told).values()) == {0}
    elif command == "report":
        assert "| log sends not at provider | 0 |" in told.stdout
        assert "| provider sends not in log | 0 |" in told.stdout
    else:
        assert json.loads(told.stdout)["sends_found"] == N


@pytest.mark.slow
def test_map_keeps_campaign_step_and_time_into_the_sent_log(cli, tmp_path):
    import duckdb

    _, export = _log_and_export(tmp_path, "email,message_id,timestamp,campaign,step")
    db = tmp_path / "s.duckdb"
    result = cli("backfill-sentlog", "--provider-export", export, "--provider", "csv", "--map", "recipient=email",
                 "--map", "msg_id=message_id", "--db", db)
    assert result.exit_code == 0, result.stderr
    with duckdb.connect(str(db)) as con:
        rows = con.execute("SELECT DISTINCT campaign, step, sent_at IS NULL FROM sent_log").fetchall()
    assert rows == [("c-1", "1", False)]


@pytest.mark.slow
def test_jsonl_map_without_an_event_means_every_row_is_a_send(cli, tmp_path):
    export = tmp_path / "g.jsonl"
    export.write_text('{"to": "a@b.c", "id": "m1", "campaign": "c1", "step": "1", "sentAt": "2026-11-28T09:00:00Z"}\n'
                      '{"to": "d@b.c", "id": "m2", "campaign": "c1", "step": "1", "sentAt": "2026-11-28T09:01:00Z"}\n')
    result = cli("backfill-sentlog", "--provider-export", export, "--provider", "jsonl", "--map", "recipient=to",
                 "--map", "msg_id=id", "--dry-run", "--format", "json")
    assert result.exit_code == 0, result.stderr
    assert json.loads(result.stdout)["sends_found"] == 2


@pytest.mark.slow
def test_next_steps_read_the_export_as_this_run_did(cli, tmp_path, monkeypatch):
    export = tmp_path / "my export.csv"
    # campaign, step and "Sent At" (read by its name's words) let the suggested backfill write what it read
    export.write_text("E Mail,Message ID,Campaign,Step,Sent At\nsomeone@example.com,m-1,c-1,1,2026-11-28T09:00:00Z\n")
    maps = ["--provider", "csv", "--map", "recipient=E Mail", "--map", "msg_id=Message ID"]
    result = cli("diagnose", "sample_logs/state-loss", "--provider-export", export, *maps, "--format", "json")
    assert result.exit_code == 0, result.stderr
    step = json.loads(result.stdout)["incidents"][0]["remediation"][1]
    assert step == (f"mailmortem backfill-sentlog --provider-export {shlex.quote(str(export))} --provider csv "
                    "--map 'recipient=E Mail' --map 'msg_id=Message ID' --db \"$DATABASE_URL\"")
    monkeypatch.setenv("DATABASE_URL", str(tmp_path / "s.duckdb"))
    pasted = shlex.split(step.replace('"$DATABASE_URL"', shlex.quote(str(tmp_path / "s.duckdb"))))
    assert cli(*pasted[1:]).exit_code == 0


def test_reading_options_without_an_export_are_a_usage_error(cli, tmp_path):
    log, _ = _log_and_export(tmp_path, "recipient,msg_id")
    result = cli("diagnose", log, "--provider", "csv")
    assert result.exit_code == 2
    assert "--provider-export, which was not given" in result.stderr
