"""Provider readers: which events prove a send, one row per (message, recipient), ids and times normalised."""

from __future__ import annotations

import datetime as dt
import gzip
import json
import shutil
from pathlib import Path

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from forensics.errors import ConfigError, InputError
from forensics.providers import read_events

FIX = Path(__file__).parent / "fixtures" / "providers"
UTC = dt.timezone.utc


def sends(path, **kw) -> dict:
    """{(msg_id, recipient): row} of the collapsed rows."""
    rows = read_events([str(path)], **kw).sends().to_pylist()
    return {(r["msg_id"], r["recipient"]): r for r in rows}


def test_sendgrid_jsonl_batches_collapse_delivered_onto_processed_by_message_prefix():
    rows = sends(FIX / "sendgrid-events.jsonl")
    jane = rows[("AAAAAAAAAAAAAAAAAAAAAA", "jane@acme.com")]
    assert jane["verdict"] == "sent" and jane["event_type"] == "processed"
    assert jane["sent_at"] == dt.datetime.fromtimestamp(1764400000, UTC)
    assert (jane["campaign"], jane["step"], jane["candidate"]) == ("c-42", "1", "L-1")
    # same X-Message-Id prefix, another recipient: a separate row; nested unique_args read too
    assert rows[("AAAAAAAAAAAAAAAAAAAAAA", "bob@acme.com")]["campaign"] == "c-42"
    assert rows[("BBBBBBBBBBBBBBBBBBBBBB", "jane@acme.com")]["verdict"] == "sent"


@pytest.mark.slow
def test_sendgrid_dropped_is_not_sent_and_idless_bounce_joins_its_send_via_smtp_id():
    rows = sends(FIX / "sendgrid-events.jsonl")
    assert rows[("CCCC@ismtpd.sendgrid.net", "carol@acme.com")]["verdict"] == "not_sent"
    dave = [k for k in rows if k[1] == "dave@acme.com"]
    assert dave == [("DDDD", "dave@acme.com")]


def test_truncated_jsonl_line_is_counted_malformed_with_its_line():
    read = read_events([str(FIX / "sendgrid-events.jsonl")])
    assert [(m["source_line"], m["reason"]) for m in read.malformed] == [(8, "not valid JSON")]


def test_open_alone_is_not_a_send_event():
    rows = sends(FIX / "opens-only.json")
    assert [r["verdict"] for r in rows.values()] == ["not_a_send_event"]


def test_ses_firehose_explodes_destinations_and_reads_array_tags():
    rows = sends(FIX / "ses-firehose.jsonl")
    assert {k for k, r in rows.items() if r["verdict"] == "sent"} == {
        ("0100-aaa-000000", "ann@example.org"), ("0100-aaa-000000", "ben@example.org")}
    assert rows[("0100-aaa-000000", "ann@example.org")]["candidate"] == "K-7"
    assert rows[("0100-bbb-000000", "cat@example.org")]["verdict"] == "not_sent"


def test_sns_envelope_message_string_is_unwrapped_and_confirmations_are_not_sends():
    assert sends(FIX / "sns-envelope-send.json")[("0100-ccc-000000", "dan@example.org")]["verdict"] == "sent"
    events = read_events([str(FIX / "sns-subscription-confirmation.json")]).events.to_pylist()
    assert [(e["event_type"], e["verdict"]) for e in events] == [("SubscriptionConfirmation", "not_a_send_event")]


def test_mailgun_events_page_float_timestamps_and_user_variables():
    rows = sends(FIX / "mailgun-events-page.json")
    fay = rows[("20261129.1.ABC@mg.example.com", "fay@example.com")]
    assert fay["sent_at"] == dt.datetime(2025, 11, 29, 7, 6, 40, 123456, tzinfo=UTC)
    assert (fay["campaign"], fay["step"], fay["candidate"]) == ("c-5", "1", "77")
    assert rows[("20261129.2.DEF@mg.example.com", "gus@example.com")]["verdict"] == "not_sent"


def test_postmark_outbound_seven_fraction_digits_and_offset_become_utc():
    rows = sends(FIX / "postmark-outbound.json")
    hal = rows[("11111111-2222-3333-4444-555555555555", "hal@example.com")]
    assert hal["sent_at"] == dt.datetime(2026, 11, 28, 15, 0, 0, 123456, tzinfo=UTC)
    assert ("11111111-2222-3333-4444-555555555555", "ida@example.com") in rows


