"""Turn the classification tables into the `diagnose` document (docs/diagnose-json.md).

What each incident says (evidence, fix, next command) comes from its kind in forensics.kinds.
"""

from __future__ import annotations

from forensics import affected, classify
from forensics.jsonfmt import iso_utc
from forensics.kinds import KindText, Rerun, describe


def incident_document(i: dict, text: KindText) -> dict:
    """One incident (incident_rows) with what its kind says of it (forensics.kinds.describe)."""
    kind = i["kind"]
    return {
        "id": i["id"], "kind": kind, "campaign": i["campaign"] or None, "step": i["step"] or None,
        "test_id": i["test_id"], "workers": i["workers"], "shards": i["shards"],
        "first_send": iso_utc(i["first_send"]), "last_send": iso_utc(i["last_send"]),
        "people": i["people"], "extra_sends": int(i["extra_sends"]), "confidence": float(i["confidence"]),
        "cause": i["main_cause"] if kind == "ab-contamination" else None,
        "evidence": text.evidence,
        "per_worker": [dict(w) for w in i["per_worker"]],
        "per_shard": [{"shard": s["shard"], "duplicated_people": s["duplicated_people"]} for s in i["per_shard"]],
        "remediation": text.remediation,
    }


def build_document(case, include_affected: bool = True, logs=(), exports=()) -> dict:
    """The diagnose document; `affected` as Python objects, for library use (the commands stream
    forensics.affected.frames through the columnar writers instead).

    `exports`: export paths or a forensics.providers.ExportSpec, for the next commands to read them alike."""
    from forensics.providers.spec import export_arguments

    cut, read_as = getattr(case, "window", None), getattr(case, "vocabulary", None)
    found = classify.verdict(case.con, save=getattr(case, "saved", False), unread=case.unread, vocabulary=read_as)
    # the next commands read the logs as this run did, window included (else INC-n names another incident)
    rerun = Rerun([str(p) for p in logs], export_arguments(exports), case.options.arguments(cut),
                  case.options.arguments(cut, loading=True))
    told = describe(found.incidents, rerun)
    document = {
        "version": 1,
        "complete": found.complete,
        "lost_evidence": found.lost_evidence,
        "window": cut.to_json() if cut else None,  # --since/--until (forensics/ingest/window.py)
        "inputs": [{"path": i.path, "envelope": i.envelope, "syntax": i.syntax, "lines": i.lines,
                    "records": i.records, "skipped": i.skipped, "first_skipped_lines": i.first_skipped_lines,
                    "note": i.note, "sender": i.sender} for i in case.inputs],
        "reading": reading_document(case),
        # which key was read as which field, and how: only where more than the alias table decided it
        **({"vocabulary": read_as.to_json()} if read_as is not None and read_as.stated() else {}),
        "summary": found.summary,
        "incidents": [incident_document(i, text) for i, text in zip(found.incidents, told.incidents)],
        "candidates_at_two_addresses": found.candidates_at_two_addresses,
        # the whole case's exclusion list, beside each incident's own
        "next": [told.case_command] if found.incidents else [],
    }
    if include_affected:
        document["affected"] = [row for frame in affected.frames(case.con) for row in frame.to_dicts()]
    return document


def reading_document(case) -> dict:
    """How the logs were read beyond each file's syntax: the config the fields were mapped by, and the provider
    exports found among the LOGS (read as the provider's history, not as logs)."""
    config = case.options.config
    return {"config": config.to_json() if config else None,
            "provider_exports": [{"path": e["path"], "provider": e["provider"]} for e in case.provider_exports]}


def reading_notes(reading: dict) -> list[str]:
    """`reading` (reading_document) in words: the config the fields were mapped by, the exports among the LOGS."""
    config, exports = reading["config"], reading["provider_exports"]
    lines = []
    if config:
        mapped = ", ".join(f"{canon} ← {key}" for canon, key in config["fields"].items()) or "no [fields]"
        how = (f"{config['path']} (found in the working directory; --no-config ignores it)"
               if config["found_in_working_directory"] else f"--config {config['path']}")
        lines.append(f"Fields mapped by {how}: {mapped}")
        if config.get("events"):
            events = ", ".join(f'{event} ← "{value}"' for value, event in config["events"].items())
            lines.append(f"Events mapped by {how}: {events}")
    if exports:
        named = "; ".join(f"{e['path']} ({e['provider']})" for e in exports[:5])
        more = f" +{len(exports) - 5} more" if len(exports) > 5 else ""
        lines.append(f"Read as the provider's send history, not as logs: {named}{more}")
    return lines
