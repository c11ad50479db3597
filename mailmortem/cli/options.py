"""Options shared by several commands, declared once."""

from __future__ import annotations

import functools

import click

from mailmortem.output import FORMATS

READING = "mailmortem.reading"  # where diagnose.case_options leaves --envelope/--tz/--year for the command
VOCABULARY = "mailmortem.vocabulary"  # and --event, and whether to infer (--no-infer)


def given_reading():
    """The Reading (--envelope/--tz/--year) of the running command, or None outside case_options."""
    context = click.get_current_context(silent=True)
    return context.meta.get(READING) if context else None


def format_help(choices) -> str:
    """The --format help names exactly the formats the command accepts."""
    scripts = [c for c in choices if c != "table"]
    listed = ", ".join(scripts[:-1]) + (" or " if len(scripts) > 1 else "") + scripts[-1] if scripts else ""
    parts = (["table for people"] if "table" in choices else []) + ([f"{listed} for scripts"] if listed else [])
    return "; ".join(parts) + " (data on stdout, messages on stderr)."


def format_option(choices=FORMATS, default="table"):
    return click.option(
        "--format", "fmt", type=click.Choice(choices), default=default, show_default=True,
        help=format_help(choices),
    )


def db_option(help_extra: str = "", duckdb: bool = True):
    """--db; `duckdb=False` for a command that needs PostgreSQL (its help names no DuckDB default)."""
    what = "postgresql://… URL or a DuckDB file (default ./mailmortem.duckdb). " if duckdb else "postgresql://… URL. "
    return click.option("--db", "db", envvar="DATABASE_URL", show_envvar=True, metavar="URL|PATH" if duckdb else "URL",
                        help=what + help_extra)


def db_hint(db: str | None) -> str:
    """` --db …` to repeat in a suggested command when --db was typed (DATABASE_URL carries over by itself)."""
    import shlex

    from remediation.store import safe_label

    ctx = click.get_current_context(silent=True)
    if not db or ctx is None or ctx.get_parameter_source("db") != click.core.ParameterSource.COMMANDLINE:
        return ""
    return " --db " + shlex.quote(safe_label(db))


def apply_option():
    return click.option("--apply", is_flag=True, help="Carry out the plan (default: print it and change nothing).")


# One --year and one --tz for logs and exports alike (a command that reads both has them once).
YEAR_HELP = ("Year of syslog stamps, which carry none: in logs (RFC 3164), every stamp's (default: the year the file "
             "was last modified, a stamp in a later month than that being from the year before); in a Postfix "
             "export, its first line's.")
TZ_HELP = ("Time zone of timestamps that carry none (syslog, Python logging, console formats, records; a Postfix "
           "export's lines), an IANA name such as Europe/Berlin (default UTC).")

_EXPORT_PARAMS = ("export_paths", "export_provider", "export_maps", "campaign_keys", "step_keys", "candidate_keys",
                  "export_year", "export_tz")


def export_options(required: bool = False, what: str = "Provider send history", times: bool = True):
    """--provider-export and how to read it: the same options on every command that reads exports.

    The command gets them as one `exports` argument, a forensics.providers.ExportSpec (falsy without paths).
    A command that also reads logs (`times=False`, under case_options) has one --year and --tz for both: the
    export takes those the logs were read with.
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
                kwargs["export_year"], kwargs["export_tz"] = _log_times()
            kwargs["exports"] = _export_spec(*(kwargs.pop(name) for name in _EXPORT_PARAMS), times)
            return func(*args, **kwargs)

        for option in reversed(options):
            with_spec = option(with_spec)
        return with_spec

    return decorate


def _log_times() -> tuple:
    """The --year and --tz the command's logs are read with (left by case_options in the click context)."""
    reading = given_reading()
    if reading is None:
        return None, None
    return reading.year, (reading.tz if reading.tz != "UTC" else None)


def _export_spec(paths, provider, maps, campaign_keys, step_keys, candidate_keys, year, tz, times=True):
    from forensics.providers import ExportSpec, Keys
    from forensics.providers.generic import parse_map

    if not paths and (provider or maps or campaign_keys or step_keys or candidate_keys or (times and (year or tz))):
        raise click.UsageError("--provider, --map, the --*-key options, --year and --tz say how to read "
                               "--provider-export, which was not given")

    keys = Keys(**{name: tuple(given) for name, given in (("campaign", campaign_keys), ("step", step_keys),
                                                          ("candidate", candidate_keys)) if given})
    return ExportSpec(tuple(paths), provider, parse_map(maps), keys, year, tz)
