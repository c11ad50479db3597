"""Turn the classification tables into the `diagnose` document (diagnose-json.md).

Evidence sentences are built from numbers the queries computed, so a responder
can check each one against the raw lines.
"""

from __future__ import annotations

import datetime as dt
import json
from collections.abc import Iterable, Iterator

import queries
from forensics import classify
from forensics.ingest.load import fetch
from forensics.jsonfmt import iso_utc, to_json

FIXES = {
    "parallel-worker": "add an atomic claim step (UPDATE … WHERE id IN (SELECT … FOR UPDATE SKIP LOCKED)) and a "
                       "job-level lock so a second instance cannot read the same list; dedupe at send time",
    "retry": "send with an idempotency key per (campaign, step, recipient) and check the sent-log before every "
             "send, so a lost acknowledgement cannot cause a second email",
    "lease-expiry": "make the lease longer than the worst batch (≥ 1.5×) and renew it with a heartbeat while "
                    "sending; check the sent-log per recipient (keyed by candidate, not shard) before each send",
    "state-loss": "keep sent-state in a durable sent-log table (not in the container) and check it before each "
                  "send; backfill it from the provider's export",
    "ab-contamination": "assign the variant once per (test, candidate) and store it (sticky assignment); exclude "
                        "the contaminated candidates from the analysis",
}
NEXT_COMMAND = {
    "parallel-worker": "mailmortem requeue-stale --db \"$DATABASE_URL\" --older-than 45m",
    "retry": "mailmortem sentlog check --db \"$DATABASE_URL\" --campaign {campaign} --recipient <address>",
    "lease-expiry": "mailmortem requeue-stale --db \"$DATABASE_URL\" --older-than 45m --logs <logs>",
    "state-loss": "mailmortem backfill-sentlog --provider-export <export> --db \"$DATABASE_URL\"",
    "ab-contamination": "mailmortem ab-contamination --test-id {test_id} <logs> --format csv > ab-exclusions.csv",
}


def _pct(part, whole) -> str:
    return f"{round(100 * (part or 0) / whole)}%" if whole else "?"


def _duration(seconds) -> str:
    if seconds is None:
        return "?"
    seconds = abs(float(seconds))
    if seconds < 120:
        return f"{seconds:.0f} s"
    if seconds < 7200:
        return f"{seconds / 60:.0f} min"
    return f"{seconds / 3600:.1f} h"


def _minutes(first: dt.datetime, last: dt.datetime) -> str:
    return _duration((last - first).total_seconds()) if first and last else "?"


def _evidence_parallel(i: dict) -> list[str]:
    workers = i["workers"]
    lines = [f"{len(workers)} workers ({', '.join(workers)}) each sent campaign {i['campaign']} step {i['step']}: "
             f"{_pct(i['reached_a'], i['campaign_people'])} and {_pct(i['reached_b'], i['campaign_people'])} of its "
             f"{i['campaign_people']} people, within the same {_minutes(i['first_send'], i['last_send'])}",
             f"{i['people']} people got the same email from two different workers "
             f"(median {_duration(i['median_gap_s'])} apart)"]
    if not i["pair_claims"]:
        lines.append("no claim records from these workers: nothing stopped both from reading the same list")
    else:
        lines.append("claims overlapped without any lease having run out")
    return lines


def _evidence_retry(i: dict) -> list[str]:
    lines = [f"{i['people']} isolated people each re-sent by the same worker ({', '.join(i['workers'])}), "
             f"median {_duration(i['median_gap_s'])}, at most {_duration(i['max_gap_s'])} apart"]
    if i["with_error_or_attempt"]:
        lines.append(f"{i['with_error_or_attempt']} of them with an error/timeout record or attempt ≥ 2 "
                     "between the two sends")
    else:
        lines.append("no error record or attempt number between the sends (evidence thin)")
    lines.append("same incarnation for both sends" if i["with_incarnation"] else
                 "no incarnation (pid/container) field in the logs to rule out a restart")
    return lines


