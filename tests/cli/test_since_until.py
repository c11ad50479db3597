"""--since / --until on diagnose, affected, report and ab-contamination: a week of logs cut to the incident
window while it is read, the window said first, and an empty window refused."""

from __future__ import annotations

import datetime as dt
import json

import pytest


def _send(ts: str | None, email: str, msg: str, worker: str = "w1", extra: str = "") -> str:
    stamp = f"ts={ts} " if ts else ""
    return f"{stamp}event=send worker={worker} pid=1 campaign=c1 step=1 email={email} msg_id=<{msg}@m>{extra}\n"


# old@ got its first email a day before the incident and its second inside it; in@ got both inside it;
# edge@ has one send just before 10:00 and one after; the newest record is at 12:00.
WEEK = (_send("2026-11-27T08:00:00Z", "old@x.co", "o1")
        + _send("2026-11-28T09:59:59Z", "edge@x.co", "e1")
        + _send("2026-11-28T10:00:00Z", "old@x.co", "o2")
        + _send("2026-11-28T10:05:00Z", "in@x.co", "i1")
        + _send("2026-11-28T10:06:00Z", "in@x.co", "i2", worker="w2")
        + _send("2026-11-28T10:30:00Z", "edge@x.co", "e2")
        + "ts=2026-11-28T12:00:00Z event=claim worker=w1 pid=1 shard=s1 lease=15m\n")


@pytest.fixture()
def week(tmp_path):
    path = tmp_path / "mail-send.log"
    path.write_text(WEEK, encoding="utf-8")
    return path


def _people(cli, *args) -> set[str]:
    result = cli("affected", *args, "--format", "json")
    assert result.exit_code == 0, result.stderr
    return {row["recipient"] for row in json.loads(result.stdout)}


def _window(cli, *args) -> dict:
    result = cli("diagnose", *args, "--format", "json")
    assert result.exit_code == 0, result.stderr
    return json.loads(result.stdout)


@pytest.mark.slow
def test_without_a_window_everyone_is_seen(cli, week):
    assert _people(cli, week) == {"old@x.co", "in@x.co", "edge@x.co"}
    assert _window(cli, week)["window"] is None


@pytest.mark.slow
def test_duplicates_outside_the_window_are_not_reported_inside_are(cli, week):
    assert _people(cli, week, "--since", "2026-11-28T10:00:00Z") == {"in@x.co"}
    assert _people(cli, week, "--since", "2026-11-28T09:00Z") == {"in@x.co", "edge@x.co"}
    assert _people(cli, week, "--until", "2026-11-28T10:05:30Z") == {"old@x.co"}
    # both ends are included
    assert _people(cli, week, "--since", "2026-11-28T10:05Z", "--until", "2026-11-28T10:06Z") == {"in@x.co"}


@pytest.mark.slow
def test_a_duration_counts_back_from_the_newest_record_not_from_now(cli, week):
    document = _window(cli, week, "--since", "2h")  # the newest record is at 12:00, a claim
    window = document["window"]
    assert (window["since"], window["until"]) == ("2026-11-28T10:00:00.000Z", None)
    assert (window["first_record"], window["last_record"]) == ("2026-11-27T08:00:00.000Z", "2026-11-28T12:00:00.000Z")
    assert (window["records"], window["records_in_window"], window["records_before"], window["records_after"]) == (7, 5, 2, 0)
    assert window["since_given"] == "2h" and window["sends_in_window"] == 4
    assert document["summary"]["sends"] == 4 and document["summary"]["duplicated_people"] == 1
    assert _people(cli, week, "--since", "2h") == {"in@x.co"}
    assert _people(cli, week, "--since", "2h1s") == {"in@x.co", "edge@x.co"}
    assert _people(cli, week, "--since", "1d", "--until", "1h30m") == {"in@x.co", "edge@x.co"}


@pytest.mark.slow
def test_a_time_without_a_zone_is_read_in_tz(cli, week):
    window = _window(cli, week, "--since", "2026-11-28T11:00", "--tz", "Europe/Berlin")["window"]
    assert window["since"] == "2026-11-28T10:00:00.000Z"
    assert _window(cli, week, "--since", "2026-11-28T10:00")["window"]["since"] == "2026-11-28T10:00:00.000Z"


def test_the_table_says_first_who_the_window_cannot_see(cli, week):
    result = cli("diagnose", week, "--since", "2h")
    assert result.exit_code == 0, result.stderr
    first, *rest = result.stdout.splitlines()
    assert first.startswith("Window 2026-11-28 10:00:00Z → end of input only (--since 2h)")
    assert "a person whose earlier send falls before the window is not seen as duplicated" in first
    read = "\n".join(rest)
    assert "5 of 7 records (2 before it, 0 after it; the input runs 2026-11-27 08:00:00Z → 2026-11-28 12:00:00Z)" in read
    # the affected command it suggests reads the same window, so INC-1 is the same incident
    assert "mailmortem affected " in read and " --since 2026-11-28T10:00:00Z --incident INC-1 " in read


