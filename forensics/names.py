"""Field names by meaning: a column or key split into its words, and the words each send field is named by.

Self-contained (standard library only) so every reader can share it: a provider export's columns here, a
log's keys later. A name is split the same way whatever its spelling, so `Sent At`, `sentAt`, `sent_at`,
`sent-at` and `mail.sentAt` all read as the words ("sent", "at") (the last only as its last part's):

    >>> name_words("Sent At"), name_words("sentAt"), name_words("sequence_step"), name_words("HTTPStatus")
    (('sent', 'at'), ('sent', 'at'), ('sequence', 'step'), ('http', 'status'))

A field is named by a HEAD word (`step`, `campaign`, a time word) and, where the head alone is ambiguous,
a qualifier (`sent` in `sent_time`): `field_of("Campaign Name")` is "campaign", `field_of("opened_at")` is None.
"""

from __future__ import annotations

import re

# lowerUpper, UPPERUpperlower, letter→digit and digit→letter boundaries split a camelCase part into words
_CAMEL = re.compile(r"[A-Z]+(?=[A-Z][a-z])|[A-Z]?[a-z]+|[A-Z]+|[0-9]+")
_SEPARATORS = re.compile(r"[^A-Za-z0-9]+")

TIME_WORDS = frozenset({"at", "time", "timestamp", "ts", "date", "datetime", "on", "when"})
SEND_WORDS = frozenset({"sent", "send", "sending", "processed", "delivered", "received", "queued", "submitted",
                        "accepted", "event", "created", "dispatched", "mailed"})
# Words that make a name something else than the field its head word suggests (a count, a kind, a label).
_NOT_THE_VALUE = frozenset({"count", "total", "type", "status", "url", "description", "desc"})
_HEADS = {
    "campaign": frozenset({"campaign"}),
    "step": frozenset({"step"}),
    "candidate": frozenset({"candidate", "lead", "prospect", "contact"}),
}
# Words that may stand before "step" in a step's name ("sequence_step", "seq_step", "campaign_step").
_STEP_PREFIXES = frozenset({"sequence", "seq", "campaign", "email", "mail", "cadence", "current"})
_ALONE_TIME_WORDS = frozenset({"time", "timestamp", "ts", "date", "datetime"})
_ID_WORDS = frozenset({"id", "key", "ref", "uid", "number", "no", "num", "name", "label", "index", "idx"})


def name_words(key: str) -> tuple[str, ...]:
    """The lower-case words of a name: snake_case, kebab-case, camelCase, spaces and dots all split."""
    words: list[str] = []
    for part in _SEPARATORS.split(key or ""):
        words += [w.lower() for w in _CAMEL.findall(part)]
    return tuple(words)


def last_part_words(key: str) -> tuple[str, ...]:
    """The words of a dotted key's last part (`mail.sentAt` → ("sent", "at")): what a nested key names."""
    return name_words(str(key).rsplit(".", 1)[-1])


def is_time_name(words: tuple[str, ...]) -> bool:
    """A send time: a time word alone (`timestamp`, `date`), or with a send word (`sent_at`, `sentTime`,
    `date_sent`, `ReceivedAt`). `opened_at` and `bounce_time` are other events' times."""
    if not words or not any(w in TIME_WORDS for w in words):
        return words in (("sent",), ("processed",))
    rest = [w for w in words if w not in TIME_WORDS]
    if not rest:
        return any(w in _ALONE_TIME_WORDS for w in words)
    return any(w in SEND_WORDS for w in rest) and all(w in SEND_WORDS or w == "last" for w in rest)


def names_another_time(key: str) -> bool:
    """A time of something else than the send (`Opened At`, `bounce_time`): never a send time, even by its values."""
    words = last_part_words(key)
    return any(w in TIME_WORDS for w in words) and not is_time_name(words)


def field_of(key: str) -> str | None:
    """The send field a name means ("sent_at", "campaign", "step", "candidate"), or None."""
    words = last_part_words(key)
    if is_time_name(words):
        return "sent_at"
    if not words or any(w in _NOT_THE_VALUE for w in words):
        return None
    if "step" in words:
        return "step" if all(w == "step" or w in _STEP_PREFIXES or w in _ID_WORDS for w in words) else None
    for field, heads in _HEADS.items():
        if words[0] in heads and all(w in heads or w in _ID_WORDS for w in words[1:]):
            return field
    return None


def names_for(field: str, keys) -> list[str]:
    """The names among `keys` that mean `field`, in their order."""
    return [key for key in keys if field_of(key) == field]
