"""A block's text for one dialect: parameters translated, typed placeholders filled and quoted.

`:name` becomes `$name` (DuckDB) or `%(name)s` (psycopg, where every other `%` is doubled).
Placeholders say what they hold, and each kind is filled one way only:

    {ident:x}    one identifier, always quoted: "x" ("schema"."table" for a tuple of names)
    {idents:x}   a list of identifiers, comma-separated, each quoted as above
    {lit:x}      a string or integer literal ('it''s', 42; NULL for None): only where a parameter cannot go
                 (a view's body, a regex that must be constant)
    {frag:x}     one of the choices of the block's `-- fragments: x=A|B` line: a keyword given
                 as text, or a Fragment (`queries.fragment`) made from a block named there
    {list:x}     a non-empty list of such choices, comma-separated
    {union:x}    a non-empty list of such choices joined by UNION ALL
    {block:x}    block x's SQL, inlined when the blocks are loaded
    {twin:x}     a session function of forensics.addresses.install_sql (mm_address, mm_label): pg_temp.x on
                 PostgreSQL (which never looks up a function in pg_temp unqualified), x on DuckDB
"""

from __future__ import annotations

import re
from dataclasses import dataclass

from queries.blocks import PARAM, PLACEHOLDER, Query, QueryError, all_queries, get, split_literals

_TOKEN = re.compile(f"{PLACEHOLDER.pattern}|{PARAM.pattern}|%")
_JOINERS = {"frag": None, "list": ", ", "union": "\nUNION ALL\n"}


@dataclass(frozen=True)
class Fragment:
    """A block's SQL with its placeholders filled: a piece of another block (it has no parameters)."""

    name: str
    sql: str
    dialects: tuple[str, ...]


def fragment(name: str, **values) -> Fragment:
    query = get(name)
    if query.params:
        raise QueryError(f"{name} has parameters, so it cannot be a fragment of another block")
    return Fragment(name, _filled(query, query.sql, None, _checked_values(query, values)), query.dialects)


def statements(query: Query, dialect: str, values: dict) -> list[str]:
    """Each statement of the block as sent to `dialect`."""
    if dialect not in query.dialects:
        raise QueryError(f"{query.name} is not a {dialect} query (its dialects: {' '.join(query.dialects)})")
    values = _checked_values(query, values)
    return [_filled(query, text, dialect, values) for text in query.statements]


def _checked_values(query: Query, values: dict) -> dict:
    """The values the block's placeholders use (like parameters, others are left out); none may be missing."""
    wanted = [name for name, kind in query.placeholders.items() if kind not in ("block", "twin")]
    missing = [name for name in wanted if name not in values]
    if missing:
        raise QueryError(f"{query.name}: no value for {', '.join(missing)}")
    return {name: values[name] for name in wanted}


def _filled(query: Query, text: str, dialect: str | None, values: dict) -> str:
    postgres = dialect == "postgres"

    def token(match) -> str:
        kind, name, param = match.groups()
        if kind == "twin":
            if dialect is None:
                raise QueryError(f"{query.name}: {{twin:{name}}} in a fragment")
            return f"pg_temp.{name}" if postgres else name
        if kind:
            value = _value(query, kind, name, values[name], dialect)
            return value.replace("%", "%%") if postgres else value
        if param:
            if dialect is None:
                raise QueryError(f"{query.name}: parameter :{param} in a fragment")
            return f"%({param})s" if postgres else f"${param}"
        return "%%" if postgres else "%"

    return "".join(_TOKEN.sub(token, piece) if is_code else (piece.replace("%", "%%") if postgres else piece)
                   for is_code, piece in split_literals(text))


def _value(query: Query, kind: str, name: str, value, dialect: str | None) -> str:
    where = f"{query.name}: {{{kind}:{name}}}"
    if kind == "ident":
        return quote_ident(value, where)
    if kind == "idents":
        if isinstance(value, str) or not value:
            raise QueryError(f"{where} needs a non-empty list of names")
        return ", ".join(quote_ident(v, where) for v in value)
    if kind == "lit":
        return quote_literal(value, where)
    choices = query.fragments[name]
    if kind == "frag":
        return _choice(value, choices, where, dialect)
    if isinstance(value, (str, Fragment)) or not value:
        raise QueryError(f"{where} needs a non-empty list")
    return _JOINERS[kind].join(_choice(v, choices, where, dialect) for v in value)


def _choice(value, choices: tuple[str, ...], where: str, dialect: str | None) -> str:
    if isinstance(value, Fragment) and value.name in choices:
        if dialect and dialect not in value.dialects:
            raise QueryError(f"{where}: fragment {value.name} is not a {dialect} query")
        return value.sql
    if isinstance(value, str) and value in choices and value not in all_queries():
        return value
    shown = value.name if isinstance(value, Fragment) else repr(value)[:60]
    raise QueryError(f"{where}: {shown} is not one of {'|'.join(choices)}")


def quote_ident(value, where: str = "identifier") -> str:
    """`name` → "name" (a tuple of names → "schema"."table"); quotes inside are doubled."""
    parts = (value,) if isinstance(value, str) else tuple(value) if isinstance(value, tuple) else ()
    if not parts or not all(isinstance(p, str) and p and "\x00" not in p for p in parts):
        raise QueryError(f"{where}: {str(value)[:60]!r} is not an identifier")
    return ".".join('"' + p.replace('"', '""') + '"' for p in parts)


def quote_literal(value, where: str = "literal") -> str:
    """A text as a standard SQL string literal, an integer, or NULL for None (a view's optional value)."""
    if value is None:
        return "NULL"
    if isinstance(value, int) and not isinstance(value, bool):
        return str(value)
    if not isinstance(value, str) or "\x00" in value:
        raise QueryError(f"{where}: {str(value)[:60]!r} is not a text or an integer")
    return "'" + value.replace("'", "''") + "'"