@pytest.mark.slow
def test_an_until_is_named_in_the_caveat(cli, week):
    first = cli("diagnose", week, "--since", "3h", "--until", "1h").stdout.splitlines()[0]
    assert "(--since 3h --until 1h)" in first and "nor one whose later send falls after it" in first


@pytest.mark.slow
@pytest.mark.parametrize("command", [("affected",), ("ab-contamination", "--test-id", "t1"), ("diagnose", "--format", "json")])
def test_data_commands_say_it_on_stderr(cli, tmp_path, command):
    log = tmp_path / "ab.log"
    log.write_text(_send("2026-11-28T08:00:00Z", "p@x.co", "1", extra=" test_id=t1 variant=A")
                   + _send("2026-11-28T10:00:00Z", "p@x.co", "2", extra=" test_id=t1 variant=B")
                   + _send("2026-11-28T10:01:00Z", "q@x.co", "3", extra=" test_id=t1 variant=A"))
    result = cli(command[0], log, *command[1:], "--since", "1h")
    assert result.exit_code == 0, result.stderr
    assert "Warning: Window 2026-11-28 09:01:00Z → end of input only (--since 1h): a person whose earlier send " \
           "falls before the window is not seen as duplicated" in result.stderr


@pytest.mark.slow
def test_ab_contamination_before_the_window_is_not_seen(cli, tmp_path):
    log = tmp_path / "ab.log"
    log.write_text(_send("2026-11-28T08:00:00Z", "p@x.co", "1", extra=" test_id=t1 variant=A")
                   + _send("2026-11-28T10:00:00Z", "p@x.co", "2", extra=" test_id=t1 variant=B")
                   + _send("2026-11-28T10:01:00Z", "q@x.co", "3", extra=" test_id=t1 variant=A"))
    whole = json.loads(cli("ab-contamination", log, "--test-id", "t1", "--format", "json").stdout)
    cut = json.loads(cli("ab-contamination", log, "--test-id", "t1", "--format", "json", "--since", "1h").stdout)
    assert whole["contaminated"] == 1 and cut["contaminated"] == 0


@pytest.mark.slow
def test_the_report_notes_the_window_and_repeats_it_in_its_commands(cli, week):
    result = cli("report", week, "--since", "2h", "--format", "md")
    assert result.exit_code == 0, result.stderr
    assert "> Note: Window 2026-11-28 10:00:00Z → end of input only (--since 2h): a person whose earlier send" in result.stdout
    assert "--since 2026-11-28T10:00:00Z" in result.stdout


@pytest.mark.slow
def test_a_window_without_a_send_is_refused_naming_it_and_the_inputs_range(cli, week):
    result = cli("diagnose", week, "--since", "2026-12-01T00:00Z", "--fail-on-duplicates")
    assert result.exit_code == 1 and result.stdout == ""
    assert result.stderr == (
        "Error: no mail-send record in the window 2026-12-01T00:00:00.000Z → the last record (--since "
        "2026-12-01T00:00Z): no record in it; the input's 7 records run from 2026-11-27T08:00:00.000Z to "
        "2026-11-28T12:00:00.000Z; pass a --since/--until inside that range\n")
    # records, but none a send (the claim at 12:00): still refused, never "No duplicates"
    result = cli("affected", week, "--since", "1h")
    assert result.exit_code == 1
    assert "no mail-send record in the window 2026-11-28T11:00:00.000Z → the last record (--since 1h): " \
           "1 record(s) in it, none a send" in result.stderr


@pytest.mark.parametrize("value", ["yesterday", "6 hours", "-2h", "2026-13-01", "1.5h", "6H", "", "now"])
def test_a_value_that_is_neither_a_time_nor_a_duration_is_a_usage_error(cli, week, value):
    result = cli("diagnose", week, "--since", value)
    assert result.exit_code == 2
    assert f"Invalid value for '--since': {value!r} is neither a time nor a duration; pass a time such as " \
           "2026-11-28T09:00" in result.stderr
    assert "90m, 6h, 2d" in result.stderr


@pytest.mark.parametrize("since,until", [("2026-11-28T10:00Z", "2026-11-28T09:00Z"), ("1h", "2h"),
                                         ("2026-11-28T10:00", "2026-11-28T09:59")])
def test_an_until_before_since_is_a_usage_error(cli, week, since, until):
    result = cli("affected", week, "--since", since, "--until", until)
    assert result.exit_code == 2
    assert f"--until {until} is before --since {since}" in result.stderr and "pass an --until later" in result.stderr


def test_an_until_before_since_found_only_once_read_is_one_line(cli, week):
    # 3h before the newest record (12:00) is 09:00, before 11:00: known only once the input is read
    result = cli("diagnose", week, "--since", "2026-11-28T11:00Z", "--until", "3h")
    assert result.exit_code == 1
    assert result.stderr == ("Error: --until 3h (2026-11-28T09:00:00Z) is before --since 2026-11-28T11:00Z "
                             "(2026-11-28T11:00:00Z); pass an --until later than --since\n")


