"""--since / --until: the part of the input's time a case keeps (the incident window).

A bound is a time (ISO 8601; one without a zone is read in --tz, like the logs' own zone-less
times) or a duration counted back from the newest record of the input. The window is applied
inside DuckDB where the `events` and `skipped` views are made over the staged lines
(queries/ingest.sql, `in_window`): records outside it are counted, not kept. A line without a
readable timestamp is never a record (it is a skipped line, reason `no readable timestamp`); it
cannot be placed, so it is kept among the skipped lines whatever the window, and counted.
Both ends are included.
"""

from __future__ import annotations

import datetime as dt
import re
from dataclasses import dataclass

import queries
from forensics.errors import ConfigError, InputError
from forensics.jsonfmt import iso_utc

_UNITS = {"w": 604800, "d": 86400, "h": 3600, "m": 60, "s": 1}
_DURATION = re.compile(r"(?:[0-9]{1,9}[wdhms])+")
_PART = re.compile(r"([0-9]+)([wdhms])")
_CALENDAR_DATE = re.compile(r"[0-9]{4}-[0-9]{2}-[0-9]{2}(?:[T ]|$)")
LONGEST = dt.timedelta(days=36525)  # a century: anything longer is a typo, not an incident window
EARLIEST, LATEST = 1970, 2200  # a bound names a year from 1970 to 2199
FORMS = ("a time such as 2026-11-28T09:00 (read in --tz) or 2026-11-28T09:00Z, or a duration before the "
         "newest record such as 90m, 6h, 2d or 1h30m")


@dataclass(frozen=True)
class Bound:
    """One end of the window as given: a time (`at`, naive when the text had no zone) or a duration (`back`)."""

    given: str
    at: dt.datetime | None = None
    back: dt.timedelta | None = None


def parse_bound(text: str) -> Bound:
    """`text` as a Bound, or a ConfigError saying what to pass (whatever the text)."""
    given = text.strip()
    if _DURATION.fullmatch(given):
        back = sum((int(n) * _UNITS[unit] for n, unit in _PART.findall(given)), 0)
        if back > LONGEST.total_seconds():
            raise ConfigError(f"{text!r} is longer than a century; pass {FORMS}")
        return Bound(given, back=dt.timedelta(seconds=back))
    at = _iso_time(given)
    if at is None:
        raise ConfigError(f"{text!r} is neither a time nor a duration; pass {FORMS}")
    return Bound(given, at=at)


def _iso_time(text: str) -> dt.datetime | None:
    if not _CALENDAR_DATE.match(text) or not text.isascii():
        return None  # fromisoformat alone also takes week dates, compact forms and non-ASCII digits
    try:
        at = dt.datetime.fromisoformat(text)
        if at.tzinfo is not None:
            at = at.astimezone(dt.timezone.utc)
    except (ValueError, OverflowError):
        return None
    return at if EARLIEST <= at.year < LATEST else None


@dataclass(frozen=True)
class Window:
    """--since and --until as given (either may be None)."""

    since: Bound | None = None
    until: Bound | None = None

    def __bool__(self) -> bool:
        return bool(self.since or self.until)

    def order_problem(self) -> str | None:
        """Why --until is before --since, when that can be told before reading (else None)."""
        since, until = self.since, self.until
        if not (since and until):
            return None
        if since.back is not None and until.back is not None and until.back > since.back:
            return f"--until {until.given} is before --since {since.given} (durations count back from the newest record)"
        if (since.at and until.at and (since.at.tzinfo is None) == (until.at.tzinfo is None)
                and until.at < since.at):
            return f"--until {until.given} is before --since {since.given}"
        return None


def _placed(con, window: Window, zone: str) -> Window:
    """Zone-less times read in `zone` (--tz), as the logs' zone-less times are, as UTC times. The session's zone is
    UTC outside the reading of files (forensics.ingest.load), and is left so."""
    if not any(b and b.at and b.at.tzinfo is None for b in (window.since, window.until)):
        return window
    queries.run(con, "set_time_zone", zone=zone)
    try:
        return Window(*(_placed_bound(con, bound) for bound in (window.since, window.until)))
    finally:
        queries.run(con, "set_time_zone", zone="UTC")


def _placed_bound(con, bound: Bound | None) -> Bound | None:
    if bound is None or bound.at is None or bound.at.tzinfo is not None:
        return bound
    at = queries.one(con, "time_in_session_zone", {"at": bound.at.isoformat(sep=" ")})["at"]
    return Bound(bound.given, at=at.astimezone(dt.timezone.utc))


