"""The vocabulary of a case: which key is read as which canonical field, which event value as which event, and
why (docs/log-vocabulary.md#inference).

The alias table (forensics.ingest.fields) is the first rule and --field / --event / a config always win. A
field the aliases leave unread is inferred from a sample of each file's first records (keys and values gathered
by DuckDB: queries/vocabulary.sql) when one candidate clearly wins: by its key's words (forensics.names), else by
its values' shape. Two candidates and no name to decide between them is a refusal naming both. Send events are
the values carried by the records that hold a recipient and a message id.
"""

from __future__ import annotations

import json
import re
from dataclasses import dataclass, field

import queries
from forensics.errors import ConfigError
from forensics.ingest.detect import csv_header
from forensics.ingest.fields import CANONICAL, EVENTS, KNOWN_EVENT_VALUES, FieldMap
from forensics.names import name_words

ADDRESS = r"[A-Za-z0-9._%+'-]+@[A-Za-z0-9-]+(\.[A-Za-z0-9-]+)*\.[A-Za-z]{2,}"
# canonical field → (word groups: a key holding every word of one group is a candidate, words that rule it out)
NAME_RULES: dict[str, tuple[tuple[tuple[str, ...], ...], tuple[str, ...]]] = {
    "recipient": ((("to",), ("recipient",), ("rcpt",), ("email",), ("address",)),
                  ("from", "sender", "reply", "cc", "bcc", "return", "id")),
    "msg_id": ((("message", "id"), ("msg", "id"), ("messageid",), ("msgid",), ("smtp", "id")),
               ("template", "thread", "conversation", "reply", "parent", "references", "campaign", "step")),
    "ts": ((("time",), ("timestamp",), ("ts",), ("datetime",), ("t",)), ("unix", "nano", "observed")),
    "event": ((("event",), ("evt",), ("action",), ("msg",), ("message",), ("mt",), ("body",)),
              ("id", "level", "type", "count")),
    "step": ((("step",), ("touch",), ("stage",)), ()),
    "campaign": ((("campaign",), ("sequence",), ("cadence",), ("journey",)), ("step",)),
    "worker": ((("worker",), ("host",), ("hostname",), ("instance",), ("node",), ("pod",), ("consumer",),
                ("machine",)),
               ("id", "ip", "user")),
    "incarnation": ((("pid",), ("process", "id"), ("container",), ("boot",)), ("name", "image")),
    "candidate": ((("lead",), ("candidate",), ("contact",), ("prospect",)), ("email", "address", "name")),
    "shard": ((("shard",), ("partition",), ("batch",)), ()),
    "lease": ((("lease",), ("visibility",)), ()),
    "test_id": ((("experiment",), ("ab", "test")), ("variant", "arm")),
    "variant": ((("variant",), ("arm",), ("cohort",)), ()),
    "attempt": ((("attempt",), ("retry",), ("retries",)), ()),
    "error": ((("error",), ("err",), ("exception",)), ("code", "count")),
}
CORE = ("recipient", "msg_id", "ts", "event")  # a send cannot be read without them: ambiguity is a refusal
DEDUPE = ("campaign", "step")  # what a person's sends are told apart by
# Event values read by their words when the table does not know them (a failure is never a send).
EVENT_WORDS: dict[str, tuple[str, ...]] = {
    "error": ("fail", "failed", "failure", "error", "errored", "bounce", "bounced", "reject", "rejected", "timeout",
              "timed", "abort", "aborted", "cancel", "cancelled", "canceled", "throttled", "not", "unable"),
    "start": ("start", "started", "starting", "startup", "boot", "booted"),
    "claim": ("claim", "claimed"), "expire": ("expire", "expired"), "renew": ("renew", "renewed", "heartbeat"),
    "release": ("release", "released"),
}
# An attempt that did not end in a send says so in words the table lacks ("send timed out", "email not sent"): a
# regex of both Python's re and DuckDB's RE2.
NOT_SEND = ("fail|error|bounce|reject|defer|drop|open|click|unsubscrib|spam|complain|retry|retrying|skip|timeout|"
            r"timed.out|abort|cancel|throttl|suppress|unable|\bnot\b|\bnever\b")
SEND_WORDS = ("send", "sent", "dispatched", "delivered", "mailed", "emailed")
# A send that happened, not one about to be made: "send email", "email send attempt" are logged before the call.
DONE_WORDS = ("sent", "dispatched", "delivered", "mailed", "emailed")
SENDING = "send|sent|dispatch|deliver"  # an unread event value with a recipient that may have been a send
SAMPLE_SHARE = 0.9  # the share of a key's sampled values that must have a shape for it to count


