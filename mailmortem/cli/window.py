"""--since / --until: their values and help (declared with the other reading options in mailmortem.cli.reading),
and how the window is told. forensics.ingest.window applies them while the logs are read.
"""

from __future__ import annotations

import click

_FORMS = ("an ISO time (2026-11-28T09:00Z; without a zone read in --tz) or a duration counted back from the newest "
          "record in LOGS (90m, 6h, 2d, 1h30m)")
SINCE_HELP = (f"Read only records at or after this time: {_FORMS}. E.g. --since 6h keeps the last six hours. A person "
              "whose earlier send falls before the window is not seen as duplicated.")
UNTIL_HELP = (f"Read only records at or before this time: {_FORMS}. E.g. --since 2026-11-28T08:00 --until "
              "2026-11-28T12:00.")


class TimeBound(click.ParamType):
    """A --since/--until value: an ISO time or a duration (forensics.ingest.window.parse_bound)."""

    name = "TIME|DURATION"

    def convert(self, value, param, ctx):
        from forensics.errors import ConfigError
        from forensics.ingest.window import Bound, parse_bound

        if isinstance(value, Bound):
            return value
        try:
            return parse_bound(str(value))
        except ConfigError as exc:
            self.fail(str(exc), param, ctx)


def note(window: dict | None) -> None:
    """The window on standard error (commands whose output is data: affected, ab-contamination, JSON)."""
    from forensics.ingest.window import headline, read_lines
    from mailmortem.console import warn

    for line in ([headline(window)] if window else []) + read_lines(window):
        warn(line)
