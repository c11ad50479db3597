"""`diagnose` / `affected` with `--provider-export` (issue 14 item 2): the provider's history as a witness.

Without logs the export alone names duplicates; with logs, duplicates the provider confirms but the log
misses are said first, never after a "No duplicates".
"""

from __future__ import annotations

import csv
import io
import json

import pytest


def _log_and_export(tmp_path, people: int = 4):
    """A log with one send per person; the export holds those sends and one more to p0 (the log lost it)."""
    log, export = tmp_path / "send.log", tmp_path / "export.csv"
    log.write_text("".join(
        f"ts=2026-11-28T09:{i:02d}:00Z event=send worker=w1 campaign=c-1 step=1 email=p{i}@example.com "
        f"msg_id=<m{i}@app.example>\n" for i in range(people)))
    rows = [f"p{i}@example.com,<m{i}@app.example>,2026-11-28T09:{i:02d}:00Z,c-1,1" for i in range(people)]
    rows.append("p0@example.com,<m99@app.example>,2026-11-28T09:40:00Z,c-1,1")
    export.write_text("recipient,msg_id,sent_at,campaign,step\n" + "\n".join(rows) + "\n")
    return log, export


@pytest.mark.slow
def test_with_logs_provider_confirmed_duplicates_the_log_misses_come_first_and_fail(cli, tmp_path):
    log, export = _log_and_export(tmp_path)
    result = cli("diagnose", log, "--provider-export", export, "--fail-on-duplicates")
    assert result.exit_code == 3, result.stdout
    first = result.stdout.splitlines()[0]
    assert first == ("PROVIDER-CONFIRMED DUPLICATES: the provider sent 1 person a campaign step more than once, "
                     "which the log does not show (1 send missing from the log). See the reconciliation below.")
    assert "No duplicates" not in result.stdout


@pytest.mark.slow
def test_with_logs_the_json_names_the_duplicates_the_log_misses(cli, tmp_path):
    log, export = _log_and_export(tmp_path)
    result = cli("diagnose", log, "--provider-export", export, "--format", "json")
    assert result.exit_code == 0, result.stderr
    rec = json.loads(result.stdout)["reconciliation"]
    missed = rec["provider_duplicates_missed_by_log"]
    assert (missed["count"], missed["sends_not_in_log"]) == (1, 1)
    assert missed["sample"][0]["recipient"] == "p0@example.com"
    assert missed["sample"][0]["msg_ids"] == ["m0@app.example", "m99@app.example"]
    assert rec["provider_confirmed_duplicates"]["grouping"]["grouped_by"] == "metadata"


@pytest.mark.slow
def test_with_logs_a_duplicate_the_log_shows_too_gets_no_provider_headline(cli, tmp_path):
    log, export = _log_and_export(tmp_path)
    with log.open("a") as f:
        f.write("ts=2026-11-28T09:40:00Z event=send worker=w2 campaign=c-1 step=1 email=p0@example.com "
                "msg_id=<m99@app.example>\n")
    result = cli("diagnose", log, "--provider-export", export, "--fail-on-duplicates")
    assert result.exit_code == 3
    assert not result.stdout.startswith("PROVIDER-CONFIRMED")
    assert "provider duplicates missed by log: 0" in result.stdout


# --- the provider's history alone -------------------------------------------------------------------------

def _sendgrid(tmp_path, events, name="sendgrid.jsonl"):
    path = tmp_path / name
    path.write_text("".join(json.dumps(e) + "\n" for e in events))
    return path


def _sg(email, msg, ts, **custom):
    return {"email": email, "event": "processed", "sg_event_id": f"e-{msg}", "timestamp": ts,
            "sg_message_id": f"{msg}.filter0001.1.2.0", **custom}


SEQUENCE = [  # ann: steps 1 and 2 once each (a sequence); bob: step 1 twice (a duplicate); cy: once
    _sg("ann@example.com", "A1", 1764400000, campaign="c-9", step="1"),
    _sg("Ann@Example.com", "A2", 1764486400, campaign="c-9", step="2"),
    _sg("bob@example.com", "B1", 1764400010, campaign="c-9", step="1"),
    _sg("<bob@example.com>", "B2", 1764400070, campaign="c-9", step="1"),
    _sg("cy@example.com", "C1", 1764400020, campaign="c-9", step="1"),
]