@dataclass
class KeyStat:
    key: str
    records: int
    distinct: int
    address: float
    message_id: float
    time: float
    small_int: float
    examples: list[str]

    @property
    def shape(self) -> str:
        if self.message_id >= SAMPLE_SHARE:
            return "message ids <…@…>"
        if self.address >= SAMPLE_SHARE:
            return "addresses"
        if self.time >= SAMPLE_SHARE:
            return "times"
        if self.small_int >= SAMPLE_SHARE:
            return "small integers"
        if self.distinct >= 0.95 * self.records and self.records > 3:
            return "unique per record"
        return f"{self.distinct:,} distinct value{'s' if self.distinct != 1 else ''}"


@dataclass
class Decided:
    """How one canonical field (or event value) is read: the key (or value), how it was decided, why."""

    key: str
    how: str  # "alias", "--field", "--event", "name", "values", "carries recipient and msg id", "words"
    why: str = ""

    def to_json(self) -> dict:
        return {"key": self.key, "how": self.how, "why": self.why or None}


@dataclass
class Vocabulary:
    records: int = 0  # the records sampled
    keys: list[KeyStat] = field(default_factory=list)
    fields: dict[str, Decided] = field(default_factory=dict)
    events: dict[str, Decided] = field(default_factory=dict)  # value → its event (Decided.key)
    event_values: list[dict] = field(default_factory=list)  # per value of the event keys: records, with_both
    unread_roles: dict[str, list[str]] = field(default_factory=dict)  # campaign/step → candidate keys
    ambiguous: dict[str, str] = field(default_factory=dict)  # a field two keys could be → why it was refused
    also: dict[str, list[Decided]] = field(default_factory=dict)  # keys read where the field's first key is absent
    resolved: dict[str, list[str]] = field(default_factory=dict)  # canonical → the sampled keys the aliases read

    def stated(self) -> bool:
        """Whether anything beyond the alias table decided the reading (then it is shown)."""
        return (any(d.how != "alias" for d in [*self.fields.values(), *self.events.values()])
                or bool(self.unread_roles) or bool(self.also))

    def keys_of(self, canon: str) -> list[str]:
        """Every key read as the field: its first, then those read where it is absent."""
        first = [self.fields[canon].key] if canon in self.fields else []
        return first + [d.key for d in self.also.get(canon, [])]

    def to_json(self) -> dict:
        return {"fields": {canon: {**d.to_json(), **({"also": [a.to_json() for a in self.also[canon]]}
                                                     if canon in self.also else {})}
                           for canon, d in self.fields.items()},
                "events": {value: {"event": d.key, "how": d.how, "why": d.why or None} for value, d in self.events.items()},
                "unread": {role: keys for role, keys in self.unread_roles.items()},
                "sampled_records": self.records}


def read(con, files, field_map: FieldMap, refuse: bool = True) -> Vocabulary:
    """Sample the files (forensics.ingest.load's _File: syntax, head, envelope) and decide the reading; the
    inferred keys and event values go into `field_map` (inferred, events). A field a send needs that two keys
    could be is refused (ConfigError naming them), or with `refuse=False` (`mailmortem fields`) only said."""
    vocabulary = sample(con, files)
    keys_read = field_map.keys_read([k.key for k in vocabulary.keys])
    resolved = vocabulary.resolved = keys_read.fields
    for canon in CANONICAL:
        if resolved[canon]:
            key = resolved[canon][0]
            how = "alias"
            if field_map.overrides.get(canon, "").lower() == key.lower():
                how = "config" if canon in field_map.from_config else "--field"
            vocabulary.fields[canon] = Decided(key, how)
    if field_map.infer:
        _few_people_by_last_name(vocabulary, field_map)
        _infer_fields(vocabulary, field_map, keys_read.by_alias)
    _read_events(con, vocabulary, field_map)
    _unread_roles(con, vocabulary, field_map)
    if refuse and vocabulary.ambiguous:
        raise ConfigError(next(iter(vocabulary.ambiguous.values())))
    if field_map.events:  # mm_event reads the mapped values from here on
        queries.script(con, "named_events_macro", values=json.dumps(list(field_map.events)),
                       canonicals=json.dumps(list(field_map.events.values())))
    return vocabulary