@dataclass
class Cut:
    """The window as applied to one case: its ends in UTC (None: open) and what it kept and left out."""

    window: Window
    since: dt.datetime | None
    until: dt.datetime | None
    first_record: dt.datetime | None = None
    last_record: dt.datetime | None = None
    records: int = 0
    before: int = 0
    after: int = 0
    sends: int = 0  # real sends in the window
    undated: int = 0  # lines that would be records but have no readable time: kept among the skipped

    @property
    def in_window(self) -> int:
        return self.records - self.before - self.after

    def predicate(self) -> queries.Fragment:
        """The in_window template for the events and skipped views."""
        return queries.fragment("in_window", since=self.since.isoformat() if self.since else "-infinity",
                                until=self.until.isoformat() if self.until else "infinity")

    def arguments(self) -> list[str]:
        """--since/--until as absolute UTC times, for a next command to read the same window."""
        return [arg for name, at in (("--since", self.since), ("--until", self.until)) if at
                for arg in (name, _exact(at))]

    def to_json(self) -> dict:
        given = self.window
        return {"since": _iso(self.since), "until": _iso(self.until),
                "since_given": given.since.given if given.since else None,
                "until_given": given.until.given if given.until else None,
                "first_record": _iso(self.first_record), "last_record": _iso(self.last_record),
                "records": self.records, "records_in_window": self.in_window, "records_before": self.before,
                "records_after": self.after, "sends_in_window": self.sends, "records_without_time": self.undated}


def _iso(at: dt.datetime | None) -> str | None:
    return iso_utc(at) if at else None


def _exact(at: dt.datetime) -> str:
    return at.astimezone(dt.timezone.utc).replace(tzinfo=None).isoformat() + "Z"


def cut(con, window: Window, events: list[queries.Fragment], zone: str = "UTC") -> Cut | None:
    """The window's ends (a time without a zone read in `zone`, --tz; a duration counted back from the newest record)
    and the records either side of it, from the staged lines (`events`: the events_part templates); None without
    --since/--until."""
    if not window:
        return None
    window = _placed(con, window, zone)
    span = queries.one(con, "records_time_range", events=events)
    last = span["last_record"]
    since, until = (_end(bound, last) for bound in (window.since, window.until))
    if since and until and until < since:
        raise ConfigError(f"--until {window.until.given} ({_exact(until)}) is before --since "
                          f"{window.since.given} ({_exact(since)}); pass an --until later than --since")
    outside = queries.one(con, "records_outside_window", {"since": since, "until": until}, events=events)
    return Cut(window, since, until, span["first_record"], last, span["records"], outside["before"],
               outside["after"])


def _end(bound: Bound | None, last: dt.datetime | None) -> dt.datetime | None:
    if bound is None:
        return None
    if bound.at is not None:
        return bound.at
    return last - bound.back if last is not None else None  # no record at all: refused later anyway


def check_kept(con, window_cut: Cut) -> None:
    """Count what the window kept; a window without a real send is refused (exit 1), naming the window
    and the input's time range: "no duplicates" over an empty window would be a false all-clear."""
    kept = queries.one(con, "window_kept")
    window_cut.sends, window_cut.undated = kept["sends"], kept["undated"]
    if window_cut.sends:
        return
    c = window_cut
    held = f"{c.in_window:,} record(s) in it, none a send" if c.in_window else "no record in it"
    raise InputError(f"no mail-send record in the window {span_text(c)} ({_given(c.to_json())}): {held}; "
                     f"the input's {c.records:,} records run from {_iso(c.first_record)} to "
                     f"{_iso(c.last_record)}; pass a --since/--until inside that range")


def cut_provider_sends(con, window_cut: Cut | None) -> int:
    """Cut the provider_sends table (forensics.reconcile) to the logs' window; how many rows it left out."""
    if not window_cut:
        return 0
    params = {"since": window_cut.since, "until": window_cut.until}
    return queries.run(con, "provider_sends_cut_to_window", params).fetchone()[0]


def span_text(c: Cut) -> str:
    return f"{_iso(c.since) or 'the first record'} → {_iso(c.until) or 'the last record'}"


# What the window is, told from its JSON form (the diagnose document's `window`).

def headline(window: dict | None) -> str | None:
    """The caveat said first: what the window is and who it cannot see (`window` as in the JSON document)."""
    if not window:
        return None
    later = " (nor one whose later send falls after it)" if window["until"] else ""
    return (f"Window {_span(window)} only ({_given(window)}): a person whose earlier send falls before the window "
            f"is not seen as duplicated{later}.")


def read_lines(window: dict | None) -> list[str]:
    """The window's lines under "What was read": what it kept and left out, and the input's own range."""
    if not window:
        return []
    lines = [f"Window {_span(window)}: {window['records_in_window']:,} of {window['records']:,} records "
             f"({window['records_before']:,} before it, {window['records_after']:,} after it; the input runs "
             f"{_time(window['first_record'])} → {_time(window['last_record'])})."]
    if window["records_without_time"]:
        lines.append(f"{window['records_without_time']:,} line(s) without a readable timestamp cannot be placed in "
                     "the window: they are kept, among the skipped lines.")
    return lines


def _span(window: dict) -> str:
    return (f"{_time(window['since']) if window['since'] else 'start of input'} → "
            f"{_time(window['until']) if window['until'] else 'end of input'}")


def _given(window: dict) -> str:
    return " ".join(f"--{end} {window[end + '_given']}" for end in ("since", "until") if window[end + "_given"])


def _time(iso: str | None) -> str:
    """2026-11-28T09:00:00.000Z → 2026-11-28 09:00:00Z (milliseconds only when there are some)."""
    if not iso:
        return "?"
    text = iso.replace("T", " ")
    return text[:-5] + "Z" if text.endswith(".000Z") else text