@pytest.mark.slow
def test_resend_display_names_and_brevo_custom_header():
    assert set(sends(FIX / "resend-sent.json")) == {("rs-1", "jo@example.com"), ("rs-1", "kim@example.com")}
    lee = sends(FIX / "brevo-request.json")[("20261128.1@smtp-relay.mailin.fr", "lee@example.com")]
    assert (lee["campaign"], lee["candidate"]) == ("c-6", "L-9")
    assert lee["sent_at"] == dt.datetime.fromtimestamp(1764324000, UTC)


def test_postfix_content_filter_handoff_not_counted_twice_and_year_rollover_in_tz():
    rows = sends(FIX / "maillog", year=2025, tz="Europe/Berlin")
    assert rows[("out-1@app.example", "max@remote.example")]["verdict"] == "sent"
    assert rows[("out-1@app.example", "max@remote.example")]["sent_at"] == dt.datetime(2025, 12, 31, 23, 0, 3, tzinfo=UTC)
    assert rows[("out-1@app.example", "nia@remote.example")]["verdict"] == "not_sent"
    events = read_events([str(FIX / "maillog")], year=2025).events.to_pylist()
    assert sorted(e["verdict"] for e in events if e["recipient"] == "max@remote.example") == ["not_a_send_event", "sent"]


@pytest.mark.slow
def test_generic_csv_with_map_and_sendgrid_activity_csv_by_aliases():
    mapping = {"recipient": "To", "msg_id": "Message ID", "sent_at": "Sent", "campaign": "Campaign"}
    rows = sends(FIX / "generic.csv", provider="csv", mapping=mapping)
    assert set(rows) == {("g-1@app", "oli@example.com"), ("g-2", "pam@example.com"), ("g-3", "oli@example.com")}
    assert rows[("g-3", "oli@example.com")]["sent_at"] == dt.datetime(2026, 11, 28, 11, tzinfo=UTC)
    activity = sends(FIX / "sendgrid-activity.csv")
    assert activity[("XXXXXXXXXXXXXXXXXXXXXX", "quinn@example.com")]["verdict"] == "sent"
    assert activity[("YYYYYYYYYYYYYYYYYYYYYY", "rae@example.com")]["verdict"] == "not_sent"


@pytest.mark.slow
def test_folders_globs_and_gzip(tmp_path):
    (tmp_path / "sub").mkdir()
    with gzip.open(tmp_path / "sub" / "ses.jsonl.gz", "wb") as out:
        out.write((FIX / "ses-firehose.jsonl").read_bytes())
    shutil.copy(FIX / "resend-sent.json", tmp_path / "resend.json")
    (tmp_path / "README.md").write_text("notes")
    read = read_events([str(tmp_path)])
    assert set(read.files.values()) == {"ses", "resend"}
    assert len(read_events([str(tmp_path / "*.json")]).files) == 1


def test_exports_are_found_and_refused_like_log_inputs(tmp_path):
    # one path expansion (forensics.ingest.sources) for logs and exports: same rules, same messages
    (tmp_path / "2026-11-28").mkdir()
    shutil.copy(FIX / "resend-sent.json", tmp_path / "2026-11-28" / "resend.json")
    assert set(read_events([str(tmp_path / "2026-*")]).files.values()) == {"resend"}
    blob = gzip.compress((FIX / "ses-firehose.jsonl").read_bytes())
    (tmp_path / "ses.jsonl.gz").write_bytes(blob[:-8] + bytes(8))  # a damaged CRC and length
    (tmp_path / "plain.json.gz").write_bytes(b"[]")
    (tmp_path / "empty").mkdir()
    for name, message in [("nope.json", "nope.json: no such file or folder"),
                          ("*.csv", "*.csv: no file matches this pattern"),
                          ("empty", "empty: folder has no export files"),
                          ("ses.jsonl.gz", "ses.jsonl.gz: unreadable gzip file (CRC check failed"),
                          ("plain.json.gz", "plain.json.gz: unreadable gzip file (not in gzip format)")]:
        with pytest.raises(InputError) as err:
            read_events([str(tmp_path / name)])
        assert str(err.value).startswith(f"{tmp_path}/{message}"), str(err.value)


