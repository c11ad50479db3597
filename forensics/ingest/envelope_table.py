"""The envelopes, one row each: everything that tells, takes off, simulates and documents an envelope reads it.

A row names the envelope (`--envelope NAME`) and says how a person calls it, the queries/envelopes.sql block that
takes it off in DuckDB (and that block's literals), where a JSON document of it lists its entries, what the
platform calls the sender fields it fills, the shape of one of its lines (the detection in
forensics.ingest.envelopes tries them in `tried` order; the JSON ones are told from their keys there), the reader of
forensics/ingest/readers/_unwrap.c that takes it off in C (None: DuckDB only) and what the file's path names where its lines do
not. The C readers' kind numbers come from here too (C_KINDS, handed to _unwrap.configure at import, which
refuses a list other than its own readers). forensics.simulate.envelopes writes every row's files, and
docs/log-vocabulary.md lists every row (tests/test_envelope_table.py holds all of them to the table).
"""

from __future__ import annotations

import re
from dataclasses import dataclass
from typing import Callable

from forensics.ingest.fields import ALIASES
from forensics.ingest.readers.grammar import PAIR_START_RE

# A record holding one of these keys (an event, recipient or message-id alias, in any case) is a send record of its own,
# whatever else it holds: Fluent Bit's Merge_Log keeps Docker's log, stream and time beside the fields it parsed out
# of `log`. Such a record is not taken for an envelope's entry whose text alone would be read (carries_send).
RECORD_KEYS = {alias for canon in ("event", "msg_id", "recipient") for alias in ALIASES[canon]}
SEND_KEYS = ",".join(sorted(RECORD_KEYS))  # as envelope_docker_json's {lit:send_keys} (mm_carries_send)


def carries_send(keys) -> bool:
    """Whether a JSON object with these keys is a send record of its own (RECORD_KEYS)."""
    return bool({k.lower() for k in keys} & RECORD_KEYS)


def _record_like(text) -> bool:
    return isinstance(text, str) and (text.lstrip().startswith("{") or bool(PAIR_START_RE.search(text)))


# How a JSON entry of each JSON envelope is told from its keys (`entry`), and a JSON document that lists entries
# (`document`): tried in the table's order, documents first.
def _docker_entry(obj: dict, keys: set) -> bool:
    return isinstance(obj.get("log"), str) and "time" in keys and not carries_send(keys)


def _journald_entry(obj: dict, keys: set) -> bool:
    return bool(keys & {"__REALTIME_TIMESTAMP", "_SOURCE_REALTIME_TIMESTAMP"}) and bool(keys & {"MESSAGE", "__CURSOR"})


def _loki_entry(obj: dict, keys: set) -> bool:
    return {"line", "timestamp"} <= keys <= {"labels", "line", "timestamp"}


def _cloud_logging_entry(obj: dict, keys: set) -> bool:
    return bool(keys & {"logName", "insertId"}) and bool(keys & {"textPayload", "jsonPayload", "protoPayload"})


def _cloudwatch_entry(obj: dict, keys: set) -> bool:
    return ("message" in keys and isinstance(obj.get("timestamp"), int)
            and bool(keys & {"ingestionTime", "eventId", "logStreamName"}))


def _datadog_entry(obj: dict, keys: set) -> bool:
    return "message" in keys and ("attributes" in keys or {"_id", "date"} <= keys)


def _elastic_entry(obj: dict, keys: set) -> bool:
    return "_source" in keys or ("@timestamp" in keys and _record_like(obj.get("message")) and not carries_send(keys))


def _cloudwatch_page(obj: dict) -> bool:
    return isinstance(obj.get("events"), list)


def _elastic_response(obj: dict) -> bool:
    return isinstance(obj.get("hits"), dict) and "hits" in obj["hits"]


