"""The log vocabulary: canonical fields and the aliases each accepts (docs/log-vocabulary.md).

`FieldMap` resolves the keys actually present in a case to canonical fields,
with `--field canonical=their_name` overrides (and the same from a config file), then the alias table, then
the keys inferred from a sample (forensics.ingest.vocabulary); `--event canonical=value` names event values.
"""

from __future__ import annotations

import tomllib
from dataclasses import dataclass, field
from pathlib import Path

from forensics.errors import ConfigError

ALIASES: dict[str, tuple[str, ...]] = {
    "ts": ("ts", "time", "timestamp", "@timestamp", "datetime", "date"),
    "event": ("event", "evt", "action", "event_type"),
    "worker": ("worker", "worker_id", "agent", "agent_id", "instance", "consumer", "hostname", "host"),
    "incarnation": ("pid", "container", "container_id", "boot_id", "process_id"),
    "campaign": ("campaign", "campaign_id", "sequence", "sequence_id"),
    "step": ("step", "touch", "sequence_step", "template", "template_id"),
    "recipient": ("email", "to", "recipient", "rcpt", "rcpt_to", "lead_email", "candidate_email"),
    "candidate": ("lead", "lead_id", "candidate", "candidate_id", "contact_id", "prospect_id"),
    "msg_id": ("msg_id", "msg-id", "message_id", "message-id", "messageid", "msgid", "smtp-id"),
    "shard": ("shard", "shard_id", "batch", "batch_id", "partition"),
    "lease": ("lease", "lease_s", "lease_seconds", "ttl", "visibility_timeout"),
    "test_id": ("test_id", "test", "experiment", "experiment_id", "ab_test"),
    "variant": ("variant", "arm", "bucket"),
    "status": ("status", "result", "outcome"),
    "attempt": ("attempt", "try", "retry", "retries"),
    "error": ("error", "err", "exception"),
    "count": ("count", "n", "size"),
}
CANONICAL = tuple(ALIASES)
# The events a record is read as (queries/macros.sql, mm_known_event) and that --event may name.
EVENTS = ("send", "claim", "renew", "release", "expire", "start", "error")
# The values the table reads as each event: the same lists as mm_known_event in queries/macros.sql (a test holds
# them together).
KNOWN_EVENT_VALUES = {value: event for event, values in {
    "send": ("send", "sent", "email_sent", "send_ok", "delivered_to_provider"),
    "claim": ("claim", "claimed", "lease_acquired", "acquire"),
    "renew": ("renew", "lease_renew", "heartbeat", "extend"),
    "release": ("release", "released", "batch_done", "complete", "ack"),
    "expire": ("expire", "lease_expired", "expired"),
    "start": ("start", "worker_start", "startup", "boot", "started"),
    "error": ("error", "send_error", "send_failed", "exception"),
}.items() for value in values}
_ALIAS_TO_CANONICAL = {alias: canon for canon, names in ALIASES.items() for alias in names}


def parse_overrides(pairs: list[str] | tuple[str, ...]) -> dict[str, str]:
    """`["recipient=To", "msg_id=Message ID"]` → {"recipient": "To", ...}; unknown targets refused."""
    overrides: dict[str, str] = {}
    for pair in pairs:
        canon, sep, name = pair.partition("=")
        canon, name = canon.strip(), name.strip()
        if not sep or not canon or not name:
            raise ConfigError(f"--field expects canonical=name, got {pair!r}")
        if canon not in ALIASES:
            raise ConfigError(f"--field {pair!r}: unknown field {canon!r} (known: {', '.join(CANONICAL)})")
        overrides[canon] = name
    return overrides


def parse_event_overrides(pairs: list[str] | tuple[str, ...], option: str = "--event") -> dict[str, str]:
    """`['send=outreach email sent']` → {"outreach email sent": "send"} (values compared lower-case, trimmed)."""
    events: dict[str, str] = {}
    for pair in pairs:
        canon, sep, value = pair.partition("=")
        canon, value = canon.strip(), value.strip().strip('"').strip()
        if not sep or not canon or not value:
            raise ConfigError(f"{option} expects event=value, e.g. send=\"email sent\", got {pair!r}")
        if canon not in EVENTS:
            raise ConfigError(f"{option} {pair!r}: unknown event {canon!r} (known: {', '.join(EVENTS)})")
        events[value.lower()] = canon
    return events


def parse_mappings(fields: list[str] | tuple[str, ...], events: list[str] | tuple[str, ...]
                   ) -> tuple[dict[str, str], dict[str, str]]:
    """--field and --event as given (`NAME=VALUE`), checked: (parse_overrides(fields), parse_event_overrides(events))."""
    return parse_overrides(fields), parse_event_overrides(events)


