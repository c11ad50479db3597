"""How logs and provider exports are read, declared once for every command that reads them: the reading options,
as one value.

`reading_options` gives the command one `read` argument, a forensics.ingest.reading.ReadOptions built from
--field, --event, --config/--no-config, --no-infer, --syntax, --envelope, --tz, --year and --since/--until;
`case_options` adds LOGS and how the case is loaded (--strict, --memory-limit, --skip-unreadable). The same
value loads the case and is repeated by every next command the run prints. A meta-test
(tests/cli/test_reading_options.py) holds that every command reading logs takes every option here.

`export_options` gives a command that reads provider exports one `exports` argument, a
forensics.providers.ExportSpec; under `case_options`, the exports are read with the logs' --year and --tz.
"""

from __future__ import annotations

import functools

import click

from mailmortem.cli.options import TZ_HELP, YEAR_HELP
from mailmortem.cli.window import SINCE_HELP, UNTIL_HELP, TimeBound

# The option names of the reading set, as the meta-test checks them.
READING_FLAGS = ("--syntax", "--field", "--event", "--config", "--no-config", "--no-infer", "--envelope", "--tz",
                 "--year", "--since", "--until")
CASE_FLAGS = ("--strict", "--memory-limit", "--skip-unreadable")
_READING_PARAMS = ("syntax", "fields", "events", "config", "no_config", "no_infer", "envelope", "tz", "year", "since",
                   "until")
_CASE_PARAMS = ("strict", "memory_limit", "skip_unreadable")
_WINDOW_PARAMS = ("since", "until")  # declared by _window_decorators


def _reading_decorators() -> list:
    from forensics.ingest.envelopes import NAMES as ENVELOPES, NONE as NO_ENVELOPE
    from forensics.ingest.reading import CONFIG_NAME
    from forensics.ingest.sources import SYNTAXES

    return [
        click.option("--syntax", type=click.Choice(SYNTAXES),
                     help="Force the syntax of every file (default: detect per file)."),
        click.option("--field", "fields", multiple=True, metavar="CANONICAL=NAME",
                     help="Map one of your keys to a canonical field, e.g. --field recipient=To (repeatable)."),
        click.option("--event", "events", multiple=True, metavar="EVENT=VALUE",
                     help='Read one of your event values as a canonical event, e.g. --event send="outreach email '
                          'sent" (repeatable; events: send, claim, renew, release, expire, start, error).'),
        click.option("--config", "config", type=click.Path(dir_okay=False), metavar="FILE",
                     help="TOML file with [fields] and [events] tables of the same mappings (`mailmortem fields "
                          f"--write` makes one; default: {CONFIG_NAME} in the working directory, when there is one)."),
        click.option("--no-config", is_flag=True, help=f"Do not read {CONFIG_NAME} from the working directory."),
        click.option("--no-infer", is_flag=True,
                     help="Read keys by the alias table, --field and --event only: infer nothing from the logs."),
        click.option("--envelope", type=click.Choice(ENVELOPES + (NO_ENVELOPE,)), metavar="NAME",
                     help="Read every file as wrapped in this envelope (default: detect per file; none: no "
                          f"envelope). One of: {', '.join(ENVELOPES)}, {NO_ENVELOPE}."),
        click.option("--tz", metavar="ZONE", help=TZ_HELP),
        click.option("--year", type=click.IntRange(1970, 2200), metavar="YEAR", help=YEAR_HELP),
    ]


def _window_decorators() -> list:
    return [
        click.option("--since", type=TimeBound(), metavar="TIME|DURATION", help=SINCE_HELP),
        click.option("--until", type=TimeBound(), metavar="TIME|DURATION", help=UNTIL_HELP),
    ]


def _case_decorators() -> list:
    return [
        click.option("--strict", is_flag=True, help="Stop at the first line that is not a record."),
        click.option("--memory-limit", default=None, metavar="SIZE",
                     help="DuckDB memory limit; spills to disk beyond it (default 1GB)."),
        click.option("--skip-unreadable", is_flag=True,
                     help="Read what can be read and list the files and folders that cannot (default: refuse)."),
    ]


def reading_options(func=None, *, window: bool = True):
    """The reading options; the command gets them as one `read` argument (a ReadOptions). `window=False`: no
    --since/--until, for a command whose --since means something else (`watch`: which lines already written count)."""
    if func is None:
        return functools.partial(reading_options, window=window)

    @functools.wraps(func)
    def command(*args, **kwargs):
        given = {name: kwargs.pop(name) for name in _READING_PARAMS if window or name not in _WINDOW_PARAMS}
        kwargs["read"] = read_options(**given)
        return func(*args, **kwargs)

    return _decorated(command, _reading_decorators() + (_window_decorators() if window else []))