def _evidence_lease(i: dict) -> list[str]:
    if not i["with_expired_lease"]:
        return [f"duplicates confined to shard {i['group_key']} ({i['dup_shards']} of {i['campaign_shards']} shards "
                "of the campaign)",
                "no claim records: the lease expiry is inferred from timing alone (evidence thin)"]
    gap = (i["second_claim_ts"] - i["first_claim_ts"]).total_seconds()
    lines = [f"shard {i['group_key']} claimed at {iso_utc(i['first_claim_ts'])} with a {_duration(i['lease_s'])} "
             f"lease, claimed again by another worker at {iso_utc(i['second_claim_ts'])} "
             f"({_duration(gap)} later, no renew in between)",
             f"duplicates confined to shard {i['group_key']}: {i['people']} people sent by both holders"]
    if i["holder_sends_after_second_claim"]:
        lines.append(f"the first holder kept sending {i['holder_sends_after_second_claim']} messages on that shard "
                     "after the second claim")
    return lines


def _evidence_state_loss(i: dict) -> list[str]:
    lines = [f"worker {i['group_key']} sent the same {i['people']} people twice, "
             f"median {_duration(i['median_gap_s'])} apart"]
    if i["with_start_record"] or i["with_new_incarnation"]:
        restart = f"a restart between the two sends ({i['with_start_record']} with a start record"
        if i["with_new_incarnation"]:
            restart += f"; incarnation {i['inc_before']} → {i['inc_after']}"
        lines.append(restart + ")")
    else:
        lines.append("no start record or incarnation change in the logs: the restart is inferred from the "
                     "replay (evidence thin)")
    if i["replay_density"] is not None:
        lines.append(f"the second pass replayed the list in the same order "
                     f"({_pct(i['replay_density'], 1)} of that worker's sends in the replay window were re-sends)")
    return lines


def _evidence_ab(i: dict) -> list[str]:
    variants = ", ".join(v for v in i["variants"] if v is not None)
    lines = [f"{i['people']} people in test {i['test_id']} received more than one variant ({variants})"]
    if i["main_cause"]:
        lines.append(f"underlying mechanism: {i['main_cause']} (the variant was re-drawn on the re-send)")
    return lines


EVIDENCE = {"parallel-worker": _evidence_parallel, "retry": _evidence_retry, "lease-expiry": _evidence_lease,
            "state-loss": _evidence_state_loss, "ab-contamination": _evidence_ab}


def incident_document(i: dict) -> dict:
    kind = i["kind"]
    command = NEXT_COMMAND[kind].format(campaign=i["campaign"], test_id=i["test_id"])
    return {
        "id": i["id"], "kind": kind, "campaign": i["campaign"] or None, "step": i["step"] or None,
        "test_id": i["test_id"], "workers": i["workers"], "shards": i["shards"],
        "first_send": iso_utc(i["first_send"]), "last_send": iso_utc(i["last_send"]),
        "people": i["people"], "extra_sends": int(i["extra_sends"]), "confidence": float(i["confidence"]),
        "cause": i["main_cause"] if kind == "ab-contamination" else None,
        "evidence": EVIDENCE[kind](i),
        "remediation": [FIXES[kind], command,
                        f"mailmortem affected <logs> --incident {i['id']} --format csv > apology-exclusions.csv"],
    }


AFFECTED_BATCH_PEOPLE = 200_000  # people per affected_sends query: bounds DuckDB's list aggregation


def affected_json(con) -> Iterator[str]:
    """The "affected" entries as ready JSON texts (made by DuckDB; see affected_sends), streamed."""
    sql = queries.get("affected_sends").for_duckdb()
    for ids in _incident_batches(fetch(con, "incident_sizes")):
        cursor = con.execute(sql, {"incident_ids": ids})
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


def build_document(case, include_affected: bool = True) -> dict:
    """The diagnose document; `affected` is parsed from affected_json (use that directly to stream)."""
    con = case.con
    classify.classify(con)
    document = {
        "version": 1,
        "inputs": [{"path": i.path, "syntax": i.syntax, "lines": i.lines, "records": i.records,
                    "skipped": i.skipped, "first_skipped_lines": i.first_skipped_lines} for i in case.inputs],
        "summary": classify.summary(con),
        "incidents": [incident_document(i) for i in classify.incidents(con)],
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
        out.write(separator + text)
        separator = ",\n    "
    out.write("]\n}\n" if separator == "\n    " else "\n  ]\n}\n")