def test_custom_metadata_keys(tmp_path):
    from forensics.providers import Keys

    path = tmp_path / "e.json"
    path.write_text(json.dumps([{"email": "a@b.c", "event": "processed", "sg_message_id": "P.x", "timestamp": 1,
                                 "cmp": "c-1", "seq": "3", "who": "L-1"}]))
    row = read_events([str(path)], keys=Keys(("cmp",), ("seq",), ("who",))).sends().to_pylist()[0]
    assert (row["campaign"], row["step"], row["candidate"]) == ("c-1", "3", "L-1")


@pytest.mark.parametrize("name,kw,message", [
    ("truncated.json", {}, "truncated JSON"),
    ("resend-sent.json", {"provider": "ses"}, "no ses events found"),
    ("odd-layout.csv", {}, "unknown CSV layout"),
    ("generic.csv", {"provider": "csv"}, "needs --map"),
])
def test_bad_inputs_raise_one_line_errors(name, kw, message):
    with pytest.raises(InputError if "map" not in message else ConfigError) as err:
        read_events([str(FIX / name)], **kw)
    assert message in str(err.value) and "\n" not in str(err.value)


def test_unknown_timezone_is_a_config_error():
    with pytest.raises(ConfigError, match="unknown time zone"):
        read_events([str(FIX / "maillog")], tz="Mars/Olympus")


# ----------------------------------------------------------------- any bytes: rows or counted skips, never a crash

_settings = settings(max_examples=40, deadline=None, suppress_health_check=[HealthCheck.function_scoped_fixture])


def _read_or_input_error(path, **kw):
    try:
        read = read_events([str(path)], **kw)
    except (InputError, ConfigError) as exc:
        assert "\n" not in str(exc)
        return None
    assert set(read.events.column_names) >= {"verdict", "msg_id", "recipient"}
    assert set(read.events.column("verdict").to_pylist()) <= {"sent", "not_sent", "not_a_send_event"}
    read.sends()
    return read


@pytest.mark.slow
@_settings
@given(data=st.binary(max_size=300))
def test_any_bytes_never_crash_autodetect(tmp_path, data):
    path = tmp_path / "blob"
    path.write_bytes(data)
    _read_or_input_error(path)


json_values = st.recursive(st.none() | st.booleans() | st.integers() | st.floats(allow_nan=False) | st.text(max_size=8),
                           lambda kids: st.lists(kids, max_size=3) | st.dictionaries(st.text(max_size=6), kids, max_size=4),
                           max_leaves=12)


@pytest.mark.slow
@_settings
@given(provider=st.sampled_from(["sendgrid", "mailgun", "ses", "postmark", "resend", "brevo"]),
       lines=st.lists(json_values.map(json.dumps) | st.text(max_size=20), min_size=1, max_size=5))
def test_any_json_lines_never_crash_each_provider(tmp_path, provider, lines):
    path = tmp_path / "events.jsonl"
    path.write_text("\n".join(lines + ['{"event": "x"}']), encoding="utf-8")
    _read_or_input_error(path, provider=provider)


@pytest.mark.slow
@_settings
@given(lines=st.lists(st.text(max_size=60) | st.sampled_from([
    "Jan  1 00:00:03 mx postfix/smtp[1]: ABCDE1: to=<a@b>, relay=x[1.2.3.4]:25, delay=1, dsn=2.0.0, status=sent (ok)",
    "Feb 30 99:99:99 mx postfix/cleanup[1]: ABCDE1: message-id=<m@x>"]), min_size=1, max_size=6))
def test_any_postfix_lines_never_crash(tmp_path, lines):
    path = tmp_path / "maillog"
    path.write_text("\n".join(["Mar  1 00:00:00 mx postfix/qmgr[2]: ZZZZZ9: removed"] + lines), encoding="utf-8")
    _read_or_input_error(path, provider="postfix", year=2026)


@pytest.mark.slow
@_settings
@given(rows=st.lists(st.lists(st.text(max_size=10), min_size=2, max_size=2), max_size=5))
def test_any_csv_never_crashes(tmp_path, rows):
    import csv

    path = tmp_path / "x.csv"
    with path.open("w", newline="") as out:
        csv.writer(out).writerows([["To", "Message ID"]] + rows)
    _read_or_input_error(path, provider="csv", mapping={"recipient": "To", "msg_id": "Message ID"})


# ----------------------------------------------------------------- one parse per event, same rows on every path

