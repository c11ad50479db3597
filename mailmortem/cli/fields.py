"""`mailmortem fields`: what each key of the logs holds, what it is read as and why; --write makes a config of it."""

from __future__ import annotations

import os
import tempfile

import click

from mailmortem.cli.options import format_option
from forensics.ingest.envelopes import NAMES as ENVELOPES, NONE as NO_ENVELOPE
from forensics.ingest.sources import SYNTAXES


@click.command()
@click.argument("paths", nargs=-1, required=True, metavar="LOGS...")
@click.option("--syntax", type=click.Choice(SYNTAXES), help="Force the syntax of every file (default: detect per file).")
@click.option("--field", "fields", multiple=True, metavar="CANONICAL=NAME",
              help="Map one of your keys to a canonical field, as on diagnose (repeatable).")
@click.option("--event", "events", multiple=True, metavar="EVENT=VALUE",
              help='Read one of your event values as a canonical event, e.g. --event send="Email sent" (repeatable).')
@click.option("--config", "config", type=click.Path(dir_okay=False),
              help="TOML file with [fields] and [events] tables (default: mailmortem.toml in the working directory).")
@click.option("--no-config", is_flag=True, help="Do not read mailmortem.toml from the working directory.")
@click.option("--no-infer", is_flag=True, help="Show the alias table's reading only: infer nothing.")
@click.option("--envelope", type=click.Choice(ENVELOPES + (NO_ENVELOPE,)), metavar="NAME",
              help="Read every file as wrapped in this envelope, as on diagnose (a file in an envelope is not "
                   "sampled; none: read its lines as they are).")
@click.option("--write", "write_to", type=click.Path(dir_okay=False), metavar="FILE",
              help="Write the reading as a commented TOML config to FILE, to edit and pass with --config.")
@format_option(choices=("table", "json"))
def fields(paths, syntax, fields, events, config, no_config, no_infer, envelope, write_to, fmt):
    """Show every key of LOGS: how many records carry it, its shape, three examples, and the field it is read as.

    The first records of each file are sampled as `diagnose` samples them, so the reading shown is the one
    diagnose uses: the alias table first, then keys inferred from their names or values, --field, --event and
    --config winning over both. A key that looks like a recipient, message id, step or campaign but is read as
    nothing is said; two keys that could be the same field are named (diagnose refuses them).

    \b
    Examples:
      mailmortem fields logs/app.jsonl
      mailmortem fields logs/ --write mailmortem.toml && mailmortem diagnose logs/ --config mailmortem.toml
      mailmortem fields export.csv --field recipient=To --format json
    """
    from forensics.ingest.keys import config_toml, describe
    from mailmortem.cli.reading import read_options

    read = read_options(syntax=syntax, fields=fields, events=events, config=config, no_config=no_config,
                        no_infer=no_infer, envelope=envelope)
    described = describe(paths, read.syntax, read.field_map(), read.reading())
    _show(described, fmt)
    if write_to:
        _replace(write_to, config_toml(described, paths))
        from mailmortem.console import warn

        warn(f"wrote the reading to {write_to}: edit it, then pass --config {write_to}")


def _show(described, fmt: str) -> None:
    from forensics.textsafe import terminal_safe as safe
    from mailmortem.output import write_json, write_rows

    vocabulary = described.vocabulary
    if fmt == "json":
        write_json({"sampled_records": vocabulary.records, "keys": described.keys, "vocabulary": vocabulary.to_json(),
                    "refused": vocabulary.ambiguous})
        return
    rows = [{**row, "field": row["field"] or "-"} for row in described.keys]  # write_rows escapes every cell
    write_rows(rows, "table", columns=["key", "records", "shape", "examples", "field", "why"],
               title=f"Keys of {vocabulary.records:,} sampled records")
    for why in vocabulary.ambiguous.values():
        click.echo(safe("refused: " + why))
    for role, keys in vocabulary.unread_roles.items():
        click.echo(safe(f"no key read as the {role}; the sends carry {', '.join(keys)} (--field {role}=KEY)"))


def _replace(path: str, text: str) -> None:
    """Write FILE whole or not at all: a temporary file beside it, renamed over it once written."""
    folder = os.path.dirname(os.path.abspath(path))
    handle, temporary = tempfile.mkstemp(dir=folder, prefix=".mailmortem-fields-")
    try:
        with os.fdopen(handle, "w", encoding="utf-8") as out:
            out.write(text)
        os.replace(temporary, path)
    except BaseException:
        if os.path.exists(temporary):
            os.unlink(temporary)
        raise
