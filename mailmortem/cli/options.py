"""Options shared by several commands, declared once."""

from __future__ import annotations

import click

from mailmortem.output import FORMATS


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


def output_option(what: str = "the output"):
    """-o/--output FILE: replaced only when the command succeeds (mailmortem.output.to_file); never a shell `>`."""
    return click.option("-o", "--output", "out", type=click.Path(dir_okay=False), metavar="FILE",
                        help=f"Write {what} to FILE, replacing it only when the command succeeds (default: "
                             "standard output).")


def apply_option():
    return click.option("--apply", is_flag=True, help="Carry out the plan (default: print it and change nothing).")


# One --year and one --tz for logs and exports alike (a command that reads both has them once).
YEAR_HELP = ("Year of syslog stamps, which carry none: in logs (RFC 3164), every stamp's (default: the year the file "
             "was last modified, a stamp in a later month than that being from the year before); in a Postfix "
             "export, its first line's.")
TZ_HELP = ("Time zone of timestamps that carry none (syslog, Python logging, console formats, records; a Postfix "
           "export's lines), an IANA name such as Europe/Berlin (default UTC).")
