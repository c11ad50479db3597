"""The schema every named query block is bound against in the meta-test (tests/test_meta.py).

DuckDB: one connection holding what the DuckDB blocks read, built by the project's own code and DDL
blocks over a sample case and provider fixtures (the Arrow tables the code registers are registered
under the same names). PostgreSQL: the project's DDL blocks over a leads table like a user's.
Placeholders are filled as the code fills them (the fragment builders of forensics.ingest.readers.sql and
forensics.ingest.load).
"""

from __future__ import annotations

from pathlib import Path

import queries

REPO = Path(__file__).resolve().parent.parent
SAMPLE_CASE = REPO / "sample_logs" / "ab-contamination"
FIXTURES = REPO / "tests" / "fixtures" / "providers"
ENVELOPES = REPO / "tests" / "fixtures" / "envelopes"
DOCKER_LOG = next(ENVELOPES.glob("docker/containers/*/*-json.log"))  # the envelope blocks' file
TEST_ID = "subj-2026-11"

# Blocks that create what the others read, run before any block is bound.
DUCKDB_SCHEMA = ("provider_macros", "provider_events_unwrap", "sent_log_create_table", "sent_log_create_index",
                 "sent_log_stage_create", "sent_log_dedupe_view", "ab_create_exclusions", "ab_create_assignments",
                 "reservation_create_table", "reservation_create_released", "audit_duckdb_create_sequence",
                 "audit_duckdb_create_table", "label_duckdb_macro", "sent_log_stage_compared_create")
POSTGRES_SCHEMA = ("address_pg_function", "label_pg_function", "audit_create_table", "audit_create_index", "sent_log_create_table",
                   "sent_log_create_index", "sent_log_stage_create", "ab_create_exclusions", "ab_create_assignments",
                   "ab_pg_stage_exclusions", "ab_pg_stage_assignments", "claimloop_add_token_column",
                   "claimloop_create_sequence", "reservation_create_table", "reservation_create_released",
                   "requeue_planned_create", "sent_log_stage_compared_create")
# The user's table that requeue-stale and the claim loop work on (not the project's to create).
LEADS = "CREATE TABLE leads (lead_id INT PRIMARY KEY, email TEXT, status TEXT, claimed_by TEXT, claimed_at TIMESTAMPTZ)"

IDENTS = {"staged": "staged_1", "provider_table": "provider_sends", "log_sends": "sends", "table": "leads", "lead_id": "lead_id",
          "email": "email", "status": "status", "claimed_by": "claimed_by", "claimed_at": "claimed_at",
          "claim_token": "claim_token", "sequence": "mailmortem_fencing_seq", "key_column": "lead_id",
          "cols": ["status", "claimed_by"], "r_cols": [("r", "status"), ("r", "claimed_by")], "candidate": "NULL",
          "lead_campaign": "lead_id", "lead_step": "lead_id",
          "pieces": "staged_1_pieces", "kept": "staged_1_kept", "unwrapped": "staged_1_lines",
          "entries": "staged_1_entries", "values": "staged_1_entries_values",
          "as_json": "staged_1_as_json", "as_logfmt": "staged_1_as_logfmt",
          "tokens": "staged_1_tokens", "tokenize": "mm_tokenize_staged_1", "dictionary": "mm_workers", "code": "w", "column": "worker"}

JSON_TOKENS = "staged_1_json_tokens"


def duckdb_schema():
    """The DuckDB connection every DuckDB block is bound against."""
    from forensics import ab, classify, reconcile
    from forensics.ingest.case import load_case
    from remediation import ab as ab_plan

    con = load_case([str(SAMPLE_CASE)]).con
    classify.classify(con, keep_working=True)  # the classification blocks read its working tables
    report = ab.analyse(con, TEST_ID)
    queries.script(con, "report_marks_build")
    reconcile.load_provider_sends(con, [str(FIXTURES / "sendgrid-events.jsonl")])
    reconcile.find_provider_duplicates(con, "metadata", "sends")  # table provider_duplicates
    plan = ab_plan.build_plan(con, report, "run-1")
    for name, table in {**_provider_inputs(), "ab_stage_exclusions": plan.exclusions,
                        "ab_stage_assignments": plan.assignments}.items():
        con.register(name, table)
    for name in DUCKDB_SCHEMA:
        queries.script(con, name)
    _envelope_tables(con)
    from forensics.ingest.readers import runtime

    con.register(IDENTS["tokens"], runtime.schema().empty_table())  # what the compiled tokenizer streams
    con.register(JSON_TOKENS, runtime.schema().empty_table())  # what the compiled JSON Lines reader streams
    # what it reads the lines inside an envelope with (envelope_tokens)
    runtime.register_lines_function(con, IDENTS["tokenize"], lambda *lines: None)  # never called: EXPLAIN
    _watch_tables(con)
    return con


