"""--since / --until, declared once for every command that reads logs, and how the window is told.

The bounds reach open_case through the click context (like --envelope/--tz/--year), so the commands'
own signatures stay as they are; forensics.ingest.window applies them while the logs are read.
"""

from __future__ import annotations

import functools

import click

WINDOW = "mailmortem.window"  # where window_options leaves the Window for open_case

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


def window_options(func):
    """--since and --until; the command gets neither argument (open_case reads them from the context)."""
    @functools.wraps(func)
    def command(*args, since=None, until=None, **kwargs):
        from forensics.ingest.window import Window

        window = Window(since, until)
        problem = window.order_problem()
        if problem:
            raise click.UsageError(f"{problem}; pass an --until later than --since")
        click.get_current_context().meta[WINDOW] = window
        return func(*args, **kwargs)

    command = click.option("--until", type=TimeBound(), metavar="TIME|DURATION", help=UNTIL_HELP)(command)
    return click.option("--since", type=TimeBound(), metavar="TIME|DURATION", help=SINCE_HELP)(command)


def given_window():
    """The Window of the running command (an empty one when it has no --since/--until)."""
    from forensics.ingest.window import Window

    context = click.get_current_context(silent=True)
    return (context.meta.get(WINDOW) if context else None) or Window()


def note(window: dict | None) -> None:
    """The window on standard error (commands whose output is data: affected, ab-contamination, JSON)."""
    from forensics.ingest.window import headline, read_lines
    from mailmortem.console import warn

    for line in ([headline(window)] if window else []) + read_lines(window):
        warn(line)