def sample(con, files) -> Vocabulary:
    """The sampled keys of every plain file (a file in an envelope is read as its envelope says)."""
    queries.rows(con, "vocabulary_pairs")  # every block of the sample through one door: these two return no rows
    for file in files:
        if not file.head or file.envelope or file.syntax not in ("logfmt", "jsonl", "csv"):
            continue
        text = file.head.decode("utf-8", errors="replace")
        if len(file.head) >= 65536:
            text = text[:text.rfind("\n") + 1]  # the sniffed head's last line may be cut
        params = {"file_id": file.file_id, "text": text}
        if file.syntax == "csv":
            found = csv_header(file.head)
            if found is None:
                continue
            params.update(header_line=found[0], keys=found[1])
        queries.rows(con, f"vocabulary_sample_{file.syntax}", params)
    keys = [KeyStat(r["key"], r["records"], r["distinct_values"], r["address_share"], r["message_id_share"],
                    r["time_share"], r["small_int_share"], list(r["examples"]))
            for r in queries.rows(con, "vocabulary_key_stats", {"address": ADDRESS})]
    [sampled] = queries.rows(con, "vocabulary_sampled_records")
    return Vocabulary(sampled["records"], keys)


def by_name(key: str, canon: str) -> bool:
    """Whether a key's words name a canonical field (NAME_RULES)."""
    groups, excluded = NAME_RULES.get(canon, ((), ()))
    words = set(name_words(key))
    return not words & set(excluded) and any(set(group) <= words for group in groups)


def _fits(stat: KeyStat, canon: str) -> bool:
    """Whether a key's values could be the field's (an address for the recipient, a time for ts...). A message id
    is (nearly) unique per record, or one template's id would merge a person's sends into one; a campaign or
    step takes few values, or a log's sequence number would make every send its own step. A recipient takes many
    (a rep's `user.email` named like one would make everyone one person)."""
    few = stat.distinct <= 100 and (stat.distinct <= 3 or 2 * stat.distinct <= stat.records)
    return {"recipient": stat.address >= 0.5 and _many_people(stat), "ts": stat.time >= SAMPLE_SHARE,
            "msg_id": (stat.address < 0.5 or stat.message_id >= 0.5) and stat.distinct >= 0.8 * stat.records,
            "step": few, "campaign": few, "event": stat.address < 0.5,
            "candidate": stat.address < 0.5}.get(canon, True)


_BY_VALUES = {"recipient": ("address", "addresses"), "msg_id": ("message_id", "<…@…>"), "ts": ("time", "times")}


# Fields an alias already reads that may take more keys by name: one worker's file logs `to`, another's `to_email`.
ALSO_BY_NAME = ("recipient", "msg_id", "step", "campaign")


def _infer_fields(vocabulary: Vocabulary, field_map: FieldMap, by_alias: frozenset[str]) -> None:
    """Fields no alias reads, from the keys no alias reads (`by_alias`: those that one does)."""
    taken = {d.key for d in vocabulary.fields.values()}
    for canon in (*CORE, *[c for c in CANONICAL if c not in CORE]):
        free = [k for k in vocabulary.keys if k.key not in taken and k.key not in by_alias]
        named = [k for k in free if by_name(k.key, canon) and _fits(k, canon)]
        if canon == "step" and _template_as_step(vocabulary, field_map, named):
            taken.update(k.key for k in named)
            continue
        if canon in vocabulary.fields:
            if canon in ALSO_BY_NAME and canon not in field_map.overrides and named:
                vocabulary.also[canon] = [Decided(k.key, "name", f"its words: {' '.join(name_words(k.key))}")
                                          for k in named]
                field_map.inferred[canon] = [k.key for k in named]
                taken.update(k.key for k in named)
            continue
        if canon == "event" and len(named) > 1:
            continue  # decided by which one's values the sends carry (_read_events)
        decided = _decide(vocabulary, canon, named, free)
        if decided:
            vocabulary.fields[canon] = decided
            field_map.inferred[canon] = [decided.key]
            taken.add(decided.key)


def _few_people_by_last_name(vocabulary: Vocabulary, field_map: FieldMap) -> None:
    """A nested key the alias table reads by its last name (`user.email`: the rep an agent sends for) holding few
    addresses, beside a key of many (the lead's): which is the recipient is not clear, and is refused."""
    first = vocabulary.fields.get("recipient")
    stats = {k.key: k for k in vocabulary.keys}
    if (not first or first.how != "alias" or "." not in first.key or first.key not in stats  # flat: an alias itself
            or _many_people(stats[first.key])):
        return
    others = [k.key for k in vocabulary.keys if k.key != first.key and k.address >= SAMPLE_SHARE and _many_people(k)
              and not set(name_words(k.key)) & set(NAME_RULES["recipient"][1])]
    if others:
        _ambiguous(vocabulary, "recipient", [first.key, *others], f"{first.key} holds only "
                   f"{stats[first.key].distinct:,} address{'es' if stats[first.key].distinct != 1 else ''}")