def _watch_tables(con) -> None:
    """The watch's state (forensics.watch.state) over one chunk: the case's own events as the chunk's."""
    import pyarrow as pa

    sources = [row[0] for row in con.sql("SELECT DISTINCT source FROM events").fetchall()]
    con.register("watch_chunk_files", pa.table({"chunk": sources, "first_line": [1] * len(sources),
                                                "last_line": [2**40] * len(sources), "source": sources,
                                                "lines_before": [0] * len(sources)}))
    con.register("watch_chunk_events", con.sql("SELECT * FROM events").to_arrow_table())
    con.register("watch_chunk_skipped", con.sql("SELECT * FROM skipped").to_arrow_table())
    for name in ("watch_copy_rows", "watch_person_rows"):  # the rows of watch_sends the watch's index points to
        con.register(name, pa.table({"rid": pa.array([], pa.int64())}))
    for name in ("watch_create_state", "watch_take_chunk", "watch_take_skipped", "watch_worker_news",
                 "watch_add_sends", "watch_add_fresh_sends", "watch_new_duplicates", "watch_kind_changes"):
        queries.script(con, name)


def _envelope_tables(con) -> None:
    """What the envelope blocks read, made by the envelope code from fixtures: a Docker log's pieces (a view, and
    written down), its inner lines (a view) parsed both ways, and the entries of a CloudWatch page (and its
    values, as a page with malformed JSON in it is read)."""
    from forensics.ingest import detect, envelopes
    from forensics.ingest.fields import FieldMap
    from forensics.ingest.readers import jsonl, logfmt, runtime, sql
    from forensics.ingest.sources import Source

    tables = {name: IDENTS[name] for name in ("entries", "pieces", "kept", "unwrapped")}
    found = detect.file_params(detect.detect_envelope(DOCKER_LOG.read_bytes(), str(DOCKER_LOG)),
                               str(DOCKER_LOG), 2026)
    envelopes._pieces(con, found, Source(str(DOCKER_LOG), "docker", False), sql.LINE_DELIM, tables)
    queries.run(con, "envelope_kept_pieces", **tables)
    queries.run(con, "envelope_lines", **tables)
    lines = Source(IDENTS["unwrapped"], "docker", False)
    jsonl.read(con, lines, IDENTS["as_json"], b"", FieldMap(), keep_raw=False, compiled=runtime.compiled("jsonl"),
               reader="mm_unwrapped")
    logfmt.read(con, lines, IDENTS["as_logfmt"], b"", FieldMap(), keep_raw=False,
                compiled=runtime.compiled("logfmt"), reader="mm_unwrapped")
    page = ENVELOPES / "cloudwatch" / "filter-log-events.json"
    queries.run(con, "envelope_document_entries", {"path": str(page), "items": "$.events"}, entries=IDENTS["entries"])
    import pyarrow as pa

    # what forensics.ingest.documents registers for a document with malformed JSON: its values read one by one
    con.register(IDENTS["values"], pa.table({"value": pa.array(page.read_text(encoding="utf-8").splitlines())}))


def _provider_inputs() -> dict:
    """The Arrow tables the provider reader and the sent-log register, as the code makes them."""
    import pyarrow as pa

    from forensics.providers import files, generic, read_events, reader
    from remediation import sentlog

    read = read_events([str(FIXTURES / "sendgrid-events.jsonl")])
    export = files.read_export(str(FIXTURES / "sendgrid-activity.csv"))
    csv = generic.csv_frame(export.path, export.text, {}, reader.Keys(), "sendgrid").to_arrow()
    sends = sentlog._stage_table(read.sends())
    rid = pa.array(range(read.events.num_rows), pa.int64())
    return {"provider_docs": reader._lines_table("sendgrid", export.path, export.text), "provider_csv": csv,
            "provider_event_rows": read.events.append_column("rid", rid), "provider_events_view": read.events,
            "provider_sends_view": read.collapsed(), "provider_sends_arrow": read.sends(),
            "sent_log_sends_in": sends, "sent_log_arrow": sends}


