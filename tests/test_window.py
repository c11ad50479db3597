"""The --since/--until parser: any text gives a bound or a clean error saying what to pass, never a crash;
what it accepts it reads exactly."""

from __future__ import annotations

import datetime as dt

import click
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from forensics.errors import ConfigError
from forensics.ingest.window import Bound, Window, parse_bound
from mailmortem.cli.window import TimeBound

UNITS = {"w": 604800, "d": 86400, "h": 3600, "m": 60, "s": 1}

iso_ish = st.builds(lambda d, sep, zone: d.isoformat(sep=sep) + zone,
                    st.datetimes(min_value=dt.datetime(1, 1, 1), max_value=dt.datetime(9999, 12, 31)),
                    st.sampled_from(["T", " "]), st.sampled_from(["", "Z", "+01:00", "-0530", "+14:00", "-23:59"]))
near_misses = st.builds(lambda parts: "".join(parts), st.lists(
    st.sampled_from(["2026", "-", "11", "28", "T", ":", "09", "Z", "+", "h", "m", "d", "w", "s", "1", "0", ".", " ",
                     "99999999999", "٣", "２", "W48", "\x00", "\u202e", "yesterday"]), max_size=12))


@pytest.mark.slow
@settings(max_examples=400, deadline=None)
@given(st.one_of(st.text(), iso_ish, near_misses))
def test_any_text_is_a_bound_or_a_config_error(text):
    try:
        bound = parse_bound(text)
    except ConfigError as exc:
        assert "pass a time such as" in str(exc) and "\n" not in repr(str(exc))
        return
    assert isinstance(bound, Bound) and (bound.at is None) != (bound.back is None)
    if bound.at is not None:
        assert 1970 <= bound.at.year < 2200
        assert bound.at.tzinfo in (None, dt.timezone.utc)
    else:
        assert dt.timedelta(0) <= bound.back <= dt.timedelta(days=36525)


@pytest.mark.slow
@settings(max_examples=200, deadline=None)
@given(st.one_of(st.text(), iso_ish, near_misses))
def test_the_option_gives_a_bound_or_a_usage_error(text):
    try:
        value = TimeBound().convert(text, None, None)
    except click.BadParameter as exc:
        assert exc.exit_code == 2 and "pass a time such as" in exc.format_message()
        return
    assert isinstance(value, Bound)


@pytest.mark.slow
@settings(max_examples=200, deadline=None)
@given(st.lists(st.tuples(st.integers(0, 500), st.sampled_from(list(UNITS))), min_size=1, max_size=4))
def test_a_duration_is_the_sum_of_its_parts(parts):
    text = "".join(f"{n}{unit}" for n, unit in parts)
    assert parse_bound(text).back == dt.timedelta(seconds=sum(n * UNITS[unit] for n, unit in parts))


@pytest.mark.slow
@settings(max_examples=200, deadline=None)
@given(st.datetimes(min_value=dt.datetime(1970, 1, 2), max_value=dt.datetime(2199, 12, 30)),
       st.sampled_from([None, dt.timezone.utc, dt.timezone(dt.timedelta(hours=5, minutes=30)),
                        dt.timezone(dt.timedelta(hours=-8))]))
def test_an_iso_time_reads_back_as_the_same_instant(at, zone):
    bound = parse_bound(at.replace(tzinfo=zone).isoformat())
    if zone is None:
        assert bound.at == at and bound.at.tzinfo is None  # read in --tz once the case is opened
    else:
        assert bound.at == at.replace(tzinfo=zone) and bound.at.tzinfo == dt.timezone.utc


@pytest.mark.parametrize("text,seconds", [("90m", 5400), ("6h", 21600), ("2d", 172800), ("1h30m", 5400),
                                          (" 1w ", 604800), ("0s", 0)])
def test_durations(text, seconds):
    assert parse_bound(text).back == dt.timedelta(seconds=seconds)


@pytest.mark.parametrize("text", ["yesterday", "6 h", "6H", "1.5h", "-2h", "2026", "2026-W48-6", "20261128T0900",
                                  "1969-12-31T23:59Z", "2200-01-01", "9999999999d", "37000d", "2026-11-28T25:00"])
def test_refused(text):
    with pytest.raises(ConfigError):
        parse_bound(text)


def test_the_order_is_checked_when_it_can_be_before_reading():
    since, until = parse_bound("2026-11-28T10:00"), parse_bound("2026-11-28T09:00")
    assert "is before --since" in Window(since, until).order_problem()
    assert Window(parse_bound("1h"), parse_bound("2h")).order_problem()
    assert Window(parse_bound("2h"), parse_bound("1h")).order_problem() is None
    # a zone-less time and a zoned one, or a time and a duration, are compared once the input is read
    assert Window(parse_bound("2026-11-28T10:00"), parse_bound("2026-11-28T09:00Z")).order_problem() is None
    assert Window(parse_bound("2026-11-28T10:00Z"), parse_bound("1h")).order_problem() is None
