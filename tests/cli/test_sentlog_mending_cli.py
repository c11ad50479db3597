"""Issue 40's reproductions as a user runs them: a backfill that writes only what the export proves, answers that
say what they know, and a re-run that mends."""

from __future__ import annotations

import json

import pytest

POSTMARK = "Recipient,MessageID,Tag,Status\njane@acme.com,pm-1,backend-sr-dec,Sent\nbob@acme.com,pm-2,backend-sr-dec,Sent\n"
MAPS = ("--provider", "csv", "--map", "recipient=Recipient", "--map", "msg_id=MessageID")
SENDGRID = "".join(
    f'{{"email":"{who}@acme.com","timestamp":176440000{i},"event":"processed","sg_event_id":"e{i}",'
    f'"sg_message_id":"{who.upper()}.filter1.1.0","custom_args":{{"campaign":"c-1","seq_step":"2"}}}}\n'
    for i, who in enumerate(("jane", "bob")))
CHECK = ("sentlog", "check", "--campaign", "c-1")


@pytest.mark.slow
def test_an_export_mapped_by_address_and_id_alone_is_refused_and_nothing_answers_not_sent(cli, tmp_path):
    export, db = tmp_path / "postmark.csv", tmp_path / "s.duckdb"
    export.write_text(POSTMARK)
    result = cli("backfill-sentlog", "--provider-export", export, *MAPS, "--db", db)
    assert (result.exit_code, result.stdout) == (1, "")
    assert result.stderr.startswith("Error: refused, nothing written: of 2 sends, 2 lack a campaign (pass --map "
                                    "campaign=COLUMN, or --campaign NAME for the whole export); 2 lack a step")
    assert "2 lack a send time (pass --map sent_at=COLUMN)" in result.stderr and result.stderr.count("\n") == 1
    assert not db.exists()  # refused before any store is opened
    check = cli("sentlog", "check", "--db", db, "--campaign", "backend-sr-dec", "--recipient", "jane@acme.com")
    assert check.exit_code == 1 and "not sent" not in check.stdout


@pytest.mark.slow
def test_a_step_in_a_custom_arg_is_refused_alike_by_backfill_and_diagnose_and_read_by_the_same_step_key(cli, tmp_path):
    export, db = tmp_path / "sg.jsonl", tmp_path / "s.duckdb"
    export.write_text(SENDGRID)
    refused = cli("backfill-sentlog", "--provider-export", export, "--db", db)
    assert refused.exit_code == 1 and "2 lack a step (pass --step-key KEY, or --step N" in refused.stderr
    assert "--step-key KEY" in cli("diagnose", "--provider-export", export).stderr
    assert cli("diagnose", "--provider-export", export, "--step-key", "seq_step").exit_code == 0
    written = cli("backfill-sentlog", "--provider-export", export, "--step-key", "seq_step", "--db", db)
    assert written.exit_code == 0, written.stderr
    assert "plan: 2 sends of c-1 step 2" in written.stderr
    hit = cli(*CHECK, "--step", "2", "--recipient", "jane@acme.com", "--db", db)
    assert hit.exit_code == 3 and hit.stdout.startswith("already sent: jane@acme.com got c-1 step 2 (msg JANE, 2025-")


@pytest.mark.slow
def test_a_row_without_a_step_is_said_to_count_for_every_step_never_got_step_2(cli, tmp_path):
    export, db = tmp_path / "sg.jsonl", tmp_path / "s.duckdb"
    export.write_text(SENDGRID)
    written = cli("backfill-sentlog", "--provider-export", export, "--no-step", "--db", db)
    assert written.exit_code == 0, written.stderr
    assert "--no-step: 2 sends stored without a step count for every step of their campaign" in written.stderr
    hit = cli(*CHECK, "--step", "2", "--recipient", "jane@acme.com", "--db", db)
    assert hit.exit_code == 3
    assert hit.stdout.startswith("already sent: jane@acme.com sent c-1 (step not recorded: counts for every step)")
    assert "step 2" not in hit.stdout
    as_json = cli(*CHECK, "--step", "2", "--recipient", "jane@acme.com", "--db", db, "--format", "json")
    doc = json.loads(as_json.stdout)
    assert as_json.exit_code == 3 and doc["line"] == hit.stdout.strip()
    assert (doc["step"], doc["step_recorded"], doc["counts_for_every_step"]) == (None, False, True)


