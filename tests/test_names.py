"""forensics.names, forensics.providers.columns and the log vocabulary: fields found by their name's words and
values' shape."""

from __future__ import annotations

import pytest

from forensics.ingest.vocabulary import by_name
from forensics.names import field_of, name_words
from forensics.providers import columns


@pytest.mark.parametrize("key,words", [
    ("Sent At", ("sent", "at")), ("sentAt", ("sent", "at")), ("sent_at", ("sent", "at")), ("sent-at", ("sent", "at")),
    ("mail.sentAt", ("mail", "sent", "at")), ("HTTPStatus", ("http", "status")), ("step2Name", ("step", "2", "name")),
    ("", ()),
])
def test_every_spelling_of_a_name_splits_into_the_same_words(key, words):
    assert name_words(key) == words


@pytest.mark.parametrize("key,field", [
    ("Sent At", "sent_at"), ("sentAt", "sent_at"), ("sent_time", "sent_at"), ("Date Sent", "sent_at"),
    ("ReceivedAt", "sent_at"), ("timestamp", "sent_at"), ("mail.sentAt", "sent_at"),
    ("Campaign Name", "campaign"), ("campaignId", "campaign"),
    ("sequence_step", "step"), ("seq_step", "step"), ("Step No", "step"),
    ("lead_id", "candidate"), ("candidateId", "candidate"),
    # other events' times, counts and kinds are not the field their head word suggests
    ("opened_at", None), ("bounce_time", None), ("campaign_type", None), ("step_count", None), ("Message ID", None),
    ("Tag", None),
])
def test_a_name_means_the_send_field_its_words_say(key, field):
    assert field_of(key) == field


def test_columns_are_read_by_words_then_a_time_by_its_values_and_two_that_fit_are_no_answer():
    found = {"recipient": ("To", "--map"), "msg_id": ("Message ID", "--map")}
    samples = {"Received": ["2026-11-28 10:00:00", ""], "Opens": ["2", "3"]}
    reading = columns.infer(["To", "Message ID", "Campaign Name", "seq_step", "Received", "Opens"], found,
                            lambda names: {n: samples[n] for n in names if n in samples})
    assert reading["campaign"] == ("Campaign Name", "its name's words")
    assert reading["step"] == ("seq_step", "its name's words")
    assert reading["sent_at"] == ("Received", "its values (times)")
    assert "sent_at ← Received (its values (times))" in columns.described(reading)
    twice = columns.infer(["Sent At", "sentTime"], {}, lambda names: {})
    assert twice["sent_at"] == ("", "ambiguous: Sent At, sentTime")
    assert columns.described(twice) == ["sent_at: ambiguous: Sent At, sentTime; pass --map sent_at=COLUMN"]



@pytest.mark.parametrize("key,words", [
    ("sendgrid_message_id", ("sendgrid", "message", "id")),
    ("providerMessageId", ("provider", "message", "id")),
    ("email.to.address", ("email", "to", "address")),
    ("context.recipient_email", ("context", "recipient", "email")),
    ("stepIndex", ("step", "index")),
    ("x-smtp-id", ("x", "smtp", "id")),
    ("@timestamp", ("timestamp",)),
    ("HTTPStatus", ("http", "status")),
])
def test_keys_split_into_words_whatever_their_case_style(key, words):
    assert name_words(key) == words


@pytest.mark.parametrize("key,canon,named", [
    ("sendgrid_message_id", "msg_id", True), ("providerMessageId", "msg_id", True),
    ("email.to.address", "recipient", True), ("email.from.address", "recipient", False),
    ("sender_email", "recipient", False), ("reply_to", "recipient", False),
    ("stepIndex", "step", True), ("seq", "step", False), ("request_id", "msg_id", False),
])
def test_a_key_is_named_like_a_field_only_by_all_the_words_of_one_group(key, canon, named):
    assert by_name(key, canon) is named
