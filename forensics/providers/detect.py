"""Which provider wrote a file: chosen only on that provider's own marker fields (`--provider` overrides).

Each rule below looks for fields or values that one provider writes and the others do not. A file
that no rule claims, or that two rules claim, is refused with the candidates named: reading it as
the wrong provider would not fail, it would reconcile wrongly (SendGrid cuts message ids at '.').
Generic CSV/JSON Lines is a candidate only when its recipient and message id columns are there by
their canonical names `recipient` and `msg_id` or as `--map` names them; otherwise it is read only
when asked for with `--provider csv|jsonl`.
"""

from __future__ import annotations

import re

from forensics.errors import InputError
from forensics.providers import generic

PROVIDERS = ("sendgrid", "mailgun", "ses", "postmark", "resend", "brevo", "postfix", "csv", "jsonl")
DETECTED = PROVIDERS[:7]  # the providers with marker fields; csv/jsonl are your own format
_POSTFIX_LINE = re.compile(r"postfix(?:-[\w.-]+)?/[\w/-]+\[\d+\]: ")
_SNS_TYPES = {"Notification", "SubscriptionConfirmation", "UnsubscribeConfirmation"}
_SES_KINDS = {"Send", "Delivery", "Bounce", "Complaint", "Reject", "Open", "Click", "Rendering Failure",
              "RenderingFailure", "DeliveryDelay", "Subscription", "AmazonSnsSubscriptionSucceeded"}
_MAILGUN_LEGACY = {"Message-Id", "message-headers", "X-Mailgun-Sid", "X-Mailgun-Variables", "token", "code"}
_SENDGRID_IDS = {"sg_event_id", "sg_message_id", "smtp-id"}
# SendGrid's Email Activity export: its column names are not published (docs/sentlog.md), so a CSV is
# SendGrid's only with a SendGrid id column or two of the Activity API's own field names.
SENDGRID_ACTIVITY_FIELDS = {"to_email", "from_email", "last_event_time", "opens_count", "clicks_count",
                            "api_key_id", "asm_group_id", "recv_message_id", "outbound_ip", "outbound_ip_type",
                            "originating_ip", "mx_server", "teammate", "marketing_campaign_id"}
_SCANNED = 20  # records looked at: each provider any of them names is a candidate, so a mixed head is refused


def text_candidates(text: str) -> list[str]:
    return ["postfix"] if _POSTFIX_LINE.search(text[:20_000]) else []


def csv_candidates(columns: list[str], mapping: dict[str, str]) -> list[str]:
    """sendgrid for its activity export's columns; csv when the recipient and msg_id columns are there by
    their canonical names or as --map names them."""
    names = {c.strip().lower() for c in columns}
    found = []
    if names & _SENDGRID_IDS or len(names & SENDGRID_ACTIVITY_FIELDS) >= 2:
        found.append("sendgrid")
    if generic.names_present(mapping, columns):
        found.append("csv")
    return found


def json_candidates(values, mapping: dict[str, str]) -> list[str]:
    """The providers whose markers the first records carry (a batch's elements are records)."""
    found: list[str] = []
    for record in first_records(values):
        for name in _json_record_candidates(record, mapping):
            if name not in found:
                found.append(name)
    return found


def first_records(values):
    records = []
    for value in values:
        batch = value if isinstance(value, list) else [value]
        records += [v for v in batch[:_SCANNED] if isinstance(v, dict)]
        if len(records) >= _SCANNED:
            break
    return records[:_SCANNED]


def _json_record_candidates(record: dict, mapping: dict[str, str]) -> list[str]:
    keys = set(record)
    found = [name for name, rule in _RULES if rule(record, keys)]
    if generic.names_present(mapping, keys, fold=False):
        found.append("jsonl")  # beside a provider's own markers too: then the file is ambiguous
    return found


def _is_ses(v, keys) -> bool:
    kind = v.get("eventType", v.get("notificationType"))
    if isinstance(kind, str) and (isinstance(v.get("mail"), dict) or kind in _SES_KINDS):
        return True
    if str(v.get("Type")) in _SNS_TYPES and ("TopicArn" in keys or {"Message", "MessageId"} <= keys):
        return True
    records = v.get("Records")
    return isinstance(records, list) and bool(records) and isinstance(records[0], dict) and "Sns" in records[0]


def _is_mailgun(v, keys) -> bool:
    if isinstance(v.get("event-data"), dict) or {"items", "paging"} <= keys:
        return True
    message = v.get("message")
    if "event" in keys and isinstance(message, dict) and isinstance(message.get("headers"), dict):
        return True  # an Events API item
    # Legacy webhook form posts name the address "recipient" (SendGrid and Brevo say "email").
    return {"event", "recipient"} <= keys and "email" not in keys and bool(keys & _MAILGUN_LEGACY)


def _is_postmark(v, keys) -> bool:
    if "RecordType" in keys or {"Messages", "TotalCount"} <= keys:
        return True
    return "MessageID" in keys and bool(keys & {"Recipients", "Status", "ReceivedAt", "MessageStream"})


def _is_brevo(v, keys) -> bool:
    return "event" in keys and ("message-id" in keys or bool(keys & {"ts_epoch", "X-Mailin-custom"}))


_RULES = (
    ("sendgrid", lambda v, k: "event" in k and bool(k & _SENDGRID_IDS)),
    ("mailgun", _is_mailgun),
    ("ses", _is_ses),
    ("postmark", _is_postmark),
    ("resend", lambda v, k: str(v.get("type", "")).startswith("email.") and isinstance(v.get("data"), dict)),
    ("brevo", _is_brevo),
)


def choose(path: str, candidates: list[str], kind: str, columns: list[str] | None = None) -> str:
    """The one candidate, or an InputError (one line) naming the candidates and what to pass."""
    if len(candidates) == 1:
        return candidates[0]
    if candidates:
        options = " or ".join(f"--provider {c}" for c in candidates)
        raise InputError(f"{path}: could be {' or '.join(candidates)}; pass {options}")
    if kind == "csv":
        raise InputError(f"{path}: unknown CSV layout, no provider's marker columns (columns: "
                         f"{', '.join(columns[:12])}); pass --provider csv --map recipient=COLUMN "
                         "--map msg_id=COLUMN, or --provider sendgrid for SendGrid's activity export")
    if kind in ("json", "jsonl"):
        json_providers = ", ".join(p for p in DETECTED if p != "postfix")
        raise InputError(f"{path}: no provider's marker fields in its first records; pass --provider "
                         f"({json_providers}), or --provider jsonl --map recipient=FIELD --map msg_id=FIELD")
    raise InputError(f"{path}: cannot tell which provider wrote this file (not JSON or CSV, and no Postfix "
                     "maillog line in its first 20 kB); pass --provider postfix if it is a maillog")
