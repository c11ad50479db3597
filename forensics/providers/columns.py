"""Which column of your own CSV/JSONL export holds the send time, campaign, step and candidate, when no --map says.

The order is the same for both: the field's own names (`sent_at`, `campaign`, the --*-key names), then a
name whose words mean the field (forensics.names: `Sent At`, `Campaign Name`, `sequence_step`), then, for
the send time only, the one remaining column whose values all look like times (never one named as another
event's time, `Opened At`). Two columns that fit as well as each other are no answer: the field stays
unread (and a backfill refuses, naming them), never a guess. Each answer says how it was found, for the
"sent_at ← Sent At" line every reader prints.
"""

from __future__ import annotations

import re

from forensics.names import field_of, names_another_time

INFERRED = ("sent_at", "campaign", "step", "candidate")
_TIME_VALUE = re.compile(r"\s*\d{4}-\d{2}-\d{2}[T ]\d{2}:\d{2}(:\d{2}(\.\d+)?)?\s*(Z|[+-]\d{2}:?\d{2}|UTC)?\s*",
                         re.IGNORECASE)
SAMPLED = 200  # values looked at per column for its shape


def by_words(field: str, columns, taken) -> tuple[str | None, list[str]]:
    """(the one column whose name's words mean `field`, every such column): none chosen when two fit."""
    fits = [c for c in columns if c not in taken and field_of(c) == field]
    return (fits[0] if len(fits) == 1 else None), fits


def time_by_values(samples: dict[str, list]) -> tuple[str | None, list[str]]:
    """(the one column whose sampled non-empty values are all ISO times, every such column)."""
    fits = [name for name, values in samples.items() if _all_times(values)]
    return (fits[0] if len(fits) == 1 else None), fits


def _all_times(values) -> bool:
    present = [v for v in values if isinstance(v, str) and v.strip()]
    return bool(present) and all(_TIME_VALUE.fullmatch(v) for v in present)


def infer(columns, found: dict[str, tuple[str, str]], samples) -> dict[str, tuple[str, str]]:
    """`found` ({field: (column, how)} read by --map or own name) completed by words, then a time by its values.

    `samples(columns) -> {column: [values]}` is asked only when the time is still unread."""
    reading = dict(found)
    for field in INFERRED:
        if field in reading:
            continue
        taken = {column for column, _how in reading.values()}
        chosen, fits = by_words(field, columns, taken)
        if chosen:
            reading[field] = (chosen, "its name's words")
        elif len(fits) > 1:
            reading[field] = ("", "ambiguous: " + ", ".join(fits))
    if "sent_at" not in reading:
        taken = {column for column, _how in reading.values()}
        # a column whose name says it is another event's time (`Opened At`) is not a send time, whatever its values
        chosen, fits = time_by_values(samples([c for c in columns if c not in taken and not names_another_time(c)]))
        if chosen:
            reading["sent_at"] = (chosen, "its values (times)")
        elif len(fits) > 1:
            reading["sent_at"] = ("", "ambiguous: " + ", ".join(fits))
    return reading


def described(reading: dict[str, tuple[str, str]]) -> list[str]:
    """`sent_at ← Sent At (its name's words)`, one per field read (or found ambiguous)."""
    return [f"{field} ← {column} ({how})" if column else f"{field}: {how}; pass --map {field}=COLUMN"
            for field, (column, how) in reading.items()]
