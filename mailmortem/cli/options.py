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


def db_option(help_extra: str = ""):
    return click.option(
        "--db", "db", envvar="DATABASE_URL", show_envvar=True, metavar="URL|PATH",
        help="postgresql://… URL or a DuckDB file (default ./mailmortem.duckdb). " + help_extra,
    )


def apply_option():
    return click.option("--apply", is_flag=True, help="Carry out the plan (default: print it and change nothing).")
