"""A provider's export among the LOGS is told apart from the logs, and a log that merely looks like one is not."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from forensics.ingest import sources
from forensics.providers.files import provider_of

FIX = Path(__file__).resolve().parent / "fixtures" / "providers"
SAMPLES = Path(__file__).resolve().parent.parent / "sample_logs"


@pytest.mark.parametrize("name,provider", [
    ("postmark-outbound.json", "postmark"), ("mailgun-events-page.json", "mailgun"), ("ses-firehose.jsonl", "ses"),
    ("sendgrid-events.jsonl", "sendgrid"), ("sendgrid-activity.csv", "sendgrid"), ("resend-sent.json", "resend"),
    ("brevo-request.json", "brevo")])
def test_a_providers_export_is_told_by_its_own_fields(name, provider):
    assert provider_of(sources.source_of(str(FIX / name))) == provider


@pytest.mark.parametrize("name", ["maillog", "generic.csv", "truncated.json"])
def test_a_maillog_your_own_csv_and_a_broken_document_stay_logs(name):
    assert provider_of(sources.source_of(str(FIX / name))) is None


def test_the_sample_logs_stay_logs():
    assert {provider_of(s) for s in sources.resolve([str(SAMPLES / "mixed"), str(SAMPLES / "retry")])} == {None}


def test_an_app_log_with_a_providers_key_names_stays_a_log(tmp_path):
    """Brevo's markers are `event` beside `message-id`, which an app's own log may use too: its sends keep it a log."""
    records = [{"ts": "2026-11-28T09:00:00Z", "event": "sent", "email": "a@x.co", "message-id": f"<m{n}@app>"}
               for n in range(3)]
    log = tmp_path / "app.jsonl"
    log.write_text("".join(json.dumps(r) + "\n" for r in records), encoding="utf-8")
    assert provider_of(sources.source_of(str(log))) is None
