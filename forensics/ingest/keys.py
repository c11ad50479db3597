"""`mailmortem fields`: what each key of the logs holds and what it is read as, and the config of that reading.

Nothing is staged: the files' first records are sampled (forensics.ingest.vocabulary) exactly as `diagnose`
samples them, so the reading shown is the one `diagnose` would use.
"""

from __future__ import annotations

import json
from dataclasses import dataclass

from forensics.errors import InputError
from forensics.ingest import case as cases, load, sources
from forensics.ingest.fields import FieldMap
from forensics.ingest.refusal import looks_like
from forensics.ingest.vocabulary import Vocabulary


@dataclass
class Described:
    vocabulary: Vocabulary
    keys: list[dict]  # per key: key, records, shape, examples, field, why


def describe(paths, syntax: str | None = None, field_map: FieldMap | None = None, reading=None) -> Described:
    field_map = field_map or FieldMap()
    resolved = sources.resolve(list(paths), sources.Unreadable(skip=False))
    con = cases.connect(input_bytes=0)
    vocabulary = load.sampled_vocabulary(con, resolved, syntax, field_map, reading)
    if not vocabulary.keys:
        raise InputError("no key found in the first records of " + ", ".join(s.label for s in resolved[:3])
                         + " (a file in an envelope is read through it: `mailmortem diagnose` shows its records; "
                         "--envelope none samples its lines as they are)")
    return Described(vocabulary, key_rows(vocabulary, field_map))


def key_rows(vocabulary: Vocabulary, field_map: FieldMap) -> list[dict]:
    """One row per sampled key, most frequent first."""
    decided = {d.key: (canon, d) for canon, d in vocabulary.fields.items()}
    decided.update({d.key: (canon, d) for canon, also in vocabulary.also.items() for d in also})
    like = {key: role for role, keys in looks_like(vocabulary).items() for key in keys}
    rows = []
    for stat in vocabulary.keys:
        canon, how = _read_as(stat.key, decided, field_map)
        if canon is None and stat.key in like:
            how = f"not read; looks like {like[stat.key]}"
        rows.append({"key": stat.key, "records": stat.records, "shape": stat.shape, "examples": stat.examples,
                     "field": canon, "why": how})
    return rows


def _read_as(key: str, decided: dict, field_map: FieldMap) -> tuple[str | None, str]:
    if key in decided:
        canon, d = decided[key]
        return canon, d.how + (f" ({d.why})" if d.why else "")
    canon = field_map.canonical_of(key)
    return (canon, "alias (another key of the field comes first)") if canon else (None, "")


def config_toml(described: Described, logs) -> str:
    """The TOML config of the reading, commented: fields the alias table reads are left as comments (the config
    would pin them, and other files of a case may use another alias), inferred ones are written."""
    vocabulary = described.vocabulary
    lines = ["# The reading of " + ", ".join(str(p) for p in logs)[:200] + ", written by `mailmortem fields --write`.",
             f"# From {vocabulary.records:,} sampled records. Edit it, then pass it: mailmortem diagnose LOGS --config FILE",
             "# Each line maps one canonical field to your key; a commented line leaves the field to the alias table.",
             "", "[fields]"]
    for canon, d in vocabulary.fields.items():
        entry = f"{canon} = {json.dumps(d.key)}"
        why = f"  # {d.how}" + (f": {d.why}" if d.why else "")
        lines.append(("# " + entry + why + " (read without this line)") if d.how == "alias" else entry + why)
    for canon, also in vocabulary.also.items():
        lines.append(f"# {canon} is also read from {', '.join(d.key for d in also)} where its first key is absent "
                     "(by name); a [fields] line reads only the key it names")
    for role, keys in vocabulary.unread_roles.items():
        lines.append(f"# {role}: no key read; the sends carry {', '.join(keys)}. Uncomment the one that holds it:")
        lines.append(f"# {role} = {json.dumps(keys[0])}")
    for canon, why in vocabulary.ambiguous.items():
        lines.append(f"# {canon}: {why}")
    lines += ["", "[events]", "# event = [\"your value\", …]: how your event values are read (send, claim, renew, "
              "release, expire, start, error)"]
    by_event: dict[str, list[str]] = {}
    for value, d in vocabulary.events.items():
        by_event.setdefault(d.key, []).append(value)
    for event, values in by_event.items():
        lines.append(f"{event} = {json.dumps(values)}")
    return "\n".join(lines) + "\n"