@dataclass(frozen=True)
class Envelope:
    name: str
    title: str  # what a person calls it
    block: str  # the queries/envelopes.sql block that reads its entries
    zone_less: bool = False  # its times carry no zone: read in --tz
    items: str = "$"  # where a JSON document of this envelope lists its entries
    shape: tuple = ()  # its block's {lit:...} values, as (name, value) pairs (the syslog flavours share one block,
    # structlog and zap another; Docker's names the send keys)
    names: tuple = ()  # what the platform calls the sender fields it fills, as (container|host|unit|pid, its
    # field) pairs: what "What was read" says the worker came from (sender)
    line_shape: re.Pattern | None = None  # a line of it (None: a JSON entry, told from its keys)
    tried: int = 0  # where line_shape is tried among the others: the first that fits a line wins
    c_reader: str | None = None  # the reader of forensics/ingest/readers/_unwrap.c that takes it off (None: DuckDB's only)
    from_path: tuple = ()  # what the file's path names (detect.file_params) where its line names none, in C as
    # queries/envelopes.sql does (coalesce(the line's, :param))
    entry: Callable[[dict, set], bool] | None = None  # whether one JSON object (and its keys) is an entry of it
    document: Callable[[dict], bool] | None = None  # whether one JSON object is its document listing entries
    head_keys: tuple = ()  # keys (quoted) that tell a JSON document (an array, a pretty-printed object) from its head:
    # two of them, more than any other envelope's (of equal scores, the row listed first)


# structlog's console header (a time, perhaps with a zone, then the level in brackets): envelope_console's regexes and
# the shape that tells the envelope (_TEXT_SHAPES)
_STRUCTLOG_STAMP = "[0-9]{4}-[0-9]{2}-[0-9]{2}[T ][0-9]{2}:[0-9]{2}:[0-9]{2}(?:\\.[0-9]+)?(?:Z|[+-][0-9]{2}:?[0-9]{2})?"
_STRUCTLOG_LEVEL = " +\\[ *[A-Za-z]+ *\\]"
_STRUCTLOG_HEAD = f"^{_STRUCTLOG_STAMP}{_STRUCTLOG_LEVEL}"
_SYSLOG_NAMES = (("host", "HOSTNAME"), ("unit", "TAG"), ("pid", "PID"))
# The headers the text envelopes' blocks match (envelope_headers, envelope_header_fields): the whole header with the
# space after it, then (where a block reads them) its fields from the short header alone, by name.
_CRI_HEADER = (("head", r"^\S+ (?:stdout|stderr)(?: [FP](?::\S*)?)?(?: |$)"),  # a tag run into the text is none
               ("fields", r"^(\S+) (stdout|stderr)(?: ([FP]))?"), ("names", "ts,stream,tag"))
_COMPOSE_HEADER = (
    ("head", r"^[A-Za-z0-9][A-Za-z0-9_.-]* +\|(?: [0-9]{4}-[0-9]{2}-[0-9]{2}T[0-9]{2}:[0-9]{2}:[0-9]{2}(?:\.[0-9]+)?"
             r"(?:Z|[+-][0-9]{2}:?[0-9]{2})(?: |$)| |$)"),  # a time run into the text is text
    ("fields", r"^(\S+) +\|(?: ([0-9]{4}-\S+))?"), ("names", "service,stamp"))
_SLOG_TIME, _SLOG_REST = r'"[^"]*"|\S+', r' level=\S+ (?:source=\S+ )?msg=(?:"(?:[^"\\]|\\.)*"|\S*) ?'
_SLOG_HEADER = (("head", f"^time=(?:{_SLOG_TIME}){_SLOG_REST}"), ("stamp", f"^time=({_SLOG_TIME}){_SLOG_REST}$"))
_RFC5424_HEADER = r'^<[0-9]{1,3}>1 \S+ \S+ \S+ \S+ \S+ (?:-|(?:\[(?:[^\]"\\]|\\.|"(?:[^"\\]|\\.)*")*\])+)'


