"""Meta-tests that keep the project honest: help, README and SQL stay true."""

from __future__ import annotations

import re
from pathlib import Path

import pytest

import queries
from mailmortem.cli import COMMANDS, main
from queries import blocks
from tests import query_schema

README = (Path(__file__).resolve().parent.parent / "README.md").read_text(encoding="utf-8")


def _all_commands():
    import click

    ctx = click.Context(main)
    for name in sorted(COMMANDS):
        command = main.get_command(ctx, name)
        yield name, command
        if isinstance(command, click.Group):
            for sub in command.list_commands(ctx):
                yield f"{name} {sub}", command.get_command(ctx, sub)


@pytest.mark.parametrize("name,command", list(_all_commands()))
def test_every_command_has_help_with_an_example_and_is_in_the_readme(name, command):
    assert command is not None, f"{name} is registered but its module is missing"
    assert "Examples:" in (command.help or ""), f"{name} --help has no Examples section"
    assert f"mailmortem {name}" in command.help
    assert f"mailmortem {name}" in README, f"README does not mention mailmortem {name}"


def test_every_query_has_a_description():
    missing = [name for name, q in queries.all_queries().items() if not q.description]
    assert not missing


def test_every_query_declares_its_dialects():
    assert all(q.dialects for q in queries.all_queries().values())


def _checked_blocks(dialect: str) -> list[str]:
    skip = query_schema.templates()
    return [name for name, q in queries.all_queries().items() if dialect in q.dialects and name not in skip]


def _duckdb_problem(con, name: str) -> str | None:
    """EXPLAIN binds each statement (names, types, functions) without running it."""
    import duckdb

    params = query_schema.params(name)
    for statement in blocks.prepared(name, "duckdb", query_schema.values(name)).statements:
        used = {k: v for k, v in params.items() if k in statement.params}
        text = "EXPLAIN " + statement.text
        try:
            con.execute(text, used) if used else con.execute(text)
        except duckdb.Error as exc:
            return str(exc).strip().splitlines()[0]
    return None


@pytest.mark.slow
def test_every_duckdb_block_binds_against_the_projects_schema(monkeypatch):
    made = []
    fragment = queries.fragment
    monkeypatch.setattr(queries, "fragment", lambda name, **values: made.append(name) or fragment(name, **values))
    con = query_schema.duckdb_schema()
    problems = [f"{name}: {problem}" for name in _checked_blocks("duckdb")
                if (problem := _duckdb_problem(con, name))]
    assert not problems
    included = {n for n in query_schema.templates() if n not in made and "duckdb" in queries.get(n).dialects}
    assert included == {"typed_columns", "typed_in_sql", "jsonl_texts", "staged_table", "label_whitespace",
                        "label_folded", "label_normal_form", "reservation_in_sent_log", "sent_log_stage_joined",
                        "envelope_headers", "envelope_header_fields"}, \
        "every fragment block is bound inside a block that uses it"


_PG_PARAM = re.compile(r"%\((\w+)\)s")


def _numbered(text: str) -> tuple[str, int]:
    """psycopg's %(name)s as PREPARE's $1, $2…"""
    names: list[str] = []

    def number(match):
        names.append(match.group(1)) if match.group(1) not in names else None
        return f"${names.index(match.group(1)) + 1}"

    return _PG_PARAM.sub(number, text).replace("%%", "%"), len(names)


def _postgres_problem(conn, name: str) -> str | None:
    """PREPARE binds a query without running it; other statements run and are rolled back."""
    import psycopg

    for statement in blocks.prepared(name, "postgres", query_schema.IDENTS).statements:
        text = statement.text
        plain, _count = _numbered(text)
        verb = plain.lstrip().split(None, 1)[0].upper()
        try:
            with conn.transaction():
                if verb == "COPY":
                    with conn.cursor() as cursor, cursor.copy(text, {}):
                        pass
                elif verb in ("SELECT", "WITH", "INSERT", "UPDATE", "DELETE"):
                    conn.execute(f"PREPARE mm_check AS {plain}")
                    conn.execute("DEALLOCATE mm_check")
                else:
                    conn.execute(text, {})
                raise _Rollback
        except (_Rollback, psycopg.errors.DuplicateObject, psycopg.errors.DuplicateTable):
            pass  # bound; "already exists" is the schema's state (e.g. a key rebuilt only after a load)
        except psycopg.Error as exc:
            return str(exc).strip().splitlines()[0]
    return None


class _Rollback(Exception):
    pass


@pytest.mark.slow
def test_every_postgresql_block_binds_against_the_projects_schema(pg_dsn):
    import psycopg

    with psycopg.connect(pg_dsn) as conn:
        query_schema.postgres_schema(conn)
        problems = [f"{name}: {problem}" for name in _checked_blocks("postgres")
                    if name not in query_schema.POSTGRES_SCHEMA and (problem := _postgres_problem(conn, name))]
        conn.rollback()
    assert not problems
