"""Turn the simulator's canonical records into the log lines real agents write.

Each file gets a dialect — its own field aliases, event names, timestamp style,
lease units, msg_id brackets — drawn from docs/log-vocabulary.md, so that no two
cases (and often no two workers) look alike. Then the things real logs carry:
lines a log shipper delivered twice, blank lines, a stack trace, a web access
line, a truncated last line.
"""

from __future__ import annotations

import csv
import datetime as dt
import gzip as gzip_mod
import io
import json
import random
import re
from dataclasses import dataclass
from pathlib import Path

ALIASES = {
    "ts": ("ts", "ts", "time", "timestamp"), "event": ("event", "event", "evt", "action"),
    "worker": ("worker", "worker", "agent", "worker_id", "instance"),
    "incarnation": ("pid", "pid", "container_id", "boot_id"),
    "campaign": ("campaign", "campaign_id", "campaign", "sequence"), "step": ("step", "step", "touch", "sequence_step"),
    "recipient": ("email", "to", "recipient", "rcpt_to", "lead_email"),
    "candidate": ("lead_id", "candidate_id", "contact_id", "lead"),
    "msg_id": ("msg_id", "message_id", "msg_id", "messageid", "msgid"), "shard": ("shard", "shard", "batch", "shard_id"),
    "lease": ("lease", "lease", "ttl", "lease_s"), "test_id": ("test_id", "experiment"), "variant": ("variant", "arm"),
    "status": ("status", "status", "result"), "attempt": ("attempt", "attempt", "try"), "error": ("error", "error", "err"),
    "count": ("count",), "subject": ("subject",),
}
EVENT_NAMES = {
    "send": ("send", "send", "sent", "email_sent"), "claim": ("claim", "claimed", "lease_acquired"),
    "renew": ("renew", "heartbeat", "lease_renew"), "release": ("release", "released", "batch_done"),
    "expire": ("expire", "lease_expired"), "start": ("start", "worker_start", "startup"),
    "error": ("error", "send_error"),
}
LEVELS = {"error": "error", "expire": "warn"}
ORDER = ("incarnation", "campaign", "step", "shard", "recipient", "candidate", "test_id", "variant", "attempt",
         "status", "msg_id", "lease", "count", "error", "subject")
_NEEDS_QUOTES = re.compile(r'[ ="\\]')
EXT = {"logfmt": "log", "jsonl": "jsonl", "csv": "csv"}
TS_STYLES = {"logfmt": ("z_ms",) * 6 + ("z_us", "offset", "offset"),
             "jsonl": ("z_ms",) * 5 + ("epoch_ms", "epoch_ms", "offset", "z_us"),
             "csv": ("z_ms",) * 4 + ("offset",)}
OFFSETS = (60, 120, -300, 330, -480)
TRACEBACK = (
    "Traceback (most recent call last):",
    '  File "/app/outreach/sender.py", line 214, in deliver',
    "    resp = self.smtp.send_message(msg, timeout=self.ack_timeout)",
    '  File "/usr/lib/python3.12/smtplib.py", line 986, in send_message',
    "TimeoutError: timeout waiting for ack",
)


@dataclass
class Dialect:
    syntax: str
    keys: dict
    events: dict
    ts: str
    offset: dt.timezone
    bare_ts: bool
    lease: str
    angle: bool
    ok: str | None
    bare_sends: float
    nested: bool
    level: bool


def choose_dialect(rng: random.Random, syntax: str) -> Dialect:
    keys = {canon: rng.choice(names) for canon, names in ALIASES.items()}
    if syntax == "jsonl" and rng.random() < 0.3:
        keys["ts"] = "@timestamp"
    return Dialect(
        syntax=syntax, keys=keys, events={e: rng.choice(n) for e, n in EVENT_NAMES.items()},
        ts=rng.choice(TS_STYLES[syntax]), offset=dt.timezone(dt.timedelta(minutes=rng.choice(OFFSETS))),
        bare_ts=syntax == "logfmt" and rng.random() < 0.5,
        lease="plain" if keys["lease"] == "lease_s" else rng.choice(("s", "m", "plain")),
        angle=rng.random() < 0.7, ok=rng.choice(("ok", "sent", "accepted", None)),
        bare_sends=0.15 if rng.random() < 0.25 else 0.0,
        nested=syntax == "jsonl" and rng.random() < 0.25, level=rng.random() < 0.7,
    )


# --- one record -----------------------------------------------------------------------

def _ts(t: float, d: Dialect):
    if d.ts == "epoch_ms":
        return int(round(t * 1000))
    if d.ts == "offset":
        return dt.datetime.fromtimestamp(t, d.offset).isoformat(timespec="milliseconds")
    stamp = dt.datetime.fromtimestamp(t, dt.timezone.utc).replace(tzinfo=None)
    return stamp.isoformat(timespec="microseconds" if d.ts == "z_us" else "milliseconds") + "Z"


def _value(canon: str, value, d: Dialect):
    if canon == "msg_id":
        return f"<{value}>" if d.angle else value
    if canon == "lease":
        return f"{value}s" if d.lease == "s" else f"{value // 60}m" if d.lease == "m" else value
    if canon == "status" and value == "ok":
        return d.ok
    if canon == "incarnation" and d.keys["incarnation"] != "pid":
        return f"{(value * 0x2545F4914F6CDD1D) & 0xFFFFFFFFFFFF:012x}"
    return value


