"""Key names split into words: how a team's names are compared with the vocabulary's."""

from __future__ import annotations

import pytest

from forensics.ingest.vocabulary import by_name
from forensics.names import name_words


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
