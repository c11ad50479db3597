"""Re-deliver simulated log lines the way platforms hand them over: wrapped in an envelope.

    text = wrap("docker-json", ["evt=sent …", "…"], last="evt=sent agent=w")

gives the file Docker's json-file driver would have written for those lines (`last`, a line the process
never finished, becomes an unfinished entry). Each envelope follows the layout described in
docs/log-vocabulary.md (Envelopes). Used by the tests and the envelope benchmark to check that a wrapped log
diagnoses like the plain one.
"""

from __future__ import annotations

import datetime as dt
import json
from collections.abc import Callable

START = dt.datetime(2026, 11, 28, 9, 0, 0, tzinfo=dt.timezone.utc)
HOST, UNIT, CONTAINER, PID = "mail-host-1", "mailer", "mailer-7d9f5", "812"
DOCKER_CHUNK = 16 * 1024  # Docker's copier buffer: a longer line is written in pieces of this size
# Envelopes whose platform renders the record itself, so only logfmt can be inside.
LOGFMT_ONLY = ("structlog", "slog", "logrus")
JSON_ONLY = ("zap",)


def stamps(count: int, start: dt.datetime = START) -> list[dt.datetime]:
    """One time per line, a second apart (whole seconds: every envelope's precision holds them)."""
    return [start + dt.timedelta(seconds=i) for i in range(count)]


def _rfc3339(t: dt.datetime, digits: int = 3) -> str:
    text = t.astimezone(dt.timezone.utc).strftime("%Y-%m-%dT%H:%M:%S")
    fraction = f"{t.microsecond:06d}{'0' * 3}"[:digits]
    return f"{text}.{fraction}Z" if digits else f"{text}Z"


def _compact(obj) -> str:
    return json.dumps(obj, separators=(",", ":"), ensure_ascii=False)


def _docker(line: str, t: dt.datetime, finished: bool) -> list[str]:
    text = line + ("\n" if finished else "")
    chunks = [text[i:i + DOCKER_CHUNK] for i in range(0, len(text), DOCKER_CHUNK)] or [text]
    return [_compact({"log": chunk, "stream": "stdout", "time": _rfc3339(t, 9)}) for chunk in chunks]


def _cri(line: str, t: dt.datetime, finished: bool) -> list[str]:
    chunks = [line[i:i + DOCKER_CHUNK] for i in range(0, len(line), DOCKER_CHUNK)] or [line]
    tags = ["P"] * (len(chunks) - 1) + ["F" if finished else "P"]
    return [f"{_rfc3339(t, 9)} stdout {tag} {chunk}" for tag, chunk in zip(tags, chunks)]


def _journald(line: str, t: dt.datetime, finished: bool) -> list[str]:
    entry = {"__CURSOR": f"s=1;t={int(t.timestamp() * 1e6):x}", "__REALTIME_TIMESTAMP": str(int(t.timestamp() * 1e6)),
             "_HOSTNAME": HOST, "SYSLOG_IDENTIFIER": UNIT, "_PID": PID, "_SYSTEMD_UNIT": f"{UNIT}.service",
             "_STREAM_ID": "s1", "_TRANSPORT": "stdout", "PRIORITY": "6", "MESSAGE": line}
    if not finished:
        entry["_LINE_BREAK"] = "eof"
    return [json.dumps(entry, ensure_ascii=False)]


def _loki(line: str, t: dt.datetime, finished: bool) -> list[str]:
    labels = {"container": CONTAINER, "host": HOST, "job": f"outreach/{UNIT}", "stream": "stdout"}
    return [_compact({"labels": labels, "line": line, "timestamp": _rfc3339(t, 9)})]


def _log_entry(line: str, t: dt.datetime) -> dict:
    payload = {"jsonPayload": json.loads(line)} if _json_object(line) else {"textPayload": line}
    return {"insertId": f"{int(t.timestamp() * 1000):x}", "logName": "projects/acme/logs/stdout",
            "receiveTimestamp": _rfc3339(t, 9), "severity": "INFO", "timestamp": _rfc3339(t, 9),
            "resource": {"type": "k8s_container", "labels": {"pod_name": CONTAINER, "container_name": UNIT}},
            **payload}


def _cloud_logging(line: str, t: dt.datetime, finished: bool) -> list[str]:
    return [json.dumps(_log_entry(line, t), sort_keys=True, ensure_ascii=False)]


def _cloudwatch_event(line: str, t: dt.datetime) -> dict:
    ms = int(t.timestamp() * 1000)
    return {"logStreamName": CONTAINER, "timestamp": ms, "message": line, "ingestionTime": ms + 500,
            "eventId": str(ms)}


def _cloudwatch(line: str, t: dt.datetime, finished: bool) -> list[str]:
    return [json.dumps(_cloudwatch_event(line, t))]


