"""Re-deliver simulated log lines the way platforms hand them over: wrapped in an envelope.

    text = wrap("docker-json", ["evt=sent …", "…"], last="evt=sent agent=w")

gives the file Docker's json-file driver would have written for those lines (`last`, a line the process
never finished, becomes an unfinished entry). `senders` names each line's sender in the envelope (its `unit`, `pid`
or `container`: a systemd unit and its pid, a pod, a Cloud Run instance, a container, an ECS task's stream) where
the platform has a place for it. Each envelope follows the layout described in
docs/log-vocabulary.md (Envelopes). Used by the tests and the envelope benchmark to check that a wrapped log
diagnoses like the plain one.
"""

from __future__ import annotations

import datetime as dt
import json
import re
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


def _docker(line: str, t: dt.datetime, finished: bool, who: dict) -> list[str]:
    text = line + ("\n" if finished else "")
    chunks = [text[i:i + DOCKER_CHUNK] for i in range(0, len(text), DOCKER_CHUNK)] or [text]
    attrs = {"attrs": {"tag": who["container"]}} if who["container"] != CONTAINER else {}  # --log-opt tag
    return [_compact({"log": chunk, "stream": "stdout", "time": _rfc3339(t, 9), **attrs}) for chunk in chunks]


def _cri(line: str, t: dt.datetime, finished: bool, who: dict) -> list[str]:
    chunks = [line[i:i + DOCKER_CHUNK] for i in range(0, len(line), DOCKER_CHUNK)] or [line]
    tags = ["P"] * (len(chunks) - 1) + ["F" if finished else "P"]
    return [f"{_rfc3339(t, 9)} stdout {tag} {chunk}" for tag, chunk in zip(tags, chunks)]


def _journald(line: str, t: dt.datetime, finished: bool, who: dict) -> list[str]:
    entry = {"__CURSOR": f"s=1;t={int(t.timestamp() * 1e6):x}", "__REALTIME_TIMESTAMP": str(int(t.timestamp() * 1e6)),
             "_HOSTNAME": HOST, "SYSLOG_IDENTIFIER": UNIT, "_PID": who["pid"],
             "_SYSTEMD_UNIT": f"{who['unit']}.service",
             "_STREAM_ID": "s1", "_TRANSPORT": "stdout", "PRIORITY": "6", "MESSAGE": line}
    if not finished:
        entry["_LINE_BREAK"] = "eof"
    return [json.dumps(entry, ensure_ascii=False)]


def _loki(line: str, t: dt.datetime, finished: bool, who: dict) -> list[str]:
    labels = {"container": CONTAINER, "host": HOST, "job": f"outreach/{UNIT}", "stream": "stdout"}
    if who["container"] != CONTAINER:
        labels["pod"] = who["container"]
    return [_compact({"labels": labels, "line": line, "timestamp": _rfc3339(t, 9)})]


def _log_entry(line: str, t: dt.datetime, who: dict | None = None) -> dict:
    payload = {"jsonPayload": json.loads(line)} if _json_object(line) else {"textPayload": line}
    resource = {"type": "k8s_container", "labels": {"pod_name": CONTAINER, "container_name": UNIT}}
    if who and who["container"] != CONTAINER:  # a Cloud Run instance of the service
        resource = {"type": "cloud_run_revision", "labels": {"service_name": UNIT, "revision_name": f"{UNIT}-00042"}}
        payload["labels"] = {"instanceId": who["container"]}
    return {"insertId": f"{int(t.timestamp() * 1000):x}", "logName": "projects/acme/logs/stdout",
            "receiveTimestamp": _rfc3339(t, 9), "severity": "INFO", "timestamp": _rfc3339(t, 9),
            "resource": resource, **payload}


def _cloud_logging(line: str, t: dt.datetime, finished: bool, who: dict) -> list[str]:
    return [json.dumps(_log_entry(line, t, who), sort_keys=True, ensure_ascii=False)]


def _cloudwatch_event(line: str, t: dt.datetime, who: dict | None = None) -> dict:
    ms = int(t.timestamp() * 1000)  # an ECS task's stream (awslogs: prefix/container/task id) names the sender
    return {"logStreamName": who["container"] if who else CONTAINER, "timestamp": ms, "message": line,
            "ingestionTime": ms + 500, "eventId": str(ms)}


def _cloudwatch(line: str, t: dt.datetime, finished: bool, who: dict) -> list[str]:
    return [json.dumps(_cloudwatch_event(line, t, who))]


def _datadog(line: str, t: dt.datetime, finished: bool, who: dict) -> list[str]:
    return [json.dumps({"_id": f"{int(t.timestamp() * 1000):x}", "date": _rfc3339(t), "host": HOST,
                        "service": UNIT, "status": "info", "message": line, "attributes": {}, "tags": []})]


