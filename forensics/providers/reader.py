"""Files → documents → DuckDB → normalised provider rows (see queries/providers.sql)."""

from __future__ import annotations

import datetime as dt
from dataclasses import dataclass, field

import queries
from forensics.errors import ConfigError, InputError
from forensics.providers import detect, files, generic

COLUMNS = ("provider", "source_file", "source_line", "event_type", "verdict", "msg_id", "provider_msg_id",
           "recipient", "sent_at", "campaign", "step", "candidate", "subject", "template")
MAPPED = ("csv", "jsonl", "sendgrid")  # the --provider values a --map can describe
EVENT_COLUMNS = COLUMNS + ("alt_id",)  # alt_id: smtp-id / queue id used to collapse id-less events
# The query that turns each JSON provider's unwrapped events into rows (queries/providers.sql).
ROWS_QUERY = {"sendgrid": "provider_rows_sendgrid", "mailgun": "provider_rows_mailgun", "ses": "provider_rows_ses",
              "postmark": "provider_rows_postmark", "resend": "provider_rows_resend", "brevo": "provider_rows_brevo",
              "generic": "provider_rows_generic"}


@dataclass(frozen=True)
class Keys:
    """Metadata keys searched (in order) for campaign, step and candidate."""

    campaign: tuple[str, ...] = ("campaign", "campaign_id")
    step: tuple[str, ...] = ("step",)
    candidate: tuple[str, ...] = ("candidate", "candidate_id", "lead_id")


@dataclass
class ProviderRead:
    events: object  # pyarrow.Table with COLUMNS
    malformed: list[dict] = field(default_factory=list)
    files: dict[str, str] = field(default_factory=dict)  # path -> provider
    # path -> {field: (column, how)} of your own CSV/JSONL (and SendGrid's activity CSV): "sent_at ← Sent At"
    readings: dict[str, dict] = field(default_factory=dict)
    _collapsed: object = field(default=None, repr=False)

    @classmethod
    def merged(cls, reads: list[ProviderRead]) -> ProviderRead:
        """Several reads as one (exports read with different options): collapsed together, as one read would be."""
        import pyarrow as pa

        return cls(pa.concat_tables([r.events for r in reads]), [m for r in reads for m in r.malformed],
                   {path: name for r in reads for path, name in r.files.items()},
                   {path: reading for r in reads for path, reading in r.readings.items()})

    def collapsed(self):
        """One row per (provider, message, recipient), in no particular order (computed once)."""
        if self._collapsed is None:
            self._collapsed = collapse(self.events)
        return self._collapsed

    def sends(self):
        """One row per (provider, message, recipient); the verdict is the strongest seen.

        Ordered by sent_at (unknown last), provider, message id and recipient.
        """
        return sort_sends(self.collapsed())


@dataclass
class _Batch:
    docs: list = field(default_factory=list)  # Arrow tables: provider, source_file, source_line, text
    csvs: list = field(default_factory=list)  # polars frames with canonical columns, per provider
    files: dict = field(default_factory=dict)
    readings: dict = field(default_factory=dict)  # path -> {field: (column, how)}
    json_inferred: dict = field(default_factory=dict)  # field -> generic JSON keys found by their name's words


def read_events(paths, provider: str | None = None, mapping: dict | None = None, keys: Keys | None = None,
                year: int | None = None, tz: str | None = None) -> ProviderRead:
    """Read every export under `paths`; raises InputError for unreadable files or wrong providers."""
    keys, mapping = keys or Keys(), mapping or {}
    if provider and provider not in detect.PROVIDERS:
        raise ConfigError(f"unknown provider {provider!r}; choose from {', '.join(detect.PROVIDERS)}")
    if mapping and provider not in (None, *MAPPED):
        raise ConfigError(f"--map describes csv/jsonl exports and SendGrid's activity CSV, not {provider} events "
                          "(its metadata keys: --campaign-key, --step-key, --candidate-key)")
    batch = _Batch()
    for path in files.expand_paths(list(paths)):
        _add_file(batch, files.read_export(path), provider, mapping, keys)
    if not batch.files:
        raise InputError("no export files found")
    con = _connect(tz)
    try:
        events, malformed = _run_queries(con, batch, mapping, keys, year, tz)
    finally:
        con.close()
    _check_recognised(events, batch.files, malformed)
    return ProviderRead(events.filter(_recognised_mask(events)), malformed, batch.files, batch.readings)


