"""What a refusal says of a case's vocabulary (forensics.ingest.vocabulary): the keys that look like each role a
send needs, what the sample held, and the options that would read it; and the "read as" block of "What was read"
(docs/log-vocabulary.md#refusal)."""

from __future__ import annotations

import re
import shlex

from forensics.ingest.vocabulary import NOT_SEND, SAMPLE_SHARE, Vocabulary, _known_value, _many_people, by_name
from forensics.names import name_words


def looks_like(vocabulary: Vocabulary) -> dict[str, list[str]]:
    """The sampled keys that look like each role a send needs (what a refusal names)."""
    keys = vocabulary.keys
    return {
        "addresses": sorted([k.key for k in keys if k.address >= 0.5 and k.message_id < 0.5],
                            key=lambda key: not by_name(key, "recipient")),  # a `to` before a `from`
        "message ids": [k.key for k in keys if by_name(k.key, "msg_id") or k.message_id >= 0.5 or (
            k.shape == "unique per record" and "id" in name_words(k.key))],
        "steps": [k.key for k in keys if by_name(k.key, "step") or (k.small_int >= SAMPLE_SHARE and 1 < k.distinct <= 20)],
        "campaigns": [k.key for k in keys if by_name(k.key, "campaign")],
    }


def no_send_message(vocabulary: Vocabulary, records: int) -> str:
    """Why a run that read records recognised no send, what was seen, and the options that would read it."""
    return (f"read {records:,} records but recognised no send in them (a send is an event read as `send` with a "
            f"recipient and a message id)." + seen_in_sample(vocabulary))


def seen_in_sample(vocabulary: Vocabulary) -> str:
    """What the sample holds (event values, keys that look like each role) and the options that would read it."""
    seen = [f'"{r["value"]}" {r["records"]:,}' for r in vocabulary.event_values[:5]]
    parts = [f"event values: {', '.join(seen)}"] if seen else ["no event key"]
    like = looks_like(vocabulary)
    parts += [f"keys holding {role}: {', '.join(found[:4])}" if found else f"no key holding {role}"
              for role, found in like.items() if found or role in ("addresses", "message ids")]
    return (f" Seen in {vocabulary.records:,} sampled records: " + "; ".join(parts) + ". "
            + _suggestion(vocabulary, like))


def _suggestion(vocabulary: Vocabulary, like: dict[str, list[str]]) -> str:
    options = []
    by_key = {k.key: k for k in vocabulary.keys}
    for canon, role in (("recipient", "addresses"), ("msg_id", "message ids"), ("step", "steps"),
                        ("campaign", "campaigns")):
        keys = [key for key in like[role] if canon != "recipient" or _many_people(by_key[key])]
        if canon not in vocabulary.fields and keys:
            options.append(f"--field {canon}={_quoted(keys[0])}")
    plausible = [r for r in vocabulary.event_values  # a value the table reads already needs no --event
                 if not re.search(NOT_SEND, r["value"].lower()) and not _known_value(r["value"])]
    carrying = [r for r in plausible if r["with_both"]] or plausible
    if carrying and not any(d.key == "send" for d in vocabulary.events.values()):
        options.append(f"--event send={_quoted(carrying[0]['value'])}")
    given = f"Try {' '.join(options)}, or w" if options else "W"
    return (given + "rite the reading to a file with `mailmortem fields LOGS --write mailmortem.toml`, edit it and "
            "pass --config mailmortem.toml")


def _quoted(text: str) -> str:
    return shlex.quote(text)


def read_as_lines(document: dict) -> list[str]:
    """The "read as" block of "What was read" (the document's `vocabulary`), unescaped: the caller makes it safe."""
    fields, events = document["fields"], document["events"]
    lines = [f"  {canon} ← {d['key']} ({d['how']}{': ' + d['why'] if d['why'] else ''})"
             for canon, d in fields.items() if d["how"] != "alias"]
    lines += [f"  {canon} ← {a['key']} where the first is absent ({a['how']}: {a['why']})"
              for canon, d in fields.items() for a in d.get("also", [])]
    lines += [f"  {d['event']} ← event \"{value}\" ({d['how']}{' ' + d['why'] if d['why'] else ''})"
              for value, d in events.items()]
    aliased = [f"{canon} ← {d['key']}" for canon, d in fields.items() if d["how"] == "alias"]
    if aliased:
        lines.append("  by the alias table: " + ", ".join(aliased))
    return [f"Read as (from {document['sampled_records']:,} sampled records):"] + lines

