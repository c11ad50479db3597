"""Which provider wrote a file: sniffed from the first record, `--provider` overrides."""

from __future__ import annotations

import re

PROVIDERS = ("sendgrid", "mailgun", "ses", "postmark", "resend", "brevo", "postfix", "csv", "jsonl")
_POSTFIX_LINE = re.compile(r"postfix(?:-[\w.-]+)?/[\w/-]+\[\d+\]: ")
_SNS_TYPES = {"Notification", "SubscriptionConfirmation", "UnsubscribeConfirmation"}
_BREVO_EVENTS = {"request", "hard_bounce", "soft_bounce", "invalid_email", "unique_opened", "proxy_open",
                 "unique_proxy_open", "error"}


def detect_text(text: str) -> str | None:
    head = text[:20_000]
    return "postfix" if _POSTFIX_LINE.search(head) else None


def detect_json(value) -> str | None:
    """Guess the provider from one decoded JSON value (object or batch)."""
    if isinstance(value, list):
        return detect_json(value[0]) if value else None
    if not isinstance(value, dict):
        return None
    keys = set(value)
    for name, rule in _RULES:
        if rule(value, keys):
            return name
    return None


def _is_ses(v, keys) -> bool:
    if "eventType" in keys or "notificationType" in keys:
        return True
    if v.get("Type") in _SNS_TYPES and ("TopicArn" in keys or "Message" in keys):
        return True
    records = v.get("Records")
    return isinstance(records, list) and bool(records) and isinstance(records[0], dict) and "Sns" in records[0]


def _is_mailgun(v, keys) -> bool:
    if "event-data" in keys or ("items" in keys and "paging" in keys):
        return True
    legacy = {"Message-Id", "message-headers", "X-Mailgun-Sid", "token"}
    # Mailgun names the address "recipient"; SendGrid and Brevo call it "email".
    return bool(keys & legacy) or ({"recipient", "event"} <= keys and "email" not in keys)


def _is_brevo(v, keys) -> bool:
    return "ts_epoch" in keys or "X-Mailin-custom" in keys or (
        "message-id" in keys and "email" in keys and v.get("event") in _BREVO_EVENTS | {"delivered", "blocked"})


_RULES = (
    ("ses", _is_ses),
    ("postmark", lambda v, k: "RecordType" in k or ("Messages" in k and "TotalCount" in k) or "MessageID" in k),
    ("resend", lambda v, k: str(v.get("type", "")).startswith("email.") and isinstance(v.get("data"), dict)),
    ("sendgrid", lambda v, k: bool(k & {"sg_event_id", "sg_message_id", "smtp-id"})),
    ("mailgun", _is_mailgun),
    ("brevo", _is_brevo),
    ("sendgrid", lambda v, k: {"event", "email", "timestamp"} <= k),
)