def postgres_schema(conn) -> None:
    """The project's PostgreSQL tables (and a user's leads table), inside the caller's transaction."""
    conn.execute(LEADS)
    for name in POSTGRES_SCHEMA:
        queries.script(conn, name, **IDENTS)


def values(name: str) -> dict:
    """Placeholder values for a block, as the code would give them."""
    from forensics.ingest import load
    from forensics.ingest.readers import jsonl, runtime, sql
    from forensics.ingest.fields import FieldMap

    query = queries.get(name)
    wanted = query.placeholders
    found = {key: IDENTS[key] for key in wanted if key in IDENTS}
    if "file_id" in wanted:
        found["file_id"] = 1
    if name == "stage_logfmt":
        found["fields"] = sql.logfmt_fields({"ts", "event", "worker", "recipient", "to"}, FieldMap())[0]
    if name == "stage_jsonl":
        found["picks"] = sql.pick_columns(["ts", "timestamp", "event", "recipient"], FieldMap(), ["worker"])
    if name == "stage_jsonl_tokens":
        found["tokens"] = JSON_TOKENS
        found["picks"] = [*sql.pick_columns(["ts", "timestamp", "event", "recipient"], FieldMap(), ["worker"],
                                             "deferred_text_column"), *jsonl.carried()]
    if name == "stage_csv":
        found["picks"] = sql.pick_columns(["ts", "timestamp", "event", "recipient"], FieldMap())
    if name == "create_views":
        found.update(relation="VIEW", window=queries.fragment("in_window", since="2026-11-28T09:00:00+00:00",
                                                              until="infinity"),
                     **load.view_parts([1], ["staged_2"], [3]))
    if name in ("records_time_range", "records_outside_window"):
        found["events"] = load.view_parts([1], ["staged_2"], [3])["events"]
    if name in ("stage_logfmt_tokens", "stage_jsonl_tokens"):
        found["env"] = "mm_no_envelope()"
        found["text_columns"] = runtime.TEXT_COLUMN_NAMES
    if name == "envelope_drop_lines":
        found["relation"] = "VIEW"
    if name.startswith("envelope_"):  # what the envelope's view is given as literals (envelopes._pieces)
        from forensics.ingest.envelopes import NOT_FLAT

        literals = {"path": str(DOCKER_LOG), "delim": sql.LINE_DELIM,
                    "container": None, "unit": None, "year": 2026, "last_month": 12, "json_only": 0,
                    "again": NOT_FLAT}
        found.update({key: value for key, value in literals.items() if key in wanted})
    if name.startswith("envelope_"):  # a block envelopes share takes each one's regexes (its shape) as literals
        from forensics.ingest import envelopes

        found.update(next((e.shape for e in envelopes.ENVELOPES.values() if e.block == name), ()))
    if name == "named_events_macro":  # --event send="outreach email sent" (forensics.ingest.vocabulary.read)
        found.update(values='["outreach email sent"]', canonicals='["send"]')
    if "lines" in wanted:
        found["lines"] = "mm_lines"
    if "zone" in wanted:
        found["zone"] = "UTC"
    if name == "watch_memory_limit":  # forensics.watch.state: lowered a moment, then set back
        found["limit"] = "256MB"
    return found


def params(name: str) -> dict:
    """Parameter values for EXPLAIN on DuckDB: NULL, but files for the line readers and JSON paths."""
    from forensics.ingest.readers.sql import LINE_DELIM

    path = str(next(SAMPLE_CASE.glob("*.jsonl")))
    given = {"path": path, "paths": [path], "delim": LINE_DELIM, "keys": ["ts"], "items": "$.events"}
    return {key: given.get(key, "$.x" if key.endswith("_key") else None) for key in queries.get(name).params}


def templates() -> set[str]:
    """Blocks that are only pieces of others (fragment choices, included blocks): bound inside those."""
    found = set()
    for query in queries.all_queries().values():
        found.update(c for choices in query.fragments.values() for c in choices if c in queries.all_queries())
    for source in {q.source for q in queries.all_queries().values()}:
        text = (REPO / "queries" / source).read_text(encoding="utf-8")
        found.update(name for name in queries.all_queries() if "{block:" + name + "}" in text)
    return found
