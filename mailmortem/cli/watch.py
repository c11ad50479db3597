"""`mailmortem watch`: follow logs while the incident runs (forensics.watch), and prove the bleeding stopped."""

from __future__ import annotations

import sys

import click

from mailmortem.cli.options import format_option
from mailmortem.cli.reading import case_options


class Duration(click.ParamType):
    """A duration as --since takes one (15m, 1h, 1h30m, 90s), in seconds."""

    name = "duration"

    def convert(self, value, param, ctx):
        if isinstance(value, (int, float)):
            return float(value)
        try:  # bare seconds, fractions too (0.5)
            seconds = float(value)
        except ValueError:
            seconds = None
        if seconds is not None and 0 <= seconds < float("inf"):
            return seconds
        from forensics.errors import ConfigError
        from forensics.ingest.window import parse_bound

        try:
            bound = parse_bound(value)
        except ConfigError:
            bound = None
        if bound is None or bound.back is None:
            self.fail(f"{value!r} is not a duration such as 90s, 15m, 1h or 1h30m", param, ctx)
        return bound.back.total_seconds()


SINCE_HELP = ("Which lines already written count: now (default: only lines written after the watch began), all "
              "(every line of the files found at start), or a time or duration back from now (records from then on).")


@click.command()
@case_options(window=False)
@format_option(choices=("text", "jsonl"), default="text")
@click.option("--since", "since", default="now", show_default=True, metavar="now|all|TIME|DURATION", help=SINCE_HELP)
@click.option("--expect-quiet", type=Duration(), metavar="DURATION",
              help="Exit 0 after DURATION with no send (every file read throughout); 3 at the first send, shown.")
@click.option("--fail-on-duplicates", is_flag=True, help="Exit 3 at the first new duplicated person.")
@click.option("--for", "duration", type=Duration(), metavar="DURATION",
              help="End after DURATION with the diagnose summary of what was seen.")
@click.option("--on-duplicate", "hook", metavar="CMD",
              help="Run CMD (no shell) per new duplicated person with the event as JSON on stdin.")
@click.option("--batch", type=Duration(), metavar="DURATION",
              help="With --on-duplicate: run CMD once per burst of DURATION with the burst's people.")
@click.option("--max-lag", type=Duration(), default="60s", show_default=True, metavar="DURATION",
              help="A reader further behind a file than this has lost evidence (exit 4).")
@click.option("--gone-after", type=Duration(), default="5s", show_default=True, metavar="DURATION",
              help="A followed file removed and not back after this is lost evidence (exit 4).")
@click.option("--stale-after", type=Duration(), default="60s", show_default=True, metavar="DURATION",
              help="Say that a file stopped growing after this long without a new line.")
@click.option("--poll", type=click.FloatRange(0.01, 10), default=None, hidden=True)  # None: forensics.watch.run.POLL_S
def watch(paths, read, fmt, since, expect_quiet, fail_on_duplicates, duration, hook, batch, max_lag, gone_after,
          stale_after, poll):
    """Follow LOGS as they are written (like tail -F) and report each new duplicated person at once.

    LOGS are files, folders, globs, or - for standard input; a file rotated by
    rename or copytruncate is followed on, and a new file in a watched folder
    or glob (a new worker's log) is read from its start. Lines are read as
    diagnose reads them (same options). Events go to stdout, one a line (a new
    duplicated person with its kind once the evidence names it, a new worker, a
    restart, a file that stopped growing); a status line and notes to stderr.
    A file that disappears, turns unreadable or is read too far behind, or a
    stream that closes, is lost evidence: exit 4, whatever else was seen.

    \b
    Examples:
      mailmortem watch logs/ --expect-quiet 15m          # after pausing the workers: prove nothing is sent
      mailmortem watch logs/ --fail-on-duplicates --for 1h   # the next batch: no one emailed twice
      mailmortem watch 'logs/worker-*.log' --format jsonl --on-duplicate 'notify-oncall --json'
      kubectl logs -f deploy/mailer | mailmortem watch - --fail-on-duplicates
    """
    from mailmortem.cli import watch_view
    from forensics.watch import run, session
    from forensics.watch.follow import Pace

    if batch is not None and not hook:
        raise click.UsageError("--batch groups the runs of --on-duplicate, which was not given")
    plan = run.Plan.polling(poll, expect_quiet=expect_quiet, fail_on_duplicates=fail_on_duplicates, duration=duration,
                            status_every=2.0 if _terminal() else 60.0)
    options = _options(read)
    view = watch_view.View(fmt, terminal=_terminal())
    pace = Pace(gone_after=gone_after, stale_after=stale_after, max_lag=max_lag)
    ending, summary = session.watch(list(paths), since, options, plan, pace, read.skip_unreadable, hook, batch,
                                    view.emit, view.status)
    if ending.summarize:
        view.summary(summary)
    sys.exit(ending.code)


def _options(read):
    """The watch's reading: the ReadOptions of the shared decorator (forensics.ingest.reading)."""
    from forensics.watch.state import Options

    return Options(read.syntax, read.field_map(), read.reading(), read.memory_limit, strict=read.strict)


def _terminal() -> bool:
    try:
        return sys.stderr.isatty()
    except (AttributeError, ValueError):
        return False