_meta = st.dictionaries(st.sampled_from(["campaign", "campaign_id", "step", "lead_id", "a.b", 'q"k']),
                        st.none() | st.sampled_from(["", "c-1", "c-2", "2"]) | st.integers(0, 3), max_size=3)
_sendgrid_event = st.fixed_dictionaries(
    {"email": st.sampled_from(["Jane@Acme.com", " bob@acme.com", "Carol <carol@acme.com>", ""]),
     "event": st.sampled_from(["processed", "delivered", "dropped", "open", "bounce"]),
     "timestamp": st.sampled_from([1764400000, 1764400000123, 1764400000.5, "2026-11-28T15:00:00.1234567+01:00"])},
    optional={"sg_message_id": st.sampled_from(["M1.filter1.1", "M2.filter1.1", "filter0001.x", "", "M1"]),
              "smtp-id": st.sampled_from(["<M1@ismtpd>", "<M2@ismtpd>"]),
              "unique_args": _meta, "custom_args": _meta, "campaign": st.sampled_from(["", "c-9"]),
              "a.b": st.just("dotted"), 'q"k': st.just("quoted")})


def _without_place(table) -> list:
    rows = [{k: v for k, v in r.items() if k not in ("source_file", "source_line")} for r in table.to_pylist()]
    return sorted(rows, key=lambda r: json.dumps(r, default=str, sort_keys=True))


@pytest.mark.slow
@settings(max_examples=15, deadline=None, suppress_health_check=[HealthCheck.function_scoped_fixture])
@given(events=st.lists(_sendgrid_event, min_size=1, max_size=8))
def test_json_lines_fast_path_reads_what_a_posted_batch_reads(tmp_path, events):
    """Object lines skip the unwrap step; the same events posted as one JSON array go through it."""
    from forensics.providers import Keys

    keys = Keys(("campaign", "a.b"), ("step", 'q"k'), ("lead_id",))
    lines, batch = tmp_path / "events.jsonl", tmp_path / "batch.json"
    lines.write_text("\n".join(json.dumps(e) for e in events) + "\n" + json.dumps(events[0]) + "\n")
    batch.write_text(json.dumps(events + events[:1]))
    by_line = read_events([str(lines)], provider="sendgrid", keys=keys)
    by_batch = read_events([str(batch)], provider="sendgrid", keys=keys)
    assert _without_place(by_line.events) == _without_place(by_batch.events)
    assert by_line.sends().num_rows == by_batch.sends().num_rows


def test_metadata_keys_are_literal_names_not_paths(tmp_path):
    from forensics.providers import Keys

    path = tmp_path / "e.jsonl"
    event = {"email": "a@b.c", "event": "processed", "sg_message_id": "P.x", "timestamp": 1,
             "a.b": "dotted", "a": {"b": "nested"}, 'q"k': "quoted", "unique_args": {"lead_id": ""}, "lead_id": "L-2"}
    path.write_text(json.dumps(event) + "\n" + json.dumps({**event, "sg_message_id": "Q.x"}) + "\n")
    rows = read_events([str(path)], keys=Keys(("a.b",), ('q"k',), ("lead_id",))).sends().to_pylist()
    # an empty value in the first place looked at falls through to the next one
    assert {(r["campaign"], r["step"], r["candidate"]) for r in rows} == {("dotted", "quoted", "L-2")}


# ----------------------------------------------------------------- a provider is chosen only on its own markers
# (issue 13 item 6) Reading a file as the wrong provider does not fail, it reconciles wrongly: SendGrid cuts
# message ids at the first '.', so a one-for-one CSV export read as SendGrid's matched nothing.

def _refusal(path, **kw) -> str:
    with pytest.raises(InputError) as err:
        read_events([str(path)], **kw)
    message = str(err.value)
    assert "\n" not in message
    return message


def test_a_csv_without_any_provider_columns_is_refused_saying_what_to_pass(tmp_path):
    path = tmp_path / "export.csv"
    path.write_text("email,message_id,timestamp\njo@example.com,m-1.a@app,2026-11-28T10:00:00Z\n")
    message = _refusal(path)
    assert message.startswith(f"{path}: unknown CSV layout, no provider's marker columns "
                              "(columns: email, message_id, timestamp); ")
    assert message.endswith("pass --provider csv --map recipient=COLUMN --map msg_id=COLUMN, "
                            "or --provider sendgrid for SendGrid's activity export")


