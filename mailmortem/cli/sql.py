"""`mailmortem sql`: query a case saved with `diagnose --save`."""

from __future__ import annotations

import click

from mailmortem.cli.options import format_option
from forensics.errors import DatabaseError, InputError


@click.command()
@click.argument("database", type=click.Path(dir_okay=False))
@click.argument("query")
@format_option()
def sql(database, query, fmt):
    """Run a read-only SQL QUERY on a saved case (tables: events, sends, skipped, dup_people, incidents).

    \b
    Examples:
      mailmortem diagnose logs/ --save case.duckdb
      mailmortem sql case.duckdb "select kind, count(*) from dup_people group by kind"
      mailmortem sql case.duckdb "select * from skipped limit 20" --format csv
    """
    import duckdb

    from mailmortem.output import write_rows

    try:
        con = duckdb.connect(database, read_only=True)
    except duckdb.IOException as exc:
        raise InputError(f"{database}: cannot open as a DuckDB case ({str(exc).splitlines()[0]})") from None
    try:
        cursor = con.execute(query)
    except duckdb.Error as exc:
        raise DatabaseError(f"query failed: {str(exc).splitlines()[0]}") from None
    columns = [d[0] for d in cursor.description] if cursor.description else []
    rows = [dict(zip(columns, row)) for row in cursor.fetchall()]
    write_rows(rows, fmt, columns=columns)