def test_provider_only_names_the_duplicate_and_not_the_sequence(cli, tmp_path):
    export = _sendgrid(tmp_path, SEQUENCE)
    result = cli("diagnose", "--provider-export", export)
    assert result.exit_code == 0, result.stderr
    lines = result.stdout.splitlines()
    assert lines[0] == ("DUPLICATES in the provider's history alone (no app logs read): 1 person got a campaign step "
                        "more than once; which mechanism needs the app logs.")
    assert lines[1] == f"Read: {export} (sendgrid)"
    assert "Provider sends 5   people 3   duplicated people 1   extra sends 1" in lines
    assert "Grouped by the provider's campaign and step (custom args, tags or metadata): 5 of 5 sends." in lines
    assert ("  bob@example.com  campaign c-9 step 1  2 sends  2025-11-29T07:06:50.000Z → 2025-11-29T07:07:50.000Z  "
            "B1, B2") in lines
    assert not any(line.startswith("  ann@") for line in lines)
    assert ("Cannot tell: Without the app logs the mechanism cannot be told: which of parallel-worker, retry, "
            "lease-expiry, state-loss or ab-contamination sent these twice needs the workers, claims, leases, "
            "restarts and errors that only the logs hold.") in lines
    assert f"next: mailmortem affected --provider-export {export} --format csv -o apology-exclusions.csv" in lines


@pytest.mark.slow
def test_provider_only_fail_on_duplicates_exits_3_and_0_without_duplicates(cli, tmp_path):
    dup = _sendgrid(tmp_path, SEQUENCE)
    assert cli("diagnose", "--provider-export", dup, "--fail-on-duplicates").exit_code == 3
    clean = _sendgrid(tmp_path, [e for e in SEQUENCE if e["sg_message_id"][:2] != "B2"], "clean.jsonl")
    result = cli("diagnose", "--provider-export", clean, "--fail-on-duplicates")
    assert result.exit_code == 0
    assert result.stdout.splitlines()[0] == ("No duplicates in the provider's history alone (no app logs read): "
                                             "every person got each campaign step at most once.")


def test_provider_only_json_has_its_own_section(cli, tmp_path):
    export = _sendgrid(tmp_path, SEQUENCE)
    result = cli("diagnose", "--provider-export", export, "--format", "json")
    assert result.exit_code == 0, result.stderr
    document = json.loads(result.stdout)
    assert list(document) == ["version", "complete", "provider_only"]
    section = document["provider_only"]
    assert section["summary"] == {"sends": 5, "people": 3, "duplicated_people": 1, "extra_sends": 1}
    assert section["grouping"]["grouped_by"] == "metadata"
    assert section["duplicates"] == [{
        "campaign": "c-9", "step": "1", "grouped_by": "metadata", "label": None, "recipient": "bob@example.com",
        "sends": 2, "msg_ids": ["B1", "B2"], "first_sent_at": "2025-11-29T07:06:50.000Z",
        "last_sent_at": "2025-11-29T07:07:50.000Z", "providers": ["sendgrid"]}]
    assert "mechanism cannot be told" in section["cannot_tell"]


@pytest.mark.slow
def test_an_export_without_campaign_step_template_or_subject_is_refused(cli, tmp_path):
    export = tmp_path / "sent.csv"
    export.write_text("recipient,msg_id,sent_at,Mail title\na@example.com,m1,2026-11-28T09:00:00Z,Hello\n"
                      "a@example.com,m2,2026-11-29T09:00:00Z,Following up\n")
    result = cli("diagnose", "--provider-export", export, "--fail-on-duplicates")
    assert result.exit_code == 1 and result.stdout == ""
    assert result.stderr == (
        f"Error: {export}: its sends name no campaign and step, template or subject, and grouping by address alone "
        "would call every multi-step sequence a duplicate; pass --map campaign=COLUMN --map step=COLUMN (or --map "
        "template=COLUMN, or --map subject=COLUMN), or the app logs\n")
    told = cli("diagnose", "--provider-export", export, "--map", "subject=Mail title", "--fail-on-duplicates")
    assert told.exit_code == 0, told.stderr  # two subjects: two steps, not a duplicate
    assert "Grouped by the subject (within the campaign where the provider names one): 2 of 2 sends." in told.stdout