def test_a_csv_with_canonical_names_is_generic_and_keeps_its_message_ids_whole(tmp_path):
    path = tmp_path / "export.csv"
    path.write_text("recipient,msg_id,sent_at,campaign,step\njo@example.com,m-1.a@app,2026-11-28T10:00:00Z,c-1,2\n")
    read = read_events([str(path)])
    assert read.files == {str(path): "csv"}
    row = read.sends().to_pylist()[0]
    assert (row["msg_id"], row["campaign"], row["step"]) == ("m-1.a@app", "c-1", "2")


def test_a_map_naming_present_columns_marks_the_csv_as_generic(tmp_path):
    path = tmp_path / "export.csv"
    path.write_text("email,message_id\njo@example.com,m-1.a@app\n")
    read = read_events([str(path)], mapping={"recipient": "email", "msg_id": "message_id"})
    assert [r["msg_id"] for r in read.sends().to_pylist()] == ["m-1.a@app"]


def test_sendgrid_activity_csv_is_told_by_its_own_columns(tmp_path):
    from forensics.providers import detect

    plain = tmp_path / "plain.csv"
    plain.write_text("message_id,email,status,timestamp\nm-1.a@app,a@b.c,delivered,2026-11-28\n")
    assert "unknown CSV layout" in _refusal(plain)  # the names SendGrid shares with everyone mark nothing
    both = tmp_path / "both.csv"
    both.write_text("recipient,msg_id,to_email,last_event_time\na@b.c,m1,a@b.c,2026-11-28\n")
    assert _refusal(both) == f"{both}: could be sendgrid or csv; pass --provider sendgrid or --provider csv"
    assert detect.csv_candidates(["message_id", "to_email", "status", "last_event_time"], {}) == ["sendgrid"]
    assert detect.csv_candidates(["sg_message_id", "email", "event"], {}) == ["sendgrid"]


# One minimal record per provider: the fields that are that provider's own, nothing else.
MARKERS = {
    "sendgrid": {"event": "processed", "sg_message_id": "M1.filter.1", "email": "a@b.c"},
    "mailgun": {"event-data": {"event": "accepted", "recipient": "a@b.c"}},
    "ses": {"eventType": "Send", "mail": {"messageId": "0100-a"}},
    "postmark": {"RecordType": "Delivery", "MessageID": "p-1", "Recipient": "a@b.c"},
    "resend": {"type": "email.sent", "data": {"email_id": "r-1", "to": ["a@b.c"]}},
    "brevo": {"event": "request", "message-id": "<b-1@relay>", "email": "a@b.c"},
}
# Keys that any export may carry: none of them, in any combination, names a provider.
_PLAIN_KEYS = ["email", "event", "timestamp", "recipient", "to", "status", "id", "message_id", "time",
               "subject", "campaign", "step", "type", "data", "Message", "Type", "mail", "date"]
_plain_values = st.none() | st.sampled_from(["processed", "delivered", "bounced", "Send", "x", "a@b.c"]) | \
    st.integers(0, 2 ** 40) | st.dictionaries(st.sampled_from(["id", "to"]), st.text(max_size=4), max_size=2)
_plain_records = st.dictionaries(st.sampled_from(_PLAIN_KEYS), _plain_values, min_size=1, max_size=8)


@pytest.mark.slow
@_settings
@given(records=st.lists(_plain_records, min_size=1, max_size=4), lines=st.booleans())
def test_records_without_any_provider_markers_are_refused_not_guessed(tmp_path, records, lines):
    path = tmp_path / ("events.jsonl" if lines else "events.json")
    path.write_text("\n".join(json.dumps(r) for r in records) + "\n" if lines else json.dumps(records))
    message = _refusal(path)
    assert "no provider's marker fields in its first records; pass --provider (sendgrid, mailgun, ses, postmark, " \
           "resend, brevo), or --provider jsonl --map recipient=FIELD --map msg_id=FIELD" in message