@pytest.mark.slow
def test_sent_at_is_read_by_its_name_and_the_reading_is_printed(cli, tmp_path):
    export, db = tmp_path / "e.csv", tmp_path / "s.duckdb"
    export.write_text("To,Message ID,Campaign Name,sequence_step,Sent At\njane@acme.com,m-1,c-1,1,2026-12-01T10:00:00Z\n")
    written = cli("backfill-sentlog", "--provider-export", export, "--provider", "csv", "--map", "recipient=To",
                  "--map", "msg_id=Message ID", "--db", db)
    assert written.exit_code == 0, written.stderr
    assert ("sent_at ← Sent At (its name's words); campaign ← Campaign Name (its name's words); "
            "step ← sequence_step (its name's words)") in written.stderr
    hit = cli(*CHECK, "--step", "1", "--recipient", "jane@acme.com", "--db", db)
    assert hit.stdout == "already sent: jane@acme.com got c-1 step 1 (msg m-1, 2026-12-01T10:00:00+00:00)\n"


@pytest.mark.slow
@pytest.mark.parametrize("kind", ["duckdb", "postgres"])
def test_a_rerun_with_the_full_maps_fills_what_the_first_left_blank_and_audit_shows_it(cli, tmp_path, request, kind):
    from remediation import sentlog
    from remediation.store import open_store

    db = str(tmp_path / "s.duckdb") if kind == "duckdb" else request.getfixturevalue("pg_dsn")
    store = open_store(db)  # what the lenient backfill before issue 40 wrote
    sentlog.ensure_schema(store)
    for address, msg_id in (("jane@acme.com", "pm-1"), ("bob@acme.com", "pm-2")):
        sentlog.record_send(store, None, None, address, msg_id)
    store.conn.commit()
    store.close()
    export = tmp_path / "postmark.csv"
    export.write_text(POSTMARK.replace("Status\n", "Status,Sent At\n").replace("Sent\n", "Sent,2026-12-01T10:00:00Z\n"))
    mended = cli("backfill-sentlog", "--provider-export", export, *MAPS, "--map", "campaign=Tag", "--step", "1",
                 "--db", db, "--format", "json")
    assert mended.exit_code == 0, mended.stderr
    assert "already present: 2 (blanks to fill: 2; disagreeing, left as stored: 0)" in mended.stderr
    doc = json.loads(mended.stdout)
    assert (doc["inserted"], doc["already_present"], doc["filled"]) == (0, 2, 2)
    shown = json.loads(cli("audit", "--db", db, "--run", doc["run_id"], "--format", "json").stdout)
    filled = [row for row in shown if row["row_key"] == "2 rows filled"][0]
    assert filled["new_values"]["filled"][0][2] == {"campaign": "backend-sr-dec", "step": "1",
                                                    "sent_at": "2026-12-01T10:00:00+00:00"}
    hit = cli("sentlog", "check", "--db", db, "--campaign", "backend-sr-dec", "--recipient", "jane@acme.com")
    assert hit.exit_code == 3 and "got backend-sr-dec step 1" in hit.stdout


MAPPED = ("--provider", "csv", "--map", "recipient=To", "--map", "msg_id=Message ID")


def test_another_events_time_is_never_read_as_the_send_time_by_its_values(cli, tmp_path):
    export, db = tmp_path / "e.csv", tmp_path / "s.duckdb"
    export.write_text("To,Message ID,Campaign,Step,Opened At\njane@acme.com,m-1,c-1,1,2026-12-03T09:00:00Z\n")
    result = cli("backfill-sentlog", "--provider-export", export, *MAPPED, "--db", db)
    assert result.exit_code == 1 and "1 lack a send time" in result.stderr
    assert "sent_at ← Opened At" not in result.stderr and not db.exists()


