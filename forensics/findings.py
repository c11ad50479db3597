"""Turn the classification tables into the `diagnose` document (docs/diagnose-json.md).

What each incident says (evidence, fix, next command) comes from its kind in forensics.kinds.
"""

from __future__ import annotations

import queries
from forensics import affected, classify, evidence
from forensics.jsonfmt import iso_utc
from forensics.kinds import affected_command, kind_named


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


def build_document(case, include_affected: bool = True, logs=(), exports=()) -> dict:
    """The diagnose document; `affected` as Python objects, for library use (the commands stream
    forensics.affected.frames through the columnar writers instead).

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
                    "note": i.note, "sender": i.sender} for i in case.inputs],
        "summary": classify.summary(con),
        "incidents": [incident_document(i, [str(p) for p in logs], export_args, cut.arguments() if cut else ())
                      for i in classify.incidents(con)],
        # Not one of the five kinds: one person (by candidate id) reached at two addresses in one step.
        "candidates_at_two_addresses": queries.rows(con, "candidates_at_two_addresses"),
    }
    if include_affected:
        document["affected"] = [row for frame in affected.frames(con) for row in frame.to_dicts()]
    return document