def _syslog_header(stamp: str, year_less: int) -> tuple:
    """envelope_syslog's values: an optional `<PRI>` (ForwardFormat's before an ISO time), the stamp's regex, then the
    host, the tag and its pid; whether the stamp has no year."""
    pri = "(?:<[0-9]{1,3}>)?"
    return (("head", f"^{pri}{stamp}" + r" \S+ [^\s\[:]+(?:\[[0-9]+\])?: ?"),
            ("fields", f"^{pri}({stamp})" + r" (\S+) ([^\s\[:]+)(?:\[([0-9]+)\])?: ?$"),
            ("names", "stamp,host,tag,pid"), ("year_less", year_less))

ISO = r"\d{4}-\d\d-\d\dT\d\d:\d\d:\d\d"
_ZONE = r"(?:Z|[+-]\d\d:?\d\d)"
TABLE = (
    Envelope("docker-json", "Docker json-file", "envelope_docker_json", shape=(("send_keys", SEND_KEYS),),
             names=(("container", "attrs.tag|container id"),),
             c_reader="DOCKER", from_path=("container",),
             entry=_docker_entry, head_keys=('"log"', '"stream"')),
    Envelope("cri", "Kubernetes CRI log", "envelope_cri", shape=_CRI_HEADER,
             names=(("container", "pod"), ("unit", "container")),
             line_shape=re.compile(rf"^{ISO}(?:\.\d+)?{_ZONE} (?:stdout|stderr)(?: [FP](?::\S*)?)?(?: |$)"),
             tried=1, c_reader="CRI", from_path=("container", "unit")),
    Envelope("journald", "journald JSON", "envelope_journald",
             names=(("container", "CONTAINER_NAME"), ("host", "_HOSTNAME"), ("unit", "_SYSTEMD_UNIT|SYSLOG_IDENTIFIER"),
                    ("pid", "_PID")),
             c_reader="JOURNALD", entry=_journald_entry, head_keys=('"__REALTIME_TIMESTAMP"', '"MESSAGE"')),
    Envelope("syslog", "syslog RFC 3164", "envelope_syslog", zone_less=True,
             shape=_syslog_header("[A-Z][a-z]{2} +[0-9]{1,2} [0-9]{2}:[0-9]{2}:[0-9]{2}", 1), names=_SYSLOG_NAMES,
             line_shape=re.compile(r"^(?:<\d{1,3}>)?[A-Z][a-z]{2} +\d{1,2} \d\d:\d\d:\d\d "
                                   r"[\w.:-]+ [\w./-]+(?:\[\d+\])?:"),
             tried=3, c_reader="SYSLOG"),
    Envelope("rsyslog", "rsyslog high-precision", "envelope_syslog",
             shape=_syslog_header("[0-9]{4}-[0-9]{2}-[0-9]{2}T[0-9:.]+(?:Z|[+-][0-9]{2}:?[0-9]{2})?", 0),
             names=_SYSLOG_NAMES,
             line_shape=re.compile(rf"^(?:<\d{{1,3}}>)?{ISO}(?:\.\d+)?{_ZONE} [\w.:-]+ [\w./-]+(?:\[\d+\])?:"),
             tried=4, c_reader="RSYSLOG"),
    Envelope("rfc5424", "syslog RFC 5424", "envelope_rfc5424", shape=(("head", _RFC5424_HEADER),),
             names=(("host", "HOSTNAME"), ("unit", "APP-NAME"), ("pid", "PROCID")),
             line_shape=re.compile(r"^<\d{1,3}>1 \S+ \S+ \S+ \S+ \S+ (?:-|\[)"), tried=2, c_reader="RFC5424"),
    Envelope("docker-logs", "docker logs --timestamps", "envelope_timestamped",
             line_shape=re.compile(rf"^{ISO}\.\d{{9}}{_ZONE} "),
             tried=5, c_reader="TIMESTAMPED", from_path=("container",)),
    Envelope("cloudwatch-export", "CloudWatch export to S3", "envelope_timestamped",
             names=(("container", "log stream"),),
             line_shape=re.compile(rf"^{ISO}(?:\.\d+)?{_ZONE} \{{"),
             tried=6, c_reader="TIMESTAMPED", from_path=("container",)),
    Envelope("compose", "docker compose logs", "envelope_compose", shape=_COMPOSE_HEADER,
             names=(("container", "service prefix"),),
             line_shape=re.compile(r"^[A-Za-z0-9][\w.-]* +\|(?: |$)"), tried=12, c_reader="COMPOSE"),
    Envelope("python-logging", "Python logging", "envelope_python_logging", zone_less=True,
             line_shape=re.compile(r"^\d{4}-\d\d-\d\d \d\d:\d\d:\d\d,\d{3}\b"), tried=7, c_reader="PYTHON_LOGGING"),
    Envelope("structlog", "structlog console", "envelope_console", zone_less=True,
             shape=(("head", _STRUCTLOG_HEAD + " ?"), ("stamp", f"^({_STRUCTLOG_STAMP}){_STRUCTLOG_LEVEL} ?$")),
             line_shape=re.compile(_STRUCTLOG_HEAD + " "), tried=8, c_reader="STRUCTLOG"),
    Envelope("zap", "zap console", "envelope_console",
             shape=(("head", "^[0-9][^\\t]*\\t[A-Za-z]+\\t"), ("stamp", "^([0-9][^\\t]*)\\t")),
             line_shape=re.compile(rf"^(?:{ISO}(?:\.\d+)?{_ZONE}?|\d{{9,11}}(?:\.\d+)?(?:e\+\d+)?)\t[A-Za-z]+\t"),
             tried=9, c_reader="ZAP"),
    Envelope("slog", "Go slog text", "envelope_slog",
             shape=_SLOG_HEADER,
             line_shape=re.compile(r"^time=[^\s\"]+ level=\S+ (?:source=\S+ )?msg="), tried=10, c_reader="SLOG"),
    Envelope("logrus", "logrus text", "envelope_slog",
             shape=_SLOG_HEADER,
             line_shape=re.compile(r"^time=\"[^\"]*\" level=\w+ msg="), tried=11, c_reader="SLOG"),
    Envelope("loki", "Loki logcli jsonl", "envelope_loki",
             names=(("container", "labels.pod|container"), ("host", "labels.host"),
                    ("unit", "labels.unit|service_name|app|job")),
             c_reader="LOKI", entry=_loki_entry, head_keys=('"labels"', '"line"')),
    Envelope("cloud-logging", "Google Cloud Logging", "envelope_cloud_logging",
             names=(("container", "pod_name|labels.instanceId|container_name"), ("host", "node"),
                    ("unit", "resource.labels.service_name|job_name|function_name")),
             c_reader="CLOUD_LOGGING", entry=_cloud_logging_entry,
             head_keys=('"insertId"', '"logName"', '"textPayload"', '"jsonPayload"')),
    Envelope("cloudwatch", "AWS CloudWatch events", "envelope_cloudwatch", items="$.events",
             names=(("container", "logStreamName"), ("unit", "logGroupName")),
             c_reader="CLOUDWATCH", from_path=("container",), entry=_cloudwatch_entry, document=_cloudwatch_page,
             head_keys=('"events"', '"logStreamName"', '"ingestionTime"', '"nextForwardToken"')),
    Envelope("datadog", "Datadog archive", "envelope_datadog", names=(("host", "host"), ("unit", "service")),
             c_reader="DATADOG", entry=_datadog_entry, head_keys=('"attributes"', '"service"')),
    Envelope("elastic", "Elasticsearch documents", "envelope_elastic", items="$.hits.hits",
             names=(("container", "kubernetes.pod.name|container.name"), ("host", "host.name"),
                    ("unit", "service.name")),
             c_reader="ELASTIC", entry=_elastic_entry, document=_elastic_response, head_keys=('"_source"', '"hits"')),
)
ENVELOPES = {e.name: e for e in TABLE}
# The C readers by kind number (1 first): what _unwrap.configure is given, and the number unwrap() is called with.
C_KINDS = tuple(dict.fromkeys(e.c_reader for e in TABLE if e.c_reader))


def c_kind(name: str) -> int:
    """The kind number of the C reader of the envelope `name` (which has one)."""
    return C_KINDS.index(ENVELOPES[name].c_reader) + 1