@pytest.mark.slow
def test_a_json_provider_export_without_metadata_is_told_the_metadata_keys(cli, tmp_path):
    export = _sendgrid(tmp_path, [_sg("a@example.com", "X1", 1764400000, cmp="c-1", seq="1"),
                                  _sg("a@example.com", "X2", 1764400060, cmp="c-1", seq="2")])
    result = cli("affected", "--provider-export", export)
    assert result.exit_code == 1
    assert result.stderr == (
        f"Error: {export}: its sends name no campaign and step, template or subject, and grouping by address alone "
        "would call every multi-step sequence a duplicate; pass --campaign-key KEY --step-key KEY naming the custom "
        "args, tags or metadata keys that hold them (its activity CSV: --map campaign=COLUMN --map step=COLUMN (or "
        "--map template=COLUMN, or --map subject=COLUMN)), or the app logs\n")
    told = cli("affected", "--provider-export", export, "--campaign-key", "cmp", "--step-key", "seq", "--format", "csv")
    assert told.exit_code == 0 and told.stdout == "recipient,campaign,step,grouped_by,label,sends,first_sent_at," \
                                                  "last_sent_at,msg_ids\n"


def test_an_export_of_no_sends_is_refused(cli, tmp_path):
    export = _sendgrid(tmp_path, [{**_sg("a@example.com", "O1", 1764400000, campaign="c", step="1"), "event": "open"}])
    result = cli("diagnose", "--provider-export", export)
    assert result.exit_code == 1
    assert result.stderr == (f"Error: no provider-confirmed send in {export} (only other events: opens, bounces "
                             "without a send, …); nothing to compare\n")


def test_without_metadata_the_subject_groups_and_the_output_says_so(cli, tmp_path):
    export = tmp_path / "postmark.json"
    messages = [("p-1", "Welcome aboard", "2026-11-28T10:00:00Z"), ("p-2", "Still there?", "2026-11-30T10:00:00Z"),
                ("p-3", "Welcome  aboard ", "2026-11-28T10:00:40Z")]
    export.write_text(json.dumps({"TotalCount": 3, "Messages": [
        {"MessageID": mid, "Status": "Sent", "ReceivedAt": at, "Recipients": ["hal@example.com"], "Subject": subject}
        for mid, subject, at in messages]}))
    result = cli("diagnose", "--provider-export", export, "--fail-on-duplicates")
    assert result.exit_code == 3, result.stderr
    lines = result.stdout.splitlines()
    assert "Grouped by the subject (within the campaign where the provider names one): 3 of 3 sends." in lines
    assert ("  (no campaign and step metadata: two steps that share a subject count as one step, and one step sent "
            "under two subjects, e.g. A/B variants, is not seen)") in lines
    assert ("  hal@example.com  campaign - subject 'Welcome aboard'  2 sends  2026-11-28T10:00:00.000Z → "
            "2026-11-28T10:00:40.000Z  p-1, p-3") in lines


def test_a_template_groups_before_a_subject(cli, tmp_path):
    export = tmp_path / "brevo.jsonl"
    events = [("<b1@relay>", "12", "Hi Ida"), ("<b2@relay>", "12", "Hi Ida!"), ("<b3@relay>", "13", "Hi Ida")]
    export.write_text("".join(json.dumps({"event": "request", "email": "ida@example.com", "message-id": mid,
                                          "template_id": int(tpl), "subject": subject, "ts_epoch": 1764400000000})
                              + "\n" for mid, tpl, subject in events))
    result = cli("affected", "--provider-export", export, "--format", "jsonl")
    assert result.exit_code == 0, result.stderr
    rows = [json.loads(line) for line in result.stdout.splitlines()]
    assert [(r["grouped_by"], r["label"], r["msg_ids"]) for r in rows] == [("template", "12", ["b1@relay", "b2@relay"])]


@pytest.mark.slow
@pytest.mark.parametrize("fmt", ["csv", "json", "jsonl", "table"])
def test_affected_lists_the_people_in_every_format(cli, tmp_path, fmt):
    export = _sendgrid(tmp_path, SEQUENCE)
    result = cli("affected", "--provider-export", export, "--format", fmt)
    assert result.exit_code == 0, result.stderr
    if fmt == "csv":
        assert result.stdout.splitlines()[1] == ("bob@example.com,c-9,1,metadata,,2,2025-11-29T07:06:50.000Z,"
                                                 "2025-11-29T07:07:50.000Z,B1;B2")
    elif fmt == "json":
        assert [r["recipient"] for r in json.loads(result.stdout)] == ["bob@example.com"]
    elif fmt == "jsonl":
        assert json.loads(result.stdout)["msg_ids"] == ["B1", "B2"]
    else:
        assert "1 people affected (provider's history alone: grouped by metadata; the kind needs the logs)" \
            in result.stdout and "bob@example.com" in result.stdout