def _datadog(line: str, t: dt.datetime, finished: bool) -> list[str]:
    return [json.dumps({"_id": f"{int(t.timestamp() * 1000):x}", "date": _rfc3339(t), "host": HOST,
                        "service": UNIT, "status": "info", "message": line, "attributes": {}, "tags": []})]


def _elastic(line: str, t: dt.datetime, finished: bool) -> list[str]:
    source = {"@timestamp": _rfc3339(t), "message": line, "host": {"name": HOST}, "service": {"name": UNIT}}
    return [json.dumps({"_index": "logs-mailer", "_id": f"{int(t.timestamp() * 1000):x}", "_source": source})]


def _prefixed(render: Callable[[str, dt.datetime], str]):
    return lambda line, t, finished: [render(line, t)]


def _local(t: dt.datetime) -> dt.datetime:
    return t.astimezone(dt.timezone.utc).replace(tzinfo=None)


LINE_WRAPPERS: dict[str, Callable[[str, dt.datetime, bool], list[str]]] = {
    "docker-json": _docker,
    "cri": _cri,
    "journald": _journald,
    "syslog": _prefixed(lambda line, t: f"{_local(t).strftime('%b %e %H:%M:%S')} {HOST} {UNIT}[{PID}]: {line}"),
    "rsyslog": _prefixed(lambda line, t: f"{_local(t).isoformat(timespec='microseconds')}+00:00 {HOST} "
                                         f"{UNIT}[{PID}]: {line}"),
    "rfc5424": _prefixed(lambda line, t: f"<134>1 {_rfc3339(t, 6)} {HOST} {UNIT} {PID} - - \ufeff{line}"),
    "docker-logs": _prefixed(lambda line, t: f"{_rfc3339(t, 9)} {line}"),
    "cloudwatch-export": _prefixed(lambda line, t: f"{_rfc3339(t, 3)} {line}"),
    "python-logging": _prefixed(lambda line, t: f"{_local(t).strftime('%Y-%m-%d %H:%M:%S')},"
                                                f"{t.microsecond // 1000:03d} INFO outreach.mailer: {line}"),
    "structlog": _prefixed(lambda line, t: f"{_local(t).strftime('%Y-%m-%d %H:%M:%S')} [info     ] "
                                           f"{'mail sent':<30} {line}"),
    "zap": _prefixed(lambda line, t: f"{_rfc3339(t, 3)}\tINFO\tmailer\tsend/send.go:42\tmail sent\t{line}"),
    "slog": _prefixed(lambda line, t: f"time={_rfc3339(t, 3)} level=INFO msg=\"mail sent\" {line}"),
    "logrus": _prefixed(lambda line, t: f"time=\"{_rfc3339(t, 0)}\" level=info msg=\"mail sent\" {line}"),
    "loki": _loki,
    "cloud-logging": _cloud_logging,
    "cloudwatch": _cloudwatch,
    "datadog": _datadog,
    "elastic": _elastic,
}
NAMES = tuple(LINE_WRAPPERS)


def _json_object(line: str) -> bool:
    try:
        return isinstance(json.loads(line), dict)
    except ValueError:
        return False


def wrap(name: str, lines: list[str], last: str = "", times: list[dt.datetime] | None = None,
         document: bool = False) -> str:
    """The file the platform `name` writes for `lines` (and `last`, a line never finished), one entry per line,
    or, with `document`, the JSON document its export command prints (gcloud's array, an `aws logs` page, an
    Elasticsearch response)."""
    finished = [(line, True) for line in lines] + ([(last, False)] if last else [])
    times = times or stamps(len(finished))
    if document:
        return _document(name, finished, times)
    wrapped = [entry for (line, done), t in zip(finished, times) for entry in LINE_WRAPPERS[name](line, t, done)]
    if last and name not in ("docker-json", "cri", "journald"):
        return "\n".join(wrapped)  # the platform shipped what it had, without a newline
    return "\n".join(wrapped) + "\n"


def _document(name: str, finished: list[tuple[str, bool]], times: list[dt.datetime]) -> str:
    if name == "cloud-logging":  # gcloud logging read --format=json: newest first, keys sorted, indented
        entries = [_log_entry(line, t) for (line, _), t in zip(finished, times)]
        return json.dumps(entries[::-1], indent=2, sort_keys=True, ensure_ascii=False) + "\n"
    if name == "cloudwatch":  # aws logs filter-log-events: one page
        page = {"events": [_cloudwatch_event(line, t) for (line, _), t in zip(finished, times)],
                "searchedLogStreams": []}
        return json.dumps(page, indent=4) + "\n"
    if name == "elastic":  # a search response
        hits = [json.loads(_elastic(line, t, True)[0]) for (line, _), t in zip(finished, times)]
        return json.dumps({"took": 3, "timed_out": False, "hits": {"hits": hits}}, indent=2) + "\n"
    raise ValueError(f"{name} has no document form")


DOCUMENTS = ("cloud-logging", "cloudwatch", "elastic")