def case_options(func=None, *, logs_required: bool = True, window: bool = True):
    """LOGS, the reading options and how the case is loaded; the command gets `paths` and `read`.
    `logs_required=False` (`@case_options(logs_required=False)`): LOGS may be left out, for a command that then
    reads --provider-export alone (mailmortem.cli.provider_only). `window=False`: as for reading_options."""
    if func is None:
        return functools.partial(case_options, logs_required=logs_required, window=window)

    @functools.wraps(func)
    def command(*args, **kwargs):
        import dataclasses

        loading = {name: kwargs.pop(name) for name in _CASE_PARAMS}
        kwargs["read"] = dataclasses.replace(kwargs["read"], **loading)
        return func(*args, **kwargs)

    logs = click.argument("paths", nargs=-1, required=logs_required,
                          metavar="LOGS..." if logs_required else "[LOGS]...")
    return _decorated(reading_options(_decorated(command, _case_decorators()), window=window), [logs])


def _decorated(command, decorators: list):
    for decorator in reversed(decorators):
        command = decorator(command)
    return command


def read_options(**given):
    """The ReadOptions of these option values (forensics.ingest.reading.options_from: the config read and the
    mappings checked before any log is read); options that contradict each other are a usage error."""
    from forensics.ingest.reading import OptionsConflict, options_from

    try:
        return options_from(**given)
    except OptionsConflict as exc:
        raise click.UsageError(str(exc)) from None


_EXPORT_PARAMS = ("export_paths", "export_provider", "export_maps", "campaign_keys", "step_keys", "candidate_keys",
                  "export_year", "export_tz")


def export_options(required: bool = False, what: str = "Provider send history", times: bool = True):
    """--provider-export and how to read it: the same options on every command that reads exports.

    The command gets them as one `exports` argument, a forensics.providers.ExportSpec (falsy without paths).
    A command that also reads logs (`times=False`, under case_options) has one --year and --tz for both: the
    export takes those the logs were read with (the `read` argument case_options passes down).
    """
    from forensics.providers.detect import PROVIDERS

    options = [
        click.option("--provider-export", "export_paths", multiple=True, required=required, metavar="PATH",
                     help=f"{what}: a file, folder or glob (.gz fine); repeat for several."),
        click.option("--provider", "export_provider", type=click.Choice(PROVIDERS),
                     help="Read every export as this provider's (default: each file by its provider's own fields; "
                          "a file no provider claims, or two do, is refused)."),
        click.option("--map", "export_maps", multiple=True, metavar="FIELD=COLUMN",
                     help="Your own CSV/JSONL: the column of recipient and msg_id (unless so named), and of sent_at, "
                          "event, campaign, step, candidate, subject, template (looked for by name when not mapped)."),
        click.option("--campaign-key", "campaign_keys", multiple=True,
                     help="Metadata key holding the campaign (default: campaign, campaign_id)."),
        click.option("--step-key", "step_keys", multiple=True, help="Metadata key holding the step (default: step)."),
        click.option("--candidate-key", "candidate_keys", multiple=True,
                     help="Metadata key holding the candidate (default: candidate, candidate_id, lead_id)."),
    ]
    if times:
        options += [
            click.option("--year", "export_year", type=click.IntRange(1970, 2200), help=YEAR_HELP),
            click.option("--tz", "export_tz", help=TZ_HELP),
        ]

    def decorate(func):
        @functools.wraps(func)
        def with_spec(*args, **kwargs):
            if not times:
                kwargs["export_year"], kwargs["export_tz"] = kwargs["read"].year, kwargs["read"].tz
            kwargs["exports"] = _export_spec(*(kwargs.pop(name) for name in _EXPORT_PARAMS), times)
            return func(*args, **kwargs)

        for option in reversed(options):
            with_spec = option(with_spec)
        return with_spec

    return decorate


def _export_spec(paths, provider, maps, campaign_keys, step_keys, candidate_keys, year, tz, times=True):
    from forensics.providers import ExportSpec, Keys
    from forensics.providers.generic import parse_map

    if not paths:  # nothing given to read: only the times, for exports found among the LOGS
        if provider or maps or campaign_keys or step_keys or candidate_keys or (times and (year or tz)):
            raise click.UsageError("--provider, --map, the --*-key options, --year and --tz say how to read "
                                   "--provider-export, which was not given")
        return ExportSpec(year=year, tz=tz)
    keys = Keys(**{name: tuple(given) for name, given in (("campaign", campaign_keys), ("step", step_keys),
                                                          ("candidate", candidate_keys)) if given})
    return ExportSpec(tuple(paths), provider, parse_map(maps), keys, year, tz)


def open_case(paths, read, save=None):
    """Load LOGS as `read` says, with the delayed progress line."""
    from forensics.ingest.case import load_case
    from mailmortem.console import delayed_status

    with delayed_status("reading logs") as progress:
        return load_case(paths, database=save, progress=progress, options=read, require_sends=True)


def note_reading(case) -> None:
    """For a command whose output is data: the config the fields were mapped by and the provider exports found
    among the LOGS, on standard error (diagnose's view says them in "What was read")."""
    from forensics.findings import reading_document
    from mailmortem.console import warn

    for line in reading_lines(reading_document(case)):
        warn(line)


def reading_lines(reading: dict) -> list[str]:
    """What "What was read" says of the reading beyond each file (the document's `reading`), made safe to show."""
    from forensics.findings import reading_notes
    from forensics.textsafe import terminal_safe

    return [terminal_safe(line) for line in reading_notes(reading)]