def test_two_columns_that_both_look_like_the_send_time_are_named_by_the_refusal(cli, tmp_path):
    export, db = tmp_path / "e.csv", tmp_path / "s.duckdb"
    export.write_text("To,Message ID,Campaign,Step,Sent At,sent_time\n"
                      "jane@acme.com,m-1,c-1,1,2026-12-03T09:00:00Z,2026-12-03T09:00:07Z\n")
    result = cli("backfill-sentlog", "--provider-export", export, *MAPPED, "--db", db)
    assert result.exit_code == 1 and result.stderr.count("\n") == 1 and not db.exists()
    assert "1 lack a send time" in result.stderr
    assert f"{export}: sent_at: ambiguous: Sent At, sent_time; pass --map sent_at=COLUMN" in result.stderr


def test_a_recipient_cell_naming_two_people_is_refused_never_stored_as_nobody(cli, tmp_path):
    export, db = tmp_path / "e.csv", tmp_path / "s.duckdb"
    export.write_text('To,Message ID,Campaign,Step,Sent At\n"jane@acme.com, bob@acme.com",m-1,c-1,1,2026-12-03T09:00:00Z\n'
                      "ann@acme.com,m-2,c-1,1,2026-12-03T09:00:00Z\n")
    result = cli("backfill-sentlog", "--provider-export", export, *MAPPED, "--db", db)
    assert result.exit_code == 1 and not db.exists()
    assert "1 name several recipients in one value" in result.stderr


def test_a_stated_step_never_fills_a_step_the_export_holds_in_two_columns_it_could_not_tell_apart(cli, tmp_path):
    export, db = tmp_path / "e.csv", tmp_path / "s.duckdb"
    export.write_text("To,Message ID,Campaign,Step No,sequence_step,Sent At\n"
                      "jane@acme.com,m-1,c-1,2,2,2026-12-03T09:00:00Z\n")
    result = cli("backfill-sentlog", "--provider-export", export, *MAPPED, "--step", "1", "--db", db)
    assert result.exit_code == 1 and not db.exists()
    assert f"{export}: step: ambiguous: Step No, sequence_step; pass --map step=COLUMN" in result.stderr


@pytest.mark.parametrize("flag", ["--campaign", "--step"])
def test_a_stated_value_blank_in_normal_form_is_a_usage_error(cli, tmp_path, flag):
    export, db = tmp_path / "e.csv", tmp_path / "s.duckdb"
    export.write_text("To,Message ID,Sent At\njane@acme.com,m-1,2026-12-03T09:00:00Z\n")
    result = cli("backfill-sentlog", "--provider-export", export, *MAPPED, "--campaign", "c-1", "--step", "1",
                 flag, "\u200b", "--db", db)
    assert result.exit_code == 2 and f"{flag} must not be empty" in result.stderr and not db.exists()


@pytest.mark.slow
def test_a_send_time_column_found_but_unreadable_is_named_by_the_refusal_not_asked_for_again(cli, tmp_path):
    export, db = tmp_path / "e.csv", tmp_path / "s.duckdb"
    export.write_text("To,Message ID,Campaign,Step,Sent At\njane@acme.com,m-1,c-1,1,12/03/2026 09:00 AM\n"
                      "bob@acme.com,m-2,c-1,1,2026-12-03T09:00:00Z\n")
    result = cli("backfill-sentlog", "--provider-export", export, *MAPPED, "--db", db)
    assert result.exit_code == 1 and not db.exists() and "1 lack a send time" in result.stderr
    assert (f"{export}: sent_at ← Sent At, blank or not a time in some rows (ISO 8601, or epoch seconds or "
            "milliseconds)") in result.stderr