@pytest.mark.slow
@_settings
@given(provider=st.sampled_from(sorted(MARKERS)), extra=_plain_records, other=st.sampled_from(sorted(MARKERS)))
def test_each_provider_is_chosen_on_its_markers_and_a_second_claim_is_refused(tmp_path, provider, extra, other):
    record = {**{k: v for k, v in extra.items() if k not in ("email", "recipient")}, **MARKERS[provider]}
    alone = tmp_path / "alone.jsonl"
    alone.write_text(json.dumps(record) + "\n")
    assert read_events([str(alone)]).files == {str(alone): provider}
    canonical = tmp_path / "canonical.jsonl"
    canonical.write_text(json.dumps(record) + "\n" + json.dumps({**record, "recipient": "a@b.c", "msg_id": "m1"}) + "\n")
    assert _refusal(canonical) == f"{canonical}: could be {provider} or jsonl; pass --provider {provider} or --provider jsonl"
    if other != provider:
        mixed = tmp_path / "mixed.jsonl"
        mixed.write_text(json.dumps(record) + "\n" + json.dumps(MARKERS[other]) + "\n")
        assert f"could be {provider} or {other}; pass --provider {provider} or --provider {other}" in _refusal(mixed)


_PLAIN_COLUMNS = ["email", "Email", "message_id", "Message ID", "timestamp", "status", "event", "to", "date",
                  "subject", "campaign", "step", "id", "processed", "to_email"]


@pytest.mark.slow
@_settings
@given(columns=st.lists(st.sampled_from(_PLAIN_COLUMNS), min_size=1, max_size=6, unique_by=str.lower),
       cells=st.lists(st.text(alphabet="ab.@1-", max_size=6), min_size=6, max_size=6))
def test_csv_headers_without_provider_columns_are_refused_not_guessed(tmp_path, columns, cells):
    """Names every export uses (one Activity-feed name alone included) make no CSV SendGrid's."""
    import csv

    path = tmp_path / "export.csv"
    with path.open("w", newline="") as out:
        csv.writer(out).writerows([columns, cells[:len(columns)]])
    assert "unknown CSV layout, no provider's marker columns" in _refusal(path)


@pytest.mark.slow
def test_every_sample_provider_is_still_told_apart():
    sample = {"sendgrid-events.jsonl": "sendgrid", "mailgun-events-page.json": "mailgun", "ses-firehose.jsonl": "ses",
              "sns-envelope-send.json": "ses", "postmark-outbound.json": "postmark", "resend-sent.json": "resend",
              "brevo-request.json": "brevo", "maillog": "postfix", "sendgrid-activity.csv": "sendgrid"}
    assert {name: read_events([str(FIX / name)], year=2025).files[str(FIX / name)] for name in sample} == sample


# ----------------------------------------------------------------- --map keeps what it does not name

_rename = st.sampled_from(["", "Col A", "x_1"])  # "" keeps the column's own (canonical or key) name


@pytest.mark.slow
@_settings
@given(names=st.fixed_dictionaries({f: _rename for f in ("recipient", "msg_id", "sent_at", "campaign", "step")}),
       time_name=st.sampled_from(["sent_at", "timestamp", "date", "processed"]), lines=st.booleans())
def test_a_map_drops_no_field_the_export_names(tmp_path, names, time_name, lines):
    """Whatever subset of columns --map names, the others are still found by their names."""
    own = {"recipient": "recipient", "msg_id": "msg_id", "sent_at": time_name, "campaign": "campaign", "step": "step"}
    columns = {f: (f"{n} {f}" if n else own[f]) for f, n in names.items()}
    mapping = {f: columns[f] for f, n in names.items() if n}
    values = {"recipient": "jo@example.com", "msg_id": "m-1.a@app", "sent_at": "2026-11-28T10:00:00Z",
              "campaign": "c-1", "step": "2"}
    record = {columns[f]: v for f, v in values.items()}
    if lines:
        path = tmp_path / "export.jsonl"
        path.write_text(json.dumps(record) + "\n" + json.dumps(record) + "\n")
    else:
        path = tmp_path / "export.csv"
        path.write_text(",".join(record) + "\n" + ",".join(record.values()) + "\n")
    row = read_events([str(path)], provider="jsonl" if lines else "csv", mapping=mapping).sends().to_pylist()[0]
    assert (row["recipient"], row["msg_id"], row["campaign"], row["step"], row["verdict"]) == \
        ("jo@example.com", "m-1.a@app", "c-1", "2", "sent")
    assert row["sent_at"] == dt.datetime(2026, 11, 28, 10, tzinfo=UTC)