@dataclass
class Config:
    """A TOML config's `[fields]` (canonical → key) and `[events]` (value → event)."""

    fields: dict[str, str] = field(default_factory=dict)
    events: dict[str, str] = field(default_factory=dict)


def load_config(path: str | Path) -> Config:
    """Read `[fields]` (`recipient = "To"`) and `[events]` (`send = "outreach email sent"`, or a list of values)
    from a TOML config file."""
    try:
        data = tomllib.loads(Path(path).read_text(encoding="utf-8"))
    except FileNotFoundError:
        raise ConfigError(f"config file not found: {path}") from None
    except (tomllib.TOMLDecodeError, UnicodeDecodeError) as exc:
        raise ConfigError(f"config file {path} is not valid TOML: {exc}") from None
    fields, events = data.get("fields", {}), data.get("events", {})
    if not isinstance(fields, dict):
        raise ConfigError(f"config file {path}: [fields] must be a table of canonical = \"name\"")
    if not isinstance(events, dict):
        raise ConfigError(f"config file {path}: [events] must be a table of event = \"value\" (or a list)")
    pairs = [f"{k}={v}" for k, values in events.items()
             for v in (values if isinstance(values, list) else [values])]
    return Config(parse_overrides([f"{k}={v}" for k, v in fields.items()]),
                  parse_event_overrides(pairs, f"config file {path}: [events]"))


@dataclass(frozen=True)
class KeysRead:
    """The keys present in a sample as a FieldMap reads them (FieldMap.keys_read)."""

    fields: dict[str, list[str]]  # canonical → the present keys that feed it, best first
    by_alias: frozenset[str]  # the present keys the alias table or --field reads, inference left aside


@dataclass
class FieldMap:
    """Which present keys feed each canonical field, in order of preference."""

    overrides: dict[str, str] = field(default_factory=dict)  # --field and [fields]: always win
    events: dict[str, str] = field(default_factory=dict)  # --event and [events]: value (lower-case) → event
    inferred: dict[str, list[str]] = field(default_factory=dict)  # canonical → keys read after its aliases
    infer: bool = True  # --no-infer: the alias table and the mappings only
    from_config: frozenset[str] = frozenset()  # the fields and event values mapped by --config (not an option)
    sampled: bool = False  # a sample with keys decided the reading (a watch's later polls keep it)
    set_aside: set[str] = field(default_factory=set)  # alias keys (lower-case) inference found to be something else
    # The logfmt keys read as a field that a watch's polls have seen (None outside a watch): a later poll's chunk is
    # read with them and its head's keys rather than sampled again in DuckDB, a cost every poll paid
    keys_seen: set[str] | None = None

    def canonical_of(self, key: str) -> str | None:
        lowered = key.lower()
        for canon, name in self.overrides.items():
            if name.lower() == lowered:
                return canon
        if lowered in self.set_aside:
            return None
        canon = _ALIAS_TO_CANONICAL.get(lowered)
        if canon is None and "." in lowered:  # nested JSON: `mail.to` falls back on its last segment
            canon = _ALIAS_TO_CANONICAL.get(lowered.rsplit(".", 1)[1])
            canon = canon if canon and canon not in self.overrides else None
        elif canon in self.overrides:
            canon = None
        return canon or self._inferred_of(lowered)

    def _inferred_of(self, lowered: str) -> str | None:
        for canon, names in self.inferred.items():
            if lowered in (name.lower() for name in names) and canon not in self.overrides:
                return canon
        return None

    def alias_of(self, key: str) -> str | None:
        """The field the alias table (or --field) reads `key` as, inference left aside."""
        return FieldMap(self.overrides).canonical_of(key)

    def keys_read(self, present_keys: list[str]) -> KeysRead:
        """How the keys of a sample are read: `resolve`d, and which the alias table or --field reads (`alias_of`)."""
        return KeysRead(self.resolve(present_keys), frozenset(key for key in present_keys if self.alias_of(key)))

    def resolve(self, present_keys: list[str]) -> dict[str, list[str]]:
        """canonical → the present keys that feed it (exact names, best first)."""
        chosen: dict[str, list[str]] = {canon: [] for canon in CANONICAL}
        ranked = sorted(present_keys, key=lambda k: ("." in k, _rank(k)))
        for key in ranked:
            canon = self.canonical_of(key)
            if canon:
                chosen[canon].append(key)
        return chosen


def _rank(key: str) -> int:
    canon = _ALIAS_TO_CANONICAL.get(key.lower())
    return ALIASES[canon].index(key.lower()) if canon else 99
