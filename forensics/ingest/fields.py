"""The log vocabulary: canonical fields and the aliases each accepts (docs/log-vocabulary.md).

`FieldMap` resolves the keys actually present in a case to canonical fields,
with `--field canonical=their_name` overrides (and the same from a config file).
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


def load_config(path: str | Path) -> dict[str, str]:
    """Read `[fields]` from a TOML config file: `recipient = "To"`."""
    try:
        data = tomllib.loads(Path(path).read_text(encoding="utf-8"))
    except FileNotFoundError:
        raise ConfigError(f"config file not found: {path}") from None
    except (tomllib.TOMLDecodeError, UnicodeDecodeError) as exc:
        raise ConfigError(f"config file {path} is not valid TOML: {exc}") from None
    fields = data.get("fields", {})
    if not isinstance(fields, dict):
        raise ConfigError(f"config file {path}: [fields] must be a table of canonical = \"name\"")
    return parse_overrides([f"{k}={v}" for k, v in fields.items()])


@dataclass
class FieldMap:
    """Which present keys feed each canonical field, in order of preference."""

    overrides: dict[str, str] = field(default_factory=dict)

    def canonical_of(self, key: str) -> str | None:
        lowered = key.lower()
        for canon, name in self.overrides.items():
            if name.lower() == lowered:
                return canon
        canon = _ALIAS_TO_CANONICAL.get(lowered)
        if canon is None and "." in lowered:  # nested JSON: `mail.to` falls back on its last segment
            canon = _ALIAS_TO_CANONICAL.get(lowered.rsplit(".", 1)[1])
            return canon if canon and canon not in self.overrides else None
        return None if canon in self.overrides else canon

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