@pytest.mark.slow
def test_records_without_a_timestamp_are_counted_and_kept_not_dropped(cli, tmp_path):
    log = tmp_path / "m.log"
    log.write_text(WEEK + _send(None, "lost@x.co", "l1"))
    document = _window(cli, log, "--since", "2h")
    assert document["window"]["records_without_time"] == 1
    assert document["complete"] is False and document["lost_evidence"]["lines"] == 1  # it looks like a send
    table = cli("diagnose", log, "--since", "2h").stdout
    assert "1 line(s) without a readable timestamp cannot be placed in the window: they are kept, among the " \
           "skipped lines." in table
    # a skipped line with a time outside the window is not lost evidence of the window
    log.write_text(WEEK + "ts=2026-11-27T07:00:00Z worker=w1 email=lost@x.co\n")  # no event nor msg_id
    assert _window(cli, log)["complete"] is False
    assert _window(cli, log, "--since", "2h")["complete"] is True


@pytest.mark.slow
def test_the_window_applies_to_many_files_and_to_enveloped_ones(cli, tmp_path):
    # more than 16 files of one syntax are read in one statement into tables; a CRI envelope gives its time
    for n in range(17):
        (tmp_path / f"w{n:02}.log").write_text(_send(f"2026-11-28T09:{n:02}:00Z", f"p{n}@x.co", f"a{n}")
                                               + _send(f"2026-11-28T10:{n:02}:00Z", f"p{n}@x.co", f"b{n}"))
    (tmp_path / "cri.log").write_text(
        "2026-11-28T10:20:00.000000000Z stdout F " + _send(None, "k@x.co", "k1")
        + "2026-11-28T10:21:00.000000000Z stdout F " + _send(None, "k@x.co", "k2", worker="w2"))
    assert len(_people(cli, tmp_path)) == 18
    assert _people(cli, tmp_path, "--since", "2026-11-28T10:00Z", "--until", "2026-11-28T10:21:30Z") == {"k@x.co"}
    assert _people(cli, tmp_path, "--until", "2026-11-28T10:19:30Z") == {f"p{n}@x.co" for n in range(17)}

def test_every_log_reading_command_has_the_same_help(cli):
    from mailmortem.cli.window import SINCE_HELP, UNTIL_HELP

    for command in ("diagnose", "affected", "report", "ab-contamination"):
        text = cli(command, "--help").stdout
        assert "--since TIME|DURATION" in text and "--until TIME|DURATION" in text, command
        flat = " ".join(text.split())
        assert " ".join(SINCE_HELP.split()) in flat and " ".join(UNTIL_HELP.split()) in flat, command


def _sendgrid(email: str, at: str, msg: str) -> str:
    epoch = int(dt.datetime.fromisoformat(at.replace("Z", "+00:00")).timestamp())
    return (f'[{{"email":"{email}","timestamp":{epoch},"event":"processed","sg_event_id":"{msg}",'
            f'"sg_message_id":"{msg}.filter0001.1.2.0","campaign":"c1","step":"1"}}]\n')


@pytest.mark.slow
def test_a_provider_export_is_compared_within_the_same_window(cli, tmp_path):
    log, export = tmp_path / "send.log", tmp_path / "sg.jsonl"
    ids = {"o1": "OLD0000000000000000001", "i1": "INN0000000000000000001", "i2": "INN0000000000000000002"}
    log.write_text(f"ts=2026-11-27T08:00:00Z event=send worker=w1 campaign=c1 step=1 email=old@x.co msg_id={ids['o1']}\n"
                   f"ts=2026-11-28T10:05:00Z event=send worker=w1 campaign=c1 step=1 email=in@x.co msg_id={ids['i1']}\n"
                   f"ts=2026-11-28T10:06:00Z event=send worker=w2 campaign=c1 step=1 email=in@x.co msg_id={ids['i2']}\n")
    export.write_text(_sendgrid("old@x.co", "2026-11-27T08:00:01Z", ids["o1"])
                      + _sendgrid("in@x.co", "2026-11-28T10:05:01Z", ids["i1"])
                      + _sendgrid("in@x.co", "2026-11-28T10:06:01Z", ids["i2"]))
    whole = _window(cli, log, "--provider-export", export)["reconciliation"]
    cut = _window(cli, log, "--since", "1h", "--provider-export", export)["reconciliation"]
    assert whole["provider_sends_not_in_log"]["count"] == 0 and cut["provider_sends_not_in_log"]["count"] == 0
    assert whole["log_sends_not_at_provider"]["count"] == 0 and cut["log_sends_not_at_provider"]["count"] == 0
    # the export's send to old@ a day earlier is outside the window: it is not taken for one the log misses
    assert [s["recipient"] for s in cut["provider_confirmed_duplicates"]["sample"]] == ["in@x.co"]
