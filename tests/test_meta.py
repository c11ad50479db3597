"""Meta-tests that keep the project honest: help, README and SQL stay true."""

from __future__ import annotations

import dataclasses
import re
from pathlib import Path

import pytest

import queries
from mailmortem.cli import COMMANDS, main

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


def _pg_syntax_problem(conn, sql: str) -> str | None:
    import psycopg

    numbered, names = sql, []

    def number(match):
        if match.group(1) not in names:
            names.append(match.group(1))
        return f"${names.index(match.group(1)) + 1}"

    numbered = queries._outside_literals(sql, lambda code: queries._PARAM.sub(number, code))
    numbered = re.sub(r"\{(\w+)\}", r'x_\1', numbered)
    for statement in filter(str.strip, numbered.split(";\n")):
        try:
            with conn.transaction():
                # PREPARE parses a parameterised statement; others run and are rolled back.
                conn.execute(f"PREPARE mm_check AS {statement}" if names else statement)
                raise _Rollback
        except _Rollback:
            pass
        except psycopg.errors.SyntaxError as exc:
            return str(exc).splitlines()[0]
        except psycopg.Error:
            pass  # unknown tables/types: the parser accepted it, binding needs the real schema
    return None


def _filled_for_check(q, blocks) -> str:
    """A block as the code runs it: a {placeholder} naming another block holds that block's SQL (see
    ingest._filled); any other placeholder is a generated identifier or list, checked as a name."""
    sql = re.sub(r"\{(\w+)\}", lambda m: blocks[m.group(1)].sql if m.group(1) in blocks else m.group(0), q.sql)
    sql = dataclasses.replace(q, sql=sql.replace("{relation}", "VIEW")).for_duckdb()  # a keyword, not a name
    return re.sub(r"\{(\w+)\}", r"x_\1", sql)


class _Rollback(Exception):
    pass


def test_every_sql_block_parses_in_duckdb_or_postgresql(pg_dsn):
    import duckdb
    import psycopg

    problems = []
    with psycopg.connect(pg_dsn, autocommit=True) as conn:
        blocks = queries.all_queries()
        for name, q in blocks.items():
            sql = _filled_for_check(q, blocks)
            if q.description.startswith("Template") and re.match(r"\w+ AS \(", sql):  # a CTE tail
                sql = f"WITH unquoted AS (SELECT 1) , {sql}"
            elif q.description.startswith("Template") and not sql.lstrip().startswith("SELECT"):  # an expression
                sql = f"SELECT {sql} FROM (SELECT NULL AS l, NULL AS vals)"
            try:
                duckdb.extract_statements(sql)
                continue
            except duckdb.Error:
                pass
            problem = _pg_syntax_problem(conn, q.sql)
            if problem:
                problems.append(f"{q.source}:{name}: {problem}")
    assert not problems
