"""The incident kinds the classifier names (queries/classify.sql), in one ordered table.

Each kind carries everything said about it: the fix, the next command, the report's sentence and
the evidence lines. Evidence is built from numbers the queries computed, so a responder can check
each line against the raw logs. Every list of kinds elsewhere (CLI choices, summary counts,
simulator, benchmarks) derives from `KINDS`.
"""

from __future__ import annotations

import datetime as dt
import re
import shlex
from collections.abc import Callable, Sequence
from dataclasses import dataclass

from forensics.jsonfmt import iso_utc


@dataclass(frozen=True)
class Kind:
    name: str
    fix: str            # what stops it happening again
    next_command: str   # its {fields} are filled per incident by `command_for`, every value shell-quoted
    sentence: str       # the report's account: {who}, {what}, {shards}, {test}
    evidence: Callable[[dict], list[str]]   # an incident row (incident_rows) → evidence lines

    def command_for(self, incident: dict, logs: list[str] = (), export_args: list[str] = (),
                    read_args: list[str] = (), case_args: list[str] | None = None) -> str:
        """The next command, complete: the case's own paths and values, each quoted so that a value from the
        logs (a campaign `$(...)`, say) stays an argument when the line is pasted into a shell."""
        return self.next_command.format(**command_values(incident, logs, export_args, read_args, case_args))


# An address is put in a command only when it is plainly one: log text is hostile, and a report shows commands
# verbatim in code blocks that no escaping reaches.
_PLAIN_ADDRESS = re.compile(r"[A-Za-z0-9._%+-]+@[A-Za-z0-9.-]+")


def command_values(incident: dict, logs: list[str] = (), export_args: list[str] = (),
                   read_args: list[str] = (), case_args: list[str] | None = None) -> dict[str, str]:
    """`export_args`: --provider-export with how it was read (ExportSpec.arguments), so the command reads it alike;
    `read_args`: how the logs were read, --since/--until included (ReadOptions.arguments), so that a command
    reading them names the same records and incidents; `case_args` (default `read_args`): the same for a command
    that takes LOGS, with how the case was loaded (ReadOptions.arguments with loading)."""
    q = shlex.quote
    address = incident.get("first_recipient") or ""
    reading = " ".join(map(q, read_args))
    return {
        "campaign": q(incident["campaign"] or ""), "step": q(incident["step"] or ""),
        "test_id": q(incident["test_id"] or ""),
        "address": address if _PLAIN_ADDRESS.fullmatch(address) else '"$RECIPIENT"',
        "id": q(incident["id"]),
        # Not known to this run: a variable the responder sets, like $DATABASE_URL.
        "logs": logs_words(logs, read_args if case_args is None else case_args),
        "logs_options": " ".join([*(f"--logs {q(p)}" for p in logs), reading]).strip()
                        or '--logs "$LOGS"',
        "exports": " ".join(q(arg) for arg in export_args) or '--provider-export "$PROVIDER_EXPORT"',
    }


def logs_words(logs, read_args=(), placeholder: str = '"$LOGS"') -> str:
    """The logs of a command, shell-quoted, then the options it reads them with (`placeholder` stands for logs
    this run does not know)."""
    return " ".join([*(map(shlex.quote, map(str, logs)) if logs else [placeholder]), *map(shlex.quote, read_args)])


# Exclusion lists are written with -o, which replaces the file only when the command succeeds (a shell `>` empties
# it first, and a failing command would leave it empty); each incident's list has a file of its own.
AFFECTED_COMMAND = "mailmortem affected {logs} --incident {id} --format csv -o apology-exclusions-{id}.csv"
CASE_COMMAND = "mailmortem affected {logs} --format csv -o apology-exclusions.csv"


def affected_command(incident: dict, logs: list[str] = (), export_args: list[str] = (),
                     read_args: list[str] = (), case_args: list[str] | None = None) -> str:
    return AFFECTED_COMMAND.format(**command_values(incident, logs, export_args, read_args, case_args))


def case_affected_command(logs: list[str] = (), case_args: list[str] = (), placeholder: str = '"$LOGS"') -> str:
    """The command that writes the whole case's exclusion list (every incident's people)."""
    return CASE_COMMAND.format(logs=logs_words(logs, case_args, placeholder))


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


def _reach(i: dict) -> str:
    people = i["campaign_people"]
    return ", ".join(f"{w['worker']} {w['reached']} ({_pct(w['reached'], people)})" for w in i["per_worker"])


def _evidence_parallel(i: dict) -> list[str]:
    lines = _two_workers(i) if i["with_two_workers"] else []
    if i["with_overlapping_incarnations"]:
        lines.append(f"{i['with_overlapping_incarnations']} people sent twice by two incarnations of one worker that "
                     f"sent at the same time ({i['overlap_worker']}: {i['overlap_inc_a']} and {i['overlap_inc_b']}, "
                     "whose sends interleave): two senders at once, not a restart")
    return lines


