"""Turn the classification tables into the `diagnose` document (docs/diagnose-json.md).

What each incident says (evidence, fix, next command) comes from its kind in forensics.kinds.
"""

from __future__ import annotations

import json
from collections.abc import Iterable, Iterator

import queries
from forensics import classify, evidence
from forensics.jsonfmt import iso_utc, to_json
from forensics.kinds import affected_command, kind_named
from forensics.textsafe import json_safe


def incident_document(i: dict, logs=(), export_args=(), window_args=()) -> dict:
    kind = i["kind"]
    entry = kind_named(kind)
    return {
        "id": i["id"], "kind": kind, "campaign": i["campaign"] or None, "step": i["step"] or None,
        "test_id": i["test_id"], "workers": i["workers"], "shards": i["shards"],
        "first_send": iso_utc(i["first_send"]), "last_send": iso_utc(i["last_send"]),
        "people": i["people"], "extra_sends": int(i["extra_sends"]), "confidence": float(i["confidence"]),
        "cause": i["main_cause"] if kind == "ab-contamination" else None,
        "evidence": entry.evidence(i),
        "per_worker": [dict(w) for w in i["per_worker"]],
        "per_shard": [{"shard": s["shard"], "duplicated_people": s["duplicated_people"]} for s in i["per_shard"]],
        # the next commands read the same --since/--until window (else INC-n would name another incident)
        "remediation": [entry.fix, entry.command_for(i, logs, export_args, window_args),
                        affected_command(i, logs, export_args, window_args)],
    }


AFFECTED_BATCH_PEOPLE = 200_000  # people per affected_sends query: bounds DuckDB's list aggregation


def affected_json(con) -> Iterator[str]:
    """The "affected" entries as ready JSON texts (made by DuckDB; see affected_sends), streamed."""
    for ids in _incident_batches(queries.run(con, "incident_sizes").fetchall()):
        cursor = queries.run(con, "affected_sends", {"incident_ids": ids})
        while rows := cursor.fetchmany(10_000):
            yield from (row[0] for row in rows)


def _incident_batches(sizes: list[tuple[str, int]]) -> Iterator[list[str]]:
    batch, people = [], 0
    for incident_id, size in sizes:
        if batch and people + size > AFFECTED_BATCH_PEOPLE:
            yield batch
            batch, people = [], 0
        batch.append(incident_id)
        people += size
    if batch:
        yield batch


def build_document(case, include_affected: bool = True, logs=(), exports=()) -> dict:
    """The diagnose document; `affected` is parsed from affected_json (use that directly to stream).

    `exports`: export paths or a forensics.providers.ExportSpec, for the next commands to read them alike."""
    from forensics.providers import ExportSpec

    con, export_args = case.con, ExportSpec.of(exports).arguments()
    cut = getattr(case, "window", None)
    classify.classify(con, save=getattr(case, "saved", False))
    lost = evidence.lost_evidence(con, unread=case.unread)
    document = {
        "version": 1,
        "complete": evidence.is_complete(lost),
        "lost_evidence": lost,
        "window": cut.to_json() if cut else None,  # --since/--until (forensics/ingest/window.py)
        "inputs": [{"path": i.path, "envelope": i.envelope, "syntax": i.syntax, "lines": i.lines,
                    "records": i.records, "skipped": i.skipped, "first_skipped_lines": i.first_skipped_lines,
                    "note": i.note} for i in case.inputs],
        "summary": classify.summary(con),
        "incidents": [incident_document(i, [str(p) for p in logs], export_args, cut.arguments() if cut else ())
                      for i in classify.incidents(con)],
        # Not one of the five kinds: one person (by candidate id) reached at two addresses in one step.
        "candidates_at_two_addresses": queries.rows(con, "candidates_at_two_addresses"),
    }
    if include_affected:
        document["affected"] = [json.loads(text) for text in affected_json(con)]
    return document


def write_document(document: dict, affected: Iterable[str], out) -> None:
    """Write the document as JSON with the pre-serialised affected entries spliced in, one per line."""
    head = to_json({k: v for k, v in document.items() if k != "affected"})
    out.write(head[:-2] + ',\n  "affected": [')
    separator = "\n    "
    for text in affected:
        out.write(separator + json_safe(text))
        separator = ",\n    "
    out.write("]\n}\n" if separator == "\n    " else "\n  ]\n}\n")