def _elastic(line: str, t: dt.datetime, finished: bool, who: dict) -> list[str]:
    source = {"@timestamp": _rfc3339(t), "message": line, "host": {"name": HOST}, "service": {"name": UNIT}}
    return [json.dumps({"_index": "logs-mailer", "_id": f"{int(t.timestamp() * 1000):x}", "_source": source})]


def _prefixed(render: Callable[[str, dt.datetime], str]):
    return lambda line, t, finished, who: [render(line, t)]


def _named(render: Callable[[str, dt.datetime, dict], str]):
    """A one-line envelope that names its sender (`who`: unit and pid)."""
    return lambda line, t, finished, who: [render(line, t, who)]


def _local(t: dt.datetime) -> dt.datetime:
    return t.astimezone(dt.timezone.utc).replace(tzinfo=None)


LINE_WRAPPERS: dict[str, Callable[[str, dt.datetime, bool, dict], list[str]]] = {
    "docker-json": _docker,
    "cri": _cri,
    "journald": _journald,
    "syslog": _named(lambda line, t, who: f"{_local(t).strftime('%b %e %H:%M:%S')} {HOST} "
                                          f"{who['unit']}[{who['pid']}]: {line}"),
    "rsyslog": _named(lambda line, t, who: f"{_local(t).isoformat(timespec='microseconds')}+00:00 {HOST} "
                                           f"{who['unit']}[{who['pid']}]: {line}"),
    "rfc5424": _named(lambda line, t, who: f"<134>1 {_rfc3339(t, 6)} {HOST} {who['unit']} {who['pid']} - - "
                                           f"\ufeff{line}"),
    "docker-logs": _prefixed(lambda line, t: f"{_rfc3339(t, 9)} {line}"),
    "cloudwatch-export": _prefixed(lambda line, t: f"{_rfc3339(t, 3)} {line}"),
    "python-logging": _prefixed(lambda line, t: f"{_local(t).strftime('%Y-%m-%d %H:%M:%S')},"
                                                f"{t.microsecond // 1000:03d} INFO outreach.mailer: {line}"),
    "structlog": _prefixed(lambda line, t: f"{_local(t).strftime('%Y-%m-%d %H:%M:%S')} [info     ] "
                                           f"{'mail sent':<30} {line}"),
    "zap": _prefixed(lambda line, t: f"{_rfc3339(t, 3)}\tINFO\tmailer\tsend/send.go:42\tmail sent\t{line}"),
    "slog": _prefixed(lambda line, t: f"time={_rfc3339(t, 3)} level=INFO msg=\"mail sent\" {line}"),
    "logrus": _prefixed(lambda line, t: f"time=\"{_rfc3339(t, 0)}\" level=info msg=\"mail sent\" {line}"),
    "compose": _named(lambda line, t, who: f"{who['container']}  | {_rfc3339(t, 9)} {line}"),  # logs -t
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
         document: bool = False, senders: list[dict] | None = None) -> str:
    """The file the platform `name` writes for `lines` (and `last`, a line never finished), one entry per line,
    or, with `document`, the JSON document its export command prints (gcloud's array, an `aws logs` page, an
    Elasticsearch response). `senders` gives each line's sender (`unit`, `pid`, `container`) where the envelope
    names one; the defaults are HOST, UNIT, CONTAINER and PID."""
    finished = [(line, True) for line in lines] + ([(last, False)] if last else [])
    times = times or stamps(len(finished))
    if document:
        return _document(name, finished, times)
    who = [{"unit": UNIT, "pid": PID, "container": CONTAINER, **sender} for sender in senders or [{}] * len(finished)]
    wrapped = [entry for (line, done), t, sender in zip(finished, times, who)
               for entry in LINE_WRAPPERS[name](line, t, done, sender)]
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
        hits = [json.loads(_elastic(line, t, True, {})[0]) for (line, _), t in zip(finished, times)]
        return json.dumps({"took": 3, "timed_out": False, "hits": {"hits": hits}}, indent=2) + "\n"
    raise ValueError(f"{name} has no document form")


DOCUMENTS = ("cloud-logging", "cloudwatch", "elastic")
# Other forms real files of an envelope take, from its file as wrap writes it: rsyslog's ForwardFormat (a <PRI>
# before the time), CRI lines without the P/F tag, `docker compose logs` without -t, journald entries with only the
# source's time.
FLAVOURS: dict[str, Callable[[str], str]] = {
    "rsyslog": lambda text: re.sub(r"(?m)^(?=[0-9]{4}-)", "<13>", text),
    "cri": lambda text: re.sub(r"(?m)^(\S+ std(?:out|err)) F(?= |$)", r"\1", text),
    "compose": lambda text: re.sub(r"(?m)^(\S+  \|) [0-9]{4}-\S+(?= |$)", r"\1", text),
    "journald": lambda text: text.replace('"__REALTIME_TIMESTAMP"', '"_SOURCE_REALTIME_TIMESTAMP"'),
}