@pytest.mark.slow
def test_affected_filters_by_campaign_and_refuses_what_it_cannot_filter(cli, tmp_path):
    export = _sendgrid(tmp_path, SEQUENCE)
    assert cli("affected", "--provider-export", export, "--campaign", "c-9", "--format", "csv").stdout.count("\n") == 2
    unknown = cli("affected", "--provider-export", export, "--campaign", "c-1")
    assert unknown.exit_code == 1
    assert unknown.stderr == ("Error: no send to campaign 'c-1' in these exports (campaigns: c-9); pass one of them "
                              "to --campaign\n")
    kind = cli("affected", "--provider-export", export, "--kind", "retry")
    assert kind.exit_code == 2 and "--kind and --incident need LOGS" in kind.stderr
    both = cli("affected", tmp_path / "x.log", "--provider-export", export)
    assert both.exit_code == 2 and "affected reads --provider-export without LOGS" in both.stderr


def test_no_logs_and_no_export_is_a_usage_error_and_log_options_need_logs(cli, tmp_path):
    result = cli("diagnose")
    assert result.exit_code == 2
    assert "Missing argument 'LOGS...' (or --provider-export PATH to diagnose the provider's history alone)." \
        in result.stderr
    export = _sendgrid(tmp_path, SEQUENCE)
    saved = cli("diagnose", "--provider-export", export, "--save", tmp_path / "case.duckdb")
    assert saved.exit_code == 2 and "--save say how to read LOGS, which were not given" in saved.stderr
    assert not (tmp_path / "case.duckdb").exists()


@pytest.mark.slow
def test_sends_that_cannot_be_grouped_make_the_run_incomplete(cli, tmp_path):
    events = SEQUENCE + [_sg("dee@example.com", "D1", 1764400030, campaign="c-9")]  # no step, no subject
    export = _sendgrid(tmp_path, events)
    result = cli("diagnose", "--provider-export", export, "--fail-on-duplicates")
    assert result.exit_code == 4
    assert result.stdout.splitlines()[0] == (
        "INCOMPLETE: 1 of 6 provider sends could not be grouped by metadata (no message id, address or metadata): "
        "duplicates among them cannot be seen.")
    assert json.loads(cli("diagnose", "--provider-export", export, "--format", "json").stdout)["complete"] is False


def test_an_envelope_without_logs_is_a_usage_error(cli, tmp_path):
    export = _sendgrid(tmp_path, SEQUENCE)
    result = cli("diagnose", "--provider-export", export, "--envelope", "journald", "--memory-limit", "1GB")
    assert result.exit_code == 2
    assert "--envelope, --memory-limit say how to read LOGS, which were not given" in result.stderr


@pytest.mark.slow
def test_hostile_subjects_reach_neither_the_terminal_nor_a_spreadsheet_as_commands(cli, tmp_path):
    export = tmp_path / "sent.csv"
    export.write_text('recipient,msg_id,subject\na@b.c,m1,"=HYPERLINK(""x"")\x1b[31m"\na@b.c,m2,"=HYPERLINK(""x"")\x1b[31m"\n')
    shown = cli("diagnose", "--provider-export", export)
    assert shown.exit_code == 0 and "\x1b" not in shown.stdout and "\\x1b[31m" in shown.stdout
    listed = cli("affected", "--provider-export", export, "--format", "csv")
    row = next(csv.DictReader(io.StringIO(listed.stdout)))
    assert row["label"] == "'=HYPERLINK(\"x\")\\x1b[31m" and row["grouped_by"] == "subject"