def _add_file(batch: _Batch, export: files.ExportFile, forced: str | None, mapping: dict, keys: Keys) -> None:
    if export.kind == "csv" and forced in (None, "sendgrid", "csv", "jsonl"):
        name = _add_csv(batch, export, forced, mapping, keys)
    else:
        name = forced or _detect(export, mapping)
        if name == "postfix":
            batch.docs.append(_lines_table("postfix", export.path, export.text))
        elif name == "csv":
            hint = "; pass --provider jsonl for JSON of your own" if export.kind in ("json", "jsonl") else ""
            raise InputError(f"{export.path}: not a CSV file (looks like {export.kind}){hint}")
        else:
            name = "generic" if name == "jsonl" else name
            _add_json(batch, export, name, mapping, keys)
    batch.files[export.path] = name


def _add_csv(batch: _Batch, export: files.ExportFile, forced: str | None, mapping: dict, keys: Keys) -> str:
    frame = generic.read_csv(export.path, export.text)
    found = forced or detect.choose(export.path, detect.csv_candidates(frame.columns, mapping), "csv", frame.columns)
    name = "sendgrid" if found == "sendgrid" else "csv"
    reading: dict = {}
    batch.csvs.append((name, generic.canonical_frame(export.path, frame, mapping, keys, name, reading)))
    batch.readings[export.path] = reading
    return name


def _add_json(batch: _Batch, export: files.ExportFile, name: str, mapping: dict, keys: Keys) -> None:
    if export.kind not in ("json", "jsonl"):
        raise InputError(f"{export.path}: not JSON, so not a {name} webhook/event export")
    if name == "generic":
        values = files.first_json_values(export)
        generic.require_json_fields(export.path, mapping, values)
        _add_json_reading(batch, export.path, generic.json_reading(mapping, keys, values))
    text = export.text if export.kind == "jsonl" else _validated_document(export)
    batch.docs.append(_lines_table(name, export.path, text) if export.kind == "jsonl"
                      else _doc_table(name, export.path, text))


def _add_json_reading(batch: _Batch, path: str, reading: dict) -> None:
    batch.readings[path] = reading
    for name, (key, how) in reading.items():
        if key and (how == "its name's words" or how.startswith("its values")):
            batch.json_inferred.setdefault(name, []).append(key)


def _detect(export: files.ExportFile, mapping: dict) -> str:
    if export.kind == "lines":
        return detect.choose(export.path, detect.text_candidates(export.text), "lines")
    values = files.first_json_values(export)
    return detect.choose(export.path, detect.json_candidates(values, mapping), export.kind)


def _validated_document(export: files.ExportFile) -> str:
    files.load_json_document(export.path, export.text)  # raises with file:line when truncated
    return export.text


def _doc_table(provider: str, path: str, text: str):
    import pyarrow as pa

    return pa.table({"provider": [provider], "source_file": [path], "source_line": pa.array([1], pa.int64()),
                     "text": pa.array([text], pa.large_string())})


def _lines_table(provider: str, path: str, text: str):
    """One row per line (a trailing newline adds none), split by Arrow: no Python string per line."""
    import numpy as np
    import pyarrow as pa
    import pyarrow.compute as pc

    lines = pc.split_pattern(pa.array([text], pa.large_string()), "\n").flatten()
    if len(lines) and lines[len(lines) - 1].as_py() == "":
        lines = lines.slice(0, len(lines) - 1)
    n = len(lines)
    return pa.table({
        "provider": pa.repeat(pa.scalar(provider, pa.string()), n),
        "source_file": pa.repeat(pa.scalar(path, pa.string()), n),
        "source_line": pa.array(np.arange(1, n + 1, dtype=np.int64)),
        "text": lines,
    })


def _connect(tz: str | None):
    import duckdb

    con = duckdb.connect()
    queries.run(con, "provider_session_utc")
    queries.macros(con)
    return con


def _params(keys: Keys) -> dict:
    return {"campaign_keys": list(keys.campaign), "step_keys": list(keys.step),
            "candidate_keys": list(keys.candidate)}