def _template_as_step(vocabulary: Vocabulary, field_map: FieldMap, named: list[KeyStat]) -> bool:
    """A template's id (the alias table's `template`, `template_id`) beside one key named like a step (`seq_step`):
    the named key is the step, the template's id is set aside. One template per campaign would make a person's step
    1 and step 2 one step, their intended contact a duplicate."""
    first = vocabulary.fields.get("step")
    if not first or first.how != "alias" or "template" not in name_words(first.key) or len(named) != 1:
        return False
    key = named[0].key
    vocabulary.fields["step"] = Decided(key, "name", f"its words: {' '.join(name_words(key))}; "
                                                     f"{first.key} names a template, read as nothing")
    field_map.inferred["step"] = [key]
    field_map.set_aside.update(k.lower() for k in vocabulary.resolved["step"] if "template" in name_words(k))
    return True


def _decide(vocabulary: Vocabulary, canon: str, named: list[KeyStat], free: list[KeyStat]) -> Decided | None:
    if len(named) == 1:
        return Decided(named[0].key, "name", f"its words: {' '.join(name_words(named[0].key))}")
    if len(named) > 1:
        return _ambiguous(vocabulary, canon, [k.key for k in named], "their names")
    if canon not in _BY_VALUES:
        return None
    attribute, shape = _BY_VALUES[canon]
    # a key whose words rule the field out (a lone `from` for the recipient) is never read as it by its values
    shaped = [k for k in free if getattr(k, attribute) >= SAMPLE_SHARE
              and not set(name_words(k.key)) & set(NAME_RULES[canon][1])]
    if canon == "ts" and len(shaped) > 1:
        return None  # many time keys and none named a time: records without one are counted and located
    if len(shaped) == 1 and canon == "recipient" and not _many_people(shaped[0]):
        return None
    if len(shaped) == 1:
        share = getattr(shaped[0], attribute) * 100
        return Decided(shaped[0].key, "values", f"{shape} in {share:.0f} % of {shaped[0].records:,} values")
    if len(shaped) > 1:
        return _ambiguous(vocabulary, canon, [k.key for k in shaped], f"all hold {shape}")
    return None


def _many_people(stat: KeyStat) -> bool:
    """Whether an address key's values vary as recipients do: an account owner's or a sender's few addresses beside a
    recipient the reader cannot see (OpenTelemetry's `attributes."email.to"`) would make everyone one person."""
    return 4 * stat.distinct >= stat.records


def _ambiguous(vocabulary: Vocabulary, canon: str, keys: list[str], why: str) -> None:
    if canon in CORE:
        vocabulary.ambiguous[canon] = (f"cannot tell which key holds the {canon}: {', '.join(keys)} ({why}); pass "
                                       f"--field {canon}=KEY (`mailmortem fields LOGS` lists what each key holds)")
    return None


def _read_events(con, vocabulary: Vocabulary, field_map: FieldMap) -> None:
    """Event values named by --event/[events], the table, their words, or inferred as sends from what they carry."""
    keys = _event_keys(vocabulary)
    rows = queries.rows(con, "vocabulary_event_values", {
        "event_keys": keys, "recipient_keys": _keys_of(vocabulary, "recipient"),
        "msg_id_keys": _keys_of(vocabulary, "msg_id")}) if keys else []
    if "event" not in vocabulary.fields and field_map.infer and rows:
        rows = _choose_event_key(vocabulary, field_map, rows)
    vocabulary.event_values = rows
    for value, canon in field_map.events.items():
        vocabulary.events[value] = Decided(canon, "config" if value in field_map.from_config else "--event")
    if field_map.infer:
        _infer_events(vocabulary, rows, field_map)
    field_map.events.update({value: d.key for value, d in vocabulary.events.items() if d.how not in ("--event", "config")})


def _event_keys(vocabulary: Vocabulary) -> list[str]:
    if "event" in vocabulary.fields:
        return vocabulary.resolved.get("event") or [vocabulary.fields["event"].key]
    taken = {d.key for d in vocabulary.fields.values()}
    return [k.key for k in vocabulary.keys if k.key not in taken and by_name(k.key, "event") and _fits(k, "event")]


def _keys_of(vocabulary: Vocabulary, canon: str) -> list[str]:
    """The keys of every file read as the field: all its aliases present, then the inferred ones."""
    return list(dict.fromkeys([*vocabulary.resolved.get(canon, []), *vocabulary.keys_of(canon)]))


