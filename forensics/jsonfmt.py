"""JSON and time formatting shared by every document mailmortem writes (the diagnose JSON, reports,
audit rows): ISO-8601 UTC with a Z, and a JSON encoder that knows datetimes, dates and sets."""

from __future__ import annotations

import datetime as dt
import json
from typing import Any

from forensics.textsafe import json_safe


def iso_utc(value: dt.datetime) -> str:
    """ISO-8601 UTC with a Z and millisecond precision, as in the JSON contract."""
    if value.tzinfo is not None:
        value = value.astimezone(dt.timezone.utc).replace(tzinfo=None)
    return value.isoformat(timespec="milliseconds") + "Z"


def _default(value: Any) -> Any:
    if isinstance(value, dt.datetime):
        return iso_utc(value)
    if isinstance(value, (dt.date, dt.timedelta)):
        return str(value)
    if isinstance(value, (set, frozenset, tuple)):
        return list(value)
    raise TypeError(f"cannot serialise {type(value).__name__}")


def to_json(document: Any, indent: int | None = 2) -> str:
    """JSON text with non-ASCII letters as they are and every control, bidi or format character escaped."""
    return json_safe(json.dumps(document, default=_default, indent=indent, ensure_ascii=False))