def _run_queries(con, batch: _Batch, mapping: dict, keys: Keys, year: int | None, tz: str | None):
    import pyarrow as pa

    parts, malformed = [], []
    if batch.docs:
        con.register("provider_docs", pa.concat_tables(batch.docs))
        malformed += queries.rows(con, "provider_malformed_docs")
        present = {p for p in batch.files.values()}
        queries.script(con, "provider_events_unwrap")
        for name in ROWS_QUERY:
            if name in present:
                parts.append(_provider_rows(con, name, mapping, keys, batch.json_inferred))
        if "postfix" in present:
            parts.append(_postfix_rows(con, year, tz))
    for provider, frame in batch.csvs:
        parts.append(_csv_rows(con, provider, frame))
    return _concat(parts), malformed


def _provider_rows(con, name: str, mapping: dict, keys: Keys, inferred: dict):
    params = _params(keys)
    if name == "generic":
        params.update(generic.json_params(mapping, keys, inferred))
        params.update(sent_words=generic.SENT_WORDS, not_sent_words=generic.NOT_SENT_WORDS)
    return queries.arrow(con, ROWS_QUERY[name], params)


def _postfix_rows(con, year: int | None, tz: str | None):
    return queries.arrow(con, "provider_rows_postfix", {"year": year or dt.date.today().year, "tz": _valid_tz(tz)})


def _csv_rows(con, provider: str, frame):
    con.register("provider_csv", frame.to_arrow())
    params = {"provider": provider, "sent_words": generic.SENT_WORDS, "not_sent_words": generic.NOT_SENT_WORDS}
    result = queries.arrow(con, "provider_rows_csv", params)
    con.unregister("provider_csv")
    return result


def _valid_tz(tz: str | None) -> str:
    import zoneinfo

    tz = tz or "UTC"
    try:
        zoneinfo.ZoneInfo(tz)
    except (zoneinfo.ZoneInfoNotFoundError, ValueError):
        raise ConfigError(f"--tz {tz!r}: unknown time zone (use an IANA name like Europe/Berlin)") from None
    return tz


def _schema(columns=EVENT_COLUMNS):
    import pyarrow as pa

    types = {"source_line": pa.int64(), "sent_at": pa.timestamp("us", tz="UTC")}
    return pa.schema([(c, types.get(c, pa.string())) for c in columns])


def _concat(parts):
    import pyarrow as pa

    schema = _schema()
    tables = [p.select(list(EVENT_COLUMNS)).cast(schema) for p in parts]
    return pa.concat_tables(tables) if tables else schema.empty_table()


def _recognised_mask(events):
    import pyarrow.compute as pc

    return pc.is_valid(events.column("event_type"))


def _check_recognised(events, provider_of: dict, malformed: list) -> None:
    """A file with no recognisable event for its provider is an error (wrong --provider, wrong file)."""
    import pyarrow.compute as pc

    recognised = _recognised_mask(events)
    ok = set(pc.unique(events.column("source_file").filter(recognised)).to_pylist())
    bad_files = {m["source_file"] for m in malformed}
    for path, provider in provider_of.items():
        if path not in ok:
            shown = "generic" if provider == "csv" else provider
            why = "only malformed records" if path in bad_files else f"no {shown} events"
            raise InputError(f"{path}: {why} found; is it a {shown} export? (check --provider)")
    unknown = events.select(["source_file", "source_line", "provider"]).filter(pc.invert(recognised))
    for row in unknown.sort_by([("source_file", "ascending"), ("source_line", "ascending")]).to_pylist():
        # few: records of another shape inside a valid file, reported in file order
        malformed.append({"source_file": row["source_file"], "source_line": row["source_line"],
                          "reason": f"not a {row['provider']} event"})


def collapse(events):
    """One row per (provider, message, recipient), via the provider_collapse query (unordered)."""
    import duckdb
    import numpy as np
    import pyarrow as pa

    con = duckdb.connect()
    try:
        queries.run(con, "provider_session_utc")
        # the query keeps a row number per group and joins the row back: numbered here, without a copy
        rid = pa.array(np.arange(events.num_rows, dtype=np.int64))
        con.register("provider_event_rows", events.append_column("rid", rid))
        return queries.arrow(con, "provider_collapse").cast(_schema(COLUMNS))
    finally:
        con.close()


def sort_sends(table):
    """Presentation order of collapsed rows: sent_at, provider, msg_id, recipient; nulls last (Arrow sort)."""
    keys = [(name, "ascending", "at_end") for name in ("sent_at", "provider", "msg_id", "recipient")]
    return table.sort_by(keys)
