"""Options shared by several commands, declared once."""

from __future__ import annotations

import click

from mailmortem.output import FORMATS


def format_option(choices=FORMATS, default="table"):
    return click.option(
        "--format", "fmt", type=click.Choice(choices), default=default, show_default=True,
        help="table for people; json, jsonl or csv for scripts (data on stdout, messages on stderr).",
    )


def db_option(help_extra: str = ""):
    return click.option(
        "--db", "db", envvar="DATABASE_URL", show_envvar=True, metavar="URL|PATH",
        help="postgresql://… URL or a DuckDB file (default ./mailmortem.duckdb). " + help_extra,
    )


def apply_option():
    return click.option("--apply", is_flag=True, help="Carry out the plan (default: print it and change nothing).")