def test_jsonl_mapped_without_event_reads_every_record_as_a_send(tmp_path):
    path = tmp_path / "g.jsonl"
    path.write_text('{"to": "a@b.c", "id": "m1", "campaign": "c1"}\n{"to": "d@b.c", "id": "m2", "campaign": "c1"}\n')
    rows = read_events([str(path)], provider="jsonl", mapping={"recipient": "to", "msg_id": "id"}).sends().to_pylist()
    assert sorted((r["msg_id"], r["verdict"], r["campaign"]) for r in rows) == [("m1", "sent", "c1"), ("m2", "sent", "c1")]


def test_jsonl_mapped_campaign_is_used(tmp_path):
    path = tmp_path / "g.jsonl"
    path.write_text('{"to": "a@b.c", "id": "m1", "Camp": "c9", "campaign": "no"}\n')
    mapping = {"recipient": "to", "msg_id": "id", "campaign": "Camp"}
    assert read_events([str(path)], provider="jsonl", mapping=mapping).sends().to_pylist()[0]["campaign"] == "c9"


def test_a_map_for_a_provider_that_takes_none_is_refused():
    with pytest.raises(ConfigError, match="--map describes csv/jsonl exports and SendGrid's activity CSV, not ses"):
        read_events([str(FIX / "ses-firehose.jsonl")], provider="ses", mapping={"campaign": "x"})


def test_address_variants_in_an_export_are_one_recipient(tmp_path):
    export = tmp_path / "export.csv"
    export.write_text("To,Message ID\n" + "".join(f'"{to}",<m{n}@x>\n' for n, to in enumerate(
        ["Jane Doe <Jane@Acme.com>", "jane@acme.com\t", "\u00a0jane@acme.com", "JANE@ACME.COM\u3000"])),
        encoding="utf-8")
    read = read_events([str(export)], provider="csv", mapping={"recipient": "To", "msg_id": "Message ID"})
    assert set(read.sends().column("recipient").to_pylist()) == {"jane@acme.com"}


@pytest.mark.slow
@pytest.mark.parametrize("provider, event, expected", [
    ("sendgrid", {"event": "processed", "email": "a@b.c", "sg_message_id": "S1.filter", "sg_event_id": "e",
                  "sg_template_id": "d-123", "timestamp": 1764400000}, (None, "d-123")),
    ("mailgun", {"event-data": {"event": "accepted", "recipient": "a@b.c", "timestamp": 1764400000,
                                "message": {"headers": {"message-id": "m1@mg", "subject": "Hello\n  there"}}}},
     ("Hello there", None)),
    ("ses", {"eventType": "Send", "mail": {"messageId": "s1", "destination": ["a@b.c"], "timestamp": "2026-11-28T10:00:00Z",
                                           "commonHeaders": {"subject": "Your trial"}}, "send": {}}, ("Your trial", None)),
    ("postmark", {"RecordType": "Bounce", "MessageID": "p1", "Email": "a@b.c", "BouncedAt": "2026-11-28T10:00:00Z",
                  "Subject": " Welcome "}, ("Welcome", None)),
    ("resend", {"type": "email.sent", "created_at": "2026-11-28T10:00:00Z",
                "data": {"email_id": "r1", "to": ["a@b.c"], "subject": "Hi"}}, ("Hi", None)),
    ("brevo", {"event": "request", "email": "a@b.c", "message-id": "<b1@relay>", "subject": "Hey", "template_id": 12,
               "ts_epoch": 1764400000000}, ("Hey", "12")),
])
def test_each_provider_keeps_the_subject_and_template_that_group_sends_without_metadata(tmp_path, provider, event,
                                                                                          expected):
    path = tmp_path / f"{provider}.json"
    path.write_text(json.dumps(event))
    row = read_events([str(path)]).sends().to_pylist()[0]
    assert (row["subject"], row["template"]) == expected


@pytest.mark.slow
def test_a_csv_subject_or_template_column_is_found_by_name_or_mapped(tmp_path):
    path = tmp_path / "sent.csv"
    path.write_text("recipient,msg_id,Subject,Template_Name,Other\na@b.c,m1,Hi,welcome-1,x\n")
    row = read_events([str(path)]).sends().to_pylist()[0]
    assert (row["subject"], row["template"]) == ("Hi", "welcome-1")
    mapped = read_events([str(path)], mapping={"template": "Other"}).sends().to_pylist()[0]
    assert mapped["template"] == "x"