def fields(rec: dict, d: Dialect, rng: random.Random) -> list[tuple[str, object]]:
    """The (key, value) pairs one record is written as, in this file's dialect."""
    event = rec["event"]
    out = [(d.keys["ts"], _ts(rec["_t"] + rec["_w"].skew, d))]
    if d.level:
        out.append(("level", LEVELS.get(event, "info" if rec.get("status", "ok") == "ok" else "warn")))
    bare = event == "send" and "msg_id" in rec and d.bare_sends and rng.random() < d.bare_sends
    if not bare:
        out.append((d.keys["event"], d.events[event]))
    out.append((d.keys["worker"], rec["_w"].name))
    for canon in ORDER:
        value = rec.get(canon)
        if value is None:
            continue
        value = "ok" if bare and canon == "status" else _value(canon, value, d)
        if value is not None:
            out.append((d.keys[canon], value))
    if event == "send" and "msg_id" in rec:
        out.append(("latency_ms", rng.randint(40, 1800)))
    return out


def _logfmt_value(value) -> str:
    if isinstance(value, int):
        return str(value)
    text = str(value)
    if text == "" or _NEEDS_QUOTES.search(text):
        return '"' + text.replace("\\", "\\\\").replace('"', '\\"') + '"'
    return text


def logfmt_line(pairs: list, d: Dialect) -> str:
    if d.bare_ts:
        return " ".join([str(pairs[0][1])] + [f"{k}={_logfmt_value(v)}" for k, v in pairs[1:]])
    return " ".join(f"{k}={_logfmt_value(v)}" for k, v in pairs)


def json_line(pairs: list, d: Dialect, rng: random.Random) -> str:
    obj = dict(pairs)
    to = d.keys["recipient"]
    if to in obj and rng.random() < 0.003:
        obj[to] = f" {obj[to]} "  # a stray space from a CRM export; trimmed, it is the same person
    if d.nested and to in obj:
        mail = {"to": obj.pop(to)}
        if "subject" in obj:
            mail["subject"] = obj.pop("subject")
        obj["mail"] = mail
    return json.dumps(obj, ensure_ascii=False)


# --- one file ---------------------------------------------------------------------------

def render_file(records: list[dict], d: Dialect, rng: random.Random) -> tuple[list[str], list]:
    """Lines of one file, and the record behind each line (None for a header)."""
    rows = [fields(r, d, rng) for r in records]
    if d.syntax == "logfmt":
        return [logfmt_line(p, d) for p in rows], list(records)
    if d.syntax == "jsonl":
        return [json_line(p, d, rng) for p in rows], list(records)
    columns = list(dict.fromkeys(k for p in rows for k, _ in p))
    rng.shuffle(columns)
    buf = io.StringIO()
    writer = csv.writer(buf, lineterminator="\n")
    writer.writerow(columns)
    for p in rows:
        cells = dict(p)
        writer.writerow(["" if cells.get(c) is None else cells[c] for c in columns])
    return buf.getvalue().splitlines(), [None] + list(records)


def replay_block(lines: list[str], recs: list, rng: random.Random) -> None:
    """A log shipper re-delivered a few lines after a reconnect: same lines, same msg_ids."""
    sends = [i for i, r in enumerate(recs) if r is not None and "msg_id" in r]
    if not sends:
        return
    i = rng.choice(sends)
    block = rng.randint(1, 12)
    at = min(len(lines), i + block + rng.randint(0, 30))
    lines[at:at] = lines[i:i + block]
    recs[at:at] = recs[i:i + block]


def add_noise(lines: list[str], recs: list, syntax: str, rng: random.Random, *, trace: bool, access: bool) -> None:
    """Lines that are not records: a stack trace after an error, a health-check access line, blanks."""
    if trace and syntax != "csv":
        errors = [i for i, r in enumerate(recs) if r is not None and r["event"] == "error"]
        at = (rng.choice(errors) + 1) if errors else rng.randint(1, len(lines))
        lines[at:at] = TRACEBACK
        recs[at:at] = [None] * len(TRACEBACK)
    if access:
        at = rng.randint(1, len(lines))
        lines.insert(at, _access_line(recs, rng))
        recs.insert(at, None)
    for _ in range(rng.randint(1, 3)):
        at = rng.randint(1, len(lines))
        lines.insert(at, "")
        recs.insert(at, None)


def _access_line(recs: list, rng: random.Random) -> str:
    t = next((r["_t"] for r in recs if r is not None), 0.0)
    when = dt.datetime.fromtimestamp(t, dt.timezone.utc).strftime("%d/%b/%Y:%H:%M:%S +0000")
    return f'10.42.{rng.randint(0, 9)}.{rng.randint(2, 250)} - - [{when}] "GET /healthz HTTP/1.1" 200 2 "-" "kube-probe/1.29"'


def truncated_line(recs: list, d: Dialect, rng: random.Random) -> str | None:
    """The half-written last line of a killed process: a send that never got its msg_id."""
    last = next((r for r in reversed(recs) if r is not None and r["event"] == "send"), None)
    if last is None:
        return None
    rec = {k: v for k, v in last.items() if k not in ("msg_id", "status", "subject")}
    rec["_t"] += 1.0
    pairs = fields(rec, d, rng)
    text = logfmt_line(pairs, d) if d.syntax == "logfmt" else json_line(pairs, d, rng)
    if d.syntax == "csv":
        text = ",".join(str(v) for _, v in pairs)
    return text[: int(len(text) * rng.uniform(0.4, 0.7))]


def write_text(path: Path, lines: list[str], last: str | None, gz: bool) -> Path:
    text = "\n".join(lines) + "\n" + (last or "")
    data = text.encode("utf-8")
    if gz:
        path = path.with_name(path.name + ".gz")
        with open(path, "wb") as raw, gzip_mod.GzipFile(filename="", mode="wb", fileobj=raw, mtime=0) as out:
            out.write(data)
    else:
        path.write_bytes(data)
    return path