def _choose_event_key(vocabulary: Vocabulary, field_map: FieldMap, rows: list[dict]) -> list[dict]:
    """Of several keys named like an event (msg and event, @m and @mt), the one whose most frequent value on the
    records carrying a recipient and a message id covers most of them (a rendered message varies per record)."""
    best: dict[str, int] = {}
    for row in rows:
        best[row["key"]] = max(best.get(row["key"], 0), row["with_both"])
    ranked = sorted(best.items(), key=lambda kv: -kv[1])
    if not ranked or ranked[0][1] == 0 or (len(ranked) > 1 and ranked[1][1] == ranked[0][1]):
        if len(ranked) > 1:
            _ambiguous(vocabulary, "event", [k for k, _n in ranked], "their names")
        return rows
    key = ranked[0][0]
    vocabulary.fields["event"] = Decided(key, "name", f"its words, and one value on {ranked[0][1]:,} sends")
    field_map.inferred["event"] = [key]
    return [r for r in rows if r["key"] == key]


def _infer_events(vocabulary: Vocabulary, rows: list[dict], field_map: FieldMap) -> None:
    known = set(field_map.events)
    unknown = [r for r in rows if r["value"].lower() not in known and not _known_value(r["value"])]
    sends = [r for r in unknown if r["with_both"] >= SAMPLE_SHARE * r["records"] and r["with_both"]
             and not re.search(NOT_SEND, r["value"].lower())]
    worded = [r for r in sends if set(name_words(r["value"])) & set(SEND_WORDS)]
    done = [r for r in worded if set(name_words(r["value"])) & set(DONE_WORDS)]
    if any(r["with_both"] and (_known_value(r["value"]) == "send" or field_map.events.get(r["value"].lower()) == "send")
           for r in rows):
        sends = done  # the table or --event reads some sends: another value is one only if it says one was made
    else:
        if len(sends) > 1 and (done or worded) and len(done or worded) < len(sends):
            sends = done or worded  # "email sent" beside "send email" (the line before the call) or "alpha"
        if len(sends) > 1 and not worded:
            vocabulary.ambiguous["send"] = "cannot tell which event value is a send: " + ", ".join(
                f'"{r["value"]}" ({r["with_both"]:,} records)' for r in sends[:5]) + (
                ' all carry a recipient and a message id; pass --event send="VALUE" (repeatable)')
            sends = []
    for r in sends:
        share = 100 * r["with_both"] / r["records"]
        vocabulary.events[r["value"].lower()] = Decided(
            "send", "carries recipient and msg id", f"in {share:.0f} % of {r['records']:,} records")
    for r in unknown:
        canon = _by_words(r["value"])
        if r["value"].lower() not in vocabulary.events and canon:
            vocabulary.events[r["value"].lower()] = Decided(canon, "words", " ".join(name_words(r["value"])))


def _known_value(value: str) -> str | None:
    """The event the table (mm_known_event) reads a value as, None for a value it does not know."""
    lowered = value.strip().lower()
    return lowered if lowered in EVENTS else KNOWN_EVENT_VALUES.get(lowered)


def _by_words(value: str) -> str | None:
    words = set(name_words(value))
    found = [canon for canon, names in EVENT_WORDS.items() if words & set(names)]
    return found[0] if len(found) == 1 else None


def _unread_roles(con, vocabulary: Vocabulary, field_map: FieldMap) -> None:
    """A campaign or step no key was found for while keys that could hold one are on the sends."""
    if "recipient" not in vocabulary.fields or "msg_id" not in vocabulary.fields:
        return
    taken = {key for canon in vocabulary.fields for key in _keys_of(vocabulary, canon)
             if key.lower() not in field_map.set_aside}
    on_sends = [r for r in queries.rows(con, "vocabulary_keys_on_sends", {
        "recipient_keys": _keys_of(vocabulary, "recipient"), "msg_id_keys": _keys_of(vocabulary, "msg_id")})
        if r["key"] not in taken]
    for role in DEDUPE:
        if role in vocabulary.fields or role in field_map.overrides:  # --field step=none: the log has none
            continue
        named = [r["key"] for r in on_sends if by_name(r["key"], role)
                 or (role == "campaign" and r["key"].lower() in field_map.set_aside)]  # a template per campaign
        # a few-valued key that differs between one person's sends, named like no other field, may be the step
        shaped = [r["key"] for r in on_sends if role == "step" and r["varies_per_person"]
                  and 1 < r["distinct_values"] <= 20 and 2 * r["distinct_values"] <= r["records"]
                  and not any(by_name(r["key"], canon) for canon in NAME_RULES)]
        candidates = list(dict.fromkeys(named + shaped))
        if candidates:
            vocabulary.unread_roles[role] = candidates