def _two_workers(i: dict) -> list[str]:
    workers = i["workers"]
    lines = [f"{len(workers)} workers each sent campaign {i['campaign']} step {i['step']}, of its "
             f"{i['campaign_people']} people: {_reach(i)}, within the same {_minutes(i['first_send'], i['last_send'])}",
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


def _shards(i: dict) -> str:
    shards = [f"{s['shard']} ({s['duplicated_people']} people)" for s in i["per_shard"]]
    return ", ".join(shards[:6]) + (f" and {len(shards) - 6} more" if len(shards) > 6 else "")


def _evidence_lease(i: dict) -> list[str]:
    confined = (f"duplicates confined to {len(i['per_shard'])} of {i['campaign_shards']} shards of the campaign: "
                f"{_shards(i)}")
    if not i["with_expired_lease"]:
        return [confined, "no claim records: the lease expiry is inferred from timing alone (evidence thin)"]
    lines = []
    for s in [s for s in i["per_shard"] if s["first_claim_ts"] and s["second_claim_ts"]][:3]:
        gap = (s["second_claim_ts"] - s["first_claim_ts"]).total_seconds()
        lines.append(f"shard {s['shard']} claimed at {iso_utc(s['first_claim_ts'])} with a "
                     f"{_duration(i['lease_s'])} lease, claimed again by another worker at "
                     f"{iso_utc(s['second_claim_ts'])} ({_duration(gap)} later, no renew in between)")
    lines.append(f"{confined}; {i['people']} people sent by both holders")
    if i["holder_sends_after_second_claim"]:
        lines.append(f"a first holder kept sending {i['holder_sends_after_second_claim']} messages on its shard "
                     "after the second claim")
    return lines


def _evidence_state_loss(i: dict) -> list[str]:
    twice = ", ".join(f"{w['worker']} {w['duplicated_people']}" for w in i["per_worker"])
    lines = [f"the same people sent twice by the same worker ({i['people']} in all: {twice}), "
             f"median {_duration(i['median_gap_s'])} apart"]
    if i["with_start_record"] or i["with_new_incarnation"]:
        restart = f"a restart between the two sends ({i['with_start_record']} with a start record"
        if i["with_new_incarnation"]:
            restart += (f"; incarnation {i['inc_before']} → {i['inc_after']}, the first's last send before the "
                        "second's first")
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
         next_command="mailmortem sentlog check --db \"$DATABASE_URL\" --campaign {campaign} --step {step} "
                      "--recipient {address}",
         sentence="{who} sent {what} again after a send it took for failed (lost acknowledgement or error)",
         evidence=_evidence_retry),
    Kind("lease-expiry",
         fix="make the lease longer than the worst batch (≥ 1.5×) and renew it with a heartbeat while "
             "sending; check the sent-log per recipient (keyed by candidate, not shard) before each send",
         next_command="mailmortem requeue-stale --db \"$DATABASE_URL\" --older-than 45m {logs_options}",
         sentence="the lease on {shards} of {what} ran out while its holder was still sending, so "
                  "another worker claimed it and sent to the same people ({who})",
         evidence=_evidence_lease),
    Kind("state-loss",
         fix="keep sent-state in a durable sent-log table (not in the container) and check it before each "
             "send; backfill it from the provider's export",
         next_command="mailmortem backfill-sentlog {exports} --db \"$DATABASE_URL\"",
         sentence="{who} lost its record of who had been emailed (a restart) and replayed {what}",
         evidence=_evidence_state_loss),
    Kind("ab-contamination",
         fix="assign the variant once per (test, candidate) and store it (sticky assignment); exclude "
             "the contaminated candidates from the analysis",
         next_command="mailmortem ab-contamination --test-id {test_id} {logs} --format csv -o ab-exclusions-{id}.csv",
         sentence="in A/B test {test}, people of {what} received more than one variant ({who})",
         evidence=_evidence_ab),
)
KINDS = tuple(kind.name for kind in TABLE)
_BY_NAME = {kind.name: kind for kind in TABLE}


def kind_named(name: str) -> Kind:
    """The kind called `name` (KeyError for a name the table does not hold)."""
    return _BY_NAME[name]


@dataclass(frozen=True)
class Rerun:
    """How this run read what it read, for its next commands to read it alike (the arguments of `command_values`)."""

    logs: Sequence[str] = ()
    export_args: Sequence[str] = ()   # ExportSpec.arguments
    read_args: Sequence[str] = ()     # ReadOptions.arguments
    case_args: Sequence[str] | None = None  # ReadOptions.arguments(loading=True) (default: read_args)


@dataclass(frozen=True)
class KindText:
    """What an incident's kind says of it: the evidence lines, and the remediation (the fix, the kind's next
    command, the command that writes the incident's exclusion list)."""

    evidence: list[str]
    remediation: list[str]


@dataclass(frozen=True)
class CaseText:
    """What the kinds say of a case: each incident's KindText, in the incidents' order, and the command that
    writes the whole case's exclusion list."""

    incidents: list[KindText]
    case_command: str


def describe(incidents: list[dict], rerun: Rerun = Rerun()) -> CaseText:
    """Everything the diagnose document says of the incidents (incident_rows) from their kinds."""
    args = (rerun.logs, rerun.export_args, rerun.read_args, rerun.case_args)
    texts = []
    for incident in incidents:
        kind = kind_named(incident["kind"])
        texts.append(KindText(kind.evidence(incident),
                              [kind.fix, kind.command_for(incident, *args), affected_command(incident, *args)]))
    case_args = rerun.read_args if rerun.case_args is None else rerun.case_args
    return CaseText(texts, case_affected_command(rerun.logs, case_args))
