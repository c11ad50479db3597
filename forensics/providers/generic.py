"""Generic CSV / JSON Lines exports described by `--map field=Column`, and SendGrid's activity CSV.

Canonical fields: recipient and msg_id (required), sent_at, event, campaign, step, candidate, subject, template.
A `--map` names columns; every field it leaves out is still looked for by name (the canonical name,
a time column, the metadata keys), so mapping two columns never drops the others.
"""

from __future__ import annotations

from forensics.errors import ConfigError, InputError
from forensics.providers import columns as columns_mod

FIELDS = ("recipient", "msg_id", "sent_at", "event", "campaign", "step", "candidate", "subject", "template")
# Where an unmapped subject or template is looked for (what groups sends when campaign and step are absent).
SUBJECT_NAMES = ("subject",)
TEMPLATE_NAMES = ("template", "template_id", "template_name")
SENT_WORDS = ["sent", "send", "processed", "delivered", "delivery", "accepted", "request", "queued"]
NOT_SENT_WORDS = ["dropped", "rejected", "reject", "failed", "blocked", "error", "invalid", "invalid_email",
                  "not delivered", "not_sent", "suppressed"]
# Where an unmapped send time is looked for, in order (SendGrid's activity time columns included).
TIME_NAMES = ("sent_at", "sent", "timestamp", "time", "date", "processed", "event_time", "last_event_time")

# SendGrid does not publish its activity CSV's headers (docs/sentlog.md): match by alias, fail loudly otherwise.
SENDGRID_CSV_ALIASES = {
    "msg_id": ("msg_id", "message_id", "sg_message_id", "message id"),
    "recipient": ("email", "to_email", "recipient", "to"),
    "sent_at": ("processed", "timestamp", "last_event_time", "event_time", "date"),
    "event": ("status", "event"),
    "subject": SUBJECT_NAMES,
    "template": TEMPLATE_NAMES,
}


def parse_map(pairs: list[str] | tuple[str, ...]) -> dict[str, str]:
    """`["recipient=To", "msg_id=Message ID"]` → {"recipient": "To", "msg_id": "Message ID"}."""
    mapping: dict[str, str] = {}
    for pair in pairs or ():
        field, sep, column = pair.partition("=")
        field = field.strip()
        if not sep or not column.strip():
            raise ConfigError(f"--map {pair!r}: expected FIELD=COLUMN, e.g. recipient=To")
        if field not in FIELDS:
            raise ConfigError(f"--map {pair!r}: unknown field {field!r}; fields are {', '.join(FIELDS)}")
        mapping[field] = column.strip()
    return mapping


def field_names(mapping: dict[str, str], keys) -> dict[str, tuple[str, ...]]:
    """Per field, the names looked for: the mapped one alone, else the canonical name, times, metadata keys."""
    names = {"recipient": ("recipient",), "msg_id": ("msg_id",), "sent_at": TIME_NAMES, "event": ("event",),
             "campaign": tuple(keys.campaign), "step": tuple(keys.step), "candidate": tuple(keys.candidate),
             "subject": SUBJECT_NAMES, "template": TEMPLATE_NAMES}
    return {f: (mapping[f],) if f in mapping else names[f] for f in FIELDS}


def names_present(mapping: dict[str, str], names, fold: bool = True) -> bool:
    """Does a header (fold: any case) or a record's keys hold the recipient and msg_id this mapping names?"""
    have = {n.strip().lower() for n in names} if fold else set(names)
    wanted = (mapping.get(f, f) for f in ("recipient", "msg_id"))
    return all((w.strip().lower() if fold else w) in have for w in wanted)


def require_mapping(mapping: dict[str, str], what: str) -> None:
    missing = [f for f in ("recipient", "msg_id") if f not in mapping]
    if missing:
        raise ConfigError(f"{what} needs --map for {', '.join(missing)} (e.g. --map recipient=To --map msg_id=\"Message ID\")")


def csv_mapping(path: str, columns: list[str], mapping: dict[str, str], keys, samples=None) -> dict[str, str]:
    """{field: column} of a generic CSV (csv_reading without how each was found)."""
    return {f: column for f, (column, _how) in csv_reading(path, columns, mapping, keys, samples).items() if column}


def csv_reading(path: str, columns: list[str], mapping: dict[str, str], keys, samples=None) -> dict:
    """{field: (column, how)} of a generic CSV: --map first, then each field's names found in the header, then
    (forensics.providers.columns) the send time, campaign, step and candidate by their name's words or values."""
    by_lower = {c.strip().lower(): c for c in columns}
    found = {}
    for field, names in field_names(mapping, keys).items():
        if field in mapping:  # a mapped name the header lacks stays, to be named as absent
            found[field] = (by_lower.get(mapping[field].strip().lower(), mapping[field]), "--map")
            continue
        hit = next((by_lower[n.strip().lower()] for n in names if n.strip().lower() in by_lower), None)
        if hit is not None:
            found[field] = (hit, "its name")
    reading = columns_mod.infer(columns, found, samples or (lambda names: {}))
    require_mapping({f: c for f, (c, _how) in reading.items() if c}, f"{path}: a CSV export")
    return reading


