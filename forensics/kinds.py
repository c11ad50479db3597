"""The incident kinds the classifier names (queries/classify.sql), in one ordered table.

Each kind carries everything said about it: the fix, the next command, the report's sentence and
the evidence lines. Evidence is built from numbers the queries computed, so a responder can check
each line against the raw logs. Every list of kinds elsewhere (CLI choices, summary counts,
simulator, benchmarks) derives from `KINDS`.
"""

from __future__ import annotations

import datetime as dt
from collections.abc import Callable
from dataclasses import dataclass

from forensics.jsonfmt import iso_utc


@dataclass(frozen=True)
class Kind:
    name: str
    fix: str            # what stops it happening again
    next_command: str   # {campaign} and {test_id} filled per incident; <logs>, <export> by the report
    sentence: str       # the report's account: {who}, {what}, {shards}, {test}
    evidence: Callable[[dict], list[str]]   # an incident row (incident_rows) → evidence lines

    def command_for(self, incident: dict) -> str:
        return self.next_command.format(campaign=incident["campaign"], test_id=incident["test_id"])


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


# The order is the order of diagnose's summary.by_kind.
TABLE = (
    Kind("parallel-worker",
         fix="add an atomic claim step (UPDATE … WHERE id IN (SELECT … FOR UPDATE SKIP LOCKED)) and a "
             "job-level lock so a second instance cannot read the same list; dedupe at send time",
         next_command="mailmortem requeue-stale --db \"$DATABASE_URL\" --older-than 45m",
         sentence="{who} worked {what} at the same time, each sending to the same list",
         evidence=_evidence_parallel),
    Kind("retry",
         fix="send with an idempotency key per (campaign, step, recipient) and check the sent-log before every "
             "send, so a lost acknowledgement cannot cause a second email",
         next_command="mailmortem sentlog check --db \"$DATABASE_URL\" --campaign {campaign} --recipient <address>",
         sentence="{who} sent {what} again after a send it took for failed (lost acknowledgement or error)",
         evidence=_evidence_retry),
    Kind("lease-expiry",
         fix="make the lease longer than the worst batch (≥ 1.5×) and renew it with a heartbeat while "
             "sending; check the sent-log per recipient (keyed by candidate, not shard) before each send",
         next_command="mailmortem requeue-stale --db \"$DATABASE_URL\" --older-than 45m --logs <logs>",
         sentence="the lease on {shards} of {what} ran out while its holder was still sending, so "
                  "another worker claimed it and sent to the same people ({who})",
         evidence=_evidence_lease),
    Kind("state-loss",
         fix="keep sent-state in a durable sent-log table (not in the container) and check it before each "
             "send; backfill it from the provider's export",
         next_command="mailmortem backfill-sentlog --provider-export <export> --db \"$DATABASE_URL\"",
         sentence="{who} lost its record of who had been emailed (a restart) and replayed {what}",
         evidence=_evidence_state_loss),
    Kind("ab-contamination",
         fix="assign the variant once per (test, candidate) and store it (sticky assignment); exclude "
             "the contaminated candidates from the analysis",
         next_command="mailmortem ab-contamination --test-id {test_id} <logs> --format csv > ab-exclusions.csv",
         sentence="in A/B test {test}, people of {what} received more than one variant ({who})",
         evidence=_evidence_ab),
)
KINDS = tuple(kind.name for kind in TABLE)
_BY_NAME = {kind.name: kind for kind in TABLE}


def kind_named(name: str) -> Kind:
    """The kind called `name` (KeyError for a name the table does not hold)."""
    return _BY_NAME[name]