@pytest.mark.slow
def test_ses_tags_and_mailgun_subjects_group_their_sends(cli, tmp_path):
    ses = tmp_path / "ses.jsonl"
    ses.write_text("".join(json.dumps({"eventType": "Send", "mail": {
        "timestamp": f"2026-11-28T10:0{n}:00Z", "messageId": f"0100-{n}", "destination": ["Ann@Example.org"],
        "tags": {"campaign": ["c-9"], "step": [step]}}, "send": {}}) + "\n" for n, step in enumerate("112")))
    result = cli("affected", "--provider-export", ses, "--format", "jsonl")
    assert result.exit_code == 0, result.stderr
    row = json.loads(result.stdout)
    assert (row["recipient"], row["campaign"], row["step"], row["msg_ids"]) == ("ann@example.org", "c-9", "1",
                                                                               ["0100-0", "0100-1"])
    mailgun = tmp_path / "mailgun.json"
    mailgun.write_text(json.dumps({"items": [
        {"event": "accepted", "timestamp": 1764400000 + n, "recipient": "fay@example.com",
         "message": {"headers": {"message-id": f"{n}@mg.example.com", "subject": subject}}}
        for n, subject in enumerate(["Intro", "Intro", "Follow-up"])], "paging": {}}))
    result = cli("diagnose", "--provider-export", mailgun, "--format", "json")
    section = json.loads(result.stdout)["provider_only"]
    assert section["grouping"]["grouped_by"] == "subject"
    assert [(d["label"], d["msg_ids"]) for d in section["duplicates"]] == [
        ("Intro", ["0@mg.example.com", "1@mg.example.com"])]


def test_affected_warns_before_an_incomplete_list(cli, tmp_path):
    export = _sendgrid(tmp_path, SEQUENCE + [_sg("dee@example.com", "D1", 1764400030, campaign="c-9")])
    result = cli("affected", "--provider-export", export, "--format", "csv")
    assert result.exit_code == 0
    assert result.stderr == ("Warning: 1 of 6 provider sends could not be grouped by metadata (no message id, "
                             "address or metadata): duplicates among them cannot be seen\n")


@pytest.mark.slow
def test_with_logs_provider_sends_no_grouping_places_are_not_called_no_duplicates(cli, tmp_path):
    log, export = _log_and_export(tmp_path)
    bare = tmp_path / "bare.csv"
    bare.write_text("".join(",".join(line.split(",")[:3]) + "\n" for line in export.read_text().splitlines()))
    result = cli("diagnose", log, "--provider-export", bare)
    assert result.exit_code == 0
    assert "No duplicates" not in result.stdout
    assert result.stdout.splitlines()[0] == (
        f"INCOMPLETE: 1 provider send(s) the log lacks could not be placed in a campaign step ({bare}:6). "
        "Duplicates among them cannot be seen.")
    assert ("The log's records show every person once per step, but 1 provider send(s) could not be placed in a "
            "campaign step (the export names none for them, and the log lacks some of its sends): duplicates among "
            "them cannot be seen (see the reconciliation).") in result.stdout.splitlines()


@pytest.mark.slow
def test_with_logs_unplaced_provider_sends_make_the_run_incomplete(cli, tmp_path):
    log, export = _log_and_export(tmp_path)
    bare = tmp_path / "bare.csv"
    bare.write_text("".join(",".join(line.split(",")[:3]) + "\n" for line in export.read_text().splitlines()))
    assert cli("diagnose", log, "--provider-export", bare, "--fail-on-duplicates").exit_code == 4
    document = json.loads(cli("diagnose", log, "--provider-export", bare, "--format", "json").stdout)
    assert document["complete"] is False
    assert document["lost_evidence"]["provider_sends_unplaced"] == {
        "count": 1, "by_file": [{"path": str(bare), "sends": 1, "first_lines": [6]}]}
    placed = json.loads(cli("diagnose", log, "--provider-export", export, "--format", "json").stdout)
    assert placed["complete"] is True and placed["lost_evidence"]["provider_sends_unplaced"]["count"] == 0


@pytest.mark.parametrize("command", ["diagnose", "affected"])
@pytest.mark.parametrize("window", [("--since", "6h"), ("--until", "2026-11-28T10:00Z")])
def test_a_window_without_logs_is_a_usage_error_not_ignored(cli, tmp_path, command, window):
    export = tmp_path / "export.csv"
    export.write_text("recipient,msg_id,sent_at,campaign,step\na@x.co,<1@m>,2026-11-28T09:00:00Z,c1,1\n")
    result = cli(command, "--provider-export", str(export), *window)
    assert result.exit_code == 2 and f"{window[0]} say how to read LOGS, which were not given" in result.stderr