def sendgrid_csv_mapping(path: str, columns: list[str], keys) -> dict[str, str]:
    """Resolve SendGrid activity CSV headers through the alias table."""
    by_lower = {c.strip().lower(): c for c in columns}
    mapping = {}
    for field, aliases in SENDGRID_CSV_ALIASES.items():
        hit = next((by_lower[a] for a in aliases if a in by_lower), None)
        if hit:
            mapping[field] = hit
    for field, names in (("campaign", keys.campaign), ("step", keys.step), ("candidate", keys.candidate)):
        hit = next((by_lower[n.lower()] for n in names if n.lower() in by_lower), None)
        if hit:
            mapping[field] = hit
    if "recipient" not in mapping or "msg_id" not in mapping:
        raise InputError(f"{path}: unknown CSV layout (columns: {', '.join(columns[:12])}); "
                         "use --provider csv --map recipient=COLUMN --map msg_id=COLUMN")
    return mapping


def read_csv(path: str, text: str):
    """The CSV as a polars frame, every column text."""
    import polars as pl

    try:
        return pl.read_csv(text.encode(), infer_schema=False, truncate_ragged_lines=True)
    except (pl.exceptions.PolarsError, ValueError) as exc:
        raise InputError(f"{path}: not a readable CSV: {str(exc).splitlines()[0]}") from None


def canonical_frame(path: str, frame, mapping: dict[str, str], keys, provider: str, reading: dict | None = None):
    """Rename the columns of a read CSV to canonical ones, add file:line; `reading` gets {field: (column, how)}."""
    import polars as pl

    if provider == "sendgrid":
        mapping = {**sendgrid_csv_mapping(path, frame.columns, keys), **mapping}
        found = {f: (c, "--map" if f in mapping else "its name") for f, c in mapping.items()}
    else:
        found = csv_reading(path, frame.columns, mapping, keys, lambda names: _samples(frame, names))
        mapping = {f: c for f, (c, _how) in found.items() if c}
    if reading is not None:
        reading.update(found)
    absent = [c for c in mapping.values() if c not in frame.columns]
    if absent:
        raise ConfigError(f"{path}: no column named {', '.join(repr(a) for a in absent)} "
                          f"(columns: {', '.join(frame.columns[:12])})")
    exprs = [pl.col(mapping[f]).alias(f) if f in mapping else pl.lit(None, pl.String).alias(f) for f in FIELDS]
    return frame.select(exprs).with_columns(
        pl.lit(path).alias("source_file"),
        (pl.int_range(pl.len(), dtype=pl.Int64) + 2).alias("source_line"),
    )


def _samples(frame, names) -> dict[str, list]:
    head = frame.head(columns_mod.SAMPLED)
    return {name: head.get_column(name).to_list() for name in names}


def csv_frame(path: str, text: str, mapping: dict[str, str], keys, provider: str):
    """Read a CSV with polars (all text), rename mapped columns to canonical ones, add file:line."""
    return canonical_frame(path, read_csv(path, text), mapping, keys, provider)


def json_params(mapping: dict[str, str], keys, inferred: dict | None = None) -> dict[str, list[str]]:
    """The provider_rows_generic parameters: per field, the keys looked up (the first non-empty wins); keys found
    by their name's words (`inferred`, json_reading) come after the field's own names."""
    extra = inferred or {}
    return {f"{f}_keys": list(names) + [k for k in extra.get(f, ()) if k not in names]
            for f, names in field_names(mapping, keys).items()}


def json_reading(mapping: dict[str, str], keys, values: list) -> dict[str, tuple[str, str]]:
    """{field: (key, how)} of a generic JSON export, from the keys of its first records (as csv_reading)."""
    seen = list(dict.fromkeys(key for record in _json_records(values) for key in record))
    found = {}
    for field, names in field_names(mapping, keys).items():
        hit = next((n for n in names if n in seen), None)
        if hit is not None or field in mapping:
            found[field] = (hit or mapping[field], "--map" if field in mapping else "its name")
    return columns_mod.infer(seen, found, lambda names: _json_samples(values, names))


def _json_records(values: list) -> list[dict]:
    return [r for v in values for r in (v if isinstance(v, list) else [v]) if isinstance(r, dict)]


def _json_samples(values: list, names) -> dict[str, list]:
    records = _json_records(values)
    return {name: [r.get(name) for r in records if name in r] for name in names}


def require_json_fields(path: str, mapping: dict[str, str], values: list) -> None:
    """A generic JSON export needs recipient and msg_id: mapped, or named so in its first records."""
    seen = {key for record in _json_records(values) for key in record}
    resolved = {f: f for f in ("recipient", "msg_id") if f in seen}
    require_mapping({**resolved, **mapping}, f"{path}: a generic JSON export")
