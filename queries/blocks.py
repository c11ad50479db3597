"""Named blocks of `queries/*.sql`: parsed once, checked as they are loaded, and made ready for one dialect.

A block is a `-- name:` line, its description (the comment lines after it), header lines
`-- dialect: duckdb postgres` (required) and `-- fragments: NAME=A|B|C` (the only things a
`{frag:NAME}`, `{list:NAME}` or `{union:NAME}` may hold), then its SQL.

`prepared` gives a block's text for one dialect: parameters translated, typed placeholders filled and quoted.
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
from dataclasses import dataclass, field
from functools import lru_cache
from importlib import resources

DIALECTS = ("duckdb", "postgres")
KINDS = ("ident", "idents", "lit", "frag", "list", "union", "block", "twin")
TWINS = ("mm_address", "mm_label")  # the session functions of forensics.addresses.install_sql

_NAME = re.compile(r"^--\s*name:\s*([A-Za-z_]\w*)\s*$")
_HEADER = re.compile(r"^--\s*(dialect|fragments):\s*(.*?)\s*$")
_FRAGMENTS = re.compile(r"([a-z_]\w*)\s*=\s*([^=\s|]+(?:\s*\|\s*[^=\s|]+)*)")
# `:name` but not `::type` casts and not inside a word (e.g. a time like 10:30).
PARAM = re.compile(r"(?<![:\w]):([A-Za-z_]\w*)")
PLACEHOLDER = re.compile(r"\{(\w+):(\w+)\}")
_UNTYPED = re.compile(r"\{(\w*)\}")
_DOLLAR = re.compile(r"\$([A-Za-z_]\w*)")
# Quoted strings, quoted identifiers and comments: never parameters or placeholders.
_LITERAL = re.compile(r"'(?:[^']|'')*'|\"(?:[^\"]|\"\")*\"|--[^\n]*")
_TOKEN = re.compile(f"{PLACEHOLDER.pattern}|{PARAM.pattern}|%")  # what a block's text for a dialect rewrites
_JOINERS = {"frag": None, "list": ", ", "union": "\nUNION ALL\n"}


class QueryError(Exception):
    """A named query that does not exist, is malformed, or was given the wrong values."""


@dataclass(frozen=True)
class Query:
    name: str
    description: str
    sql: str
    source: str
    dialects: tuple[str, ...] = ()
    fragments: dict[str, tuple[str, ...]] = field(default_factory=dict)

    @property
    def params(self) -> list[str]:
        """The `:name` parameters, in order of first use."""
        return list(_params_of(self.sql))

    @property
    def placeholders(self) -> dict[str, str]:
        """{name: kind} of the `{kind:name}` placeholders."""
        return {name: kind for code in code_parts(self.sql) for kind, name in PLACEHOLDER.findall(code)}

    @property
    def statements(self) -> list[str]:
        return [s for s in self.sql.split(";\n") if s.strip()]


def split_literals(sql: str) -> list[tuple[bool, str]]:
    """The text as (is_code, piece) pairs: code between string literals, quoted names and comments."""
    pieces, pos = [], 0
    for match in _LITERAL.finditer(sql):
        pieces += [(True, sql[pos:match.start()]), (False, match.group(0))]
        pos = match.end()
    return pieces + [(True, sql[pos:])]


def code_parts(sql: str) -> list[str]:
    return [piece for is_code, piece in split_literals(sql) if is_code]


def _headers(lines: list[str], where: str) -> tuple[tuple[str, ...], dict, list[str]]:
    dialects: tuple[str, ...] = ()
    fragments: dict[str, tuple[str, ...]] = {}
    description = []
    for line in lines:
        header = _HEADER.match(line)
        if header and header.group(1) == "dialect":
            dialects = tuple(header.group(2).split())
            unknown = set(dialects) - set(DIALECTS)
            if unknown or not dialects:
                raise QueryError(f"{where}: unknown dialect {' '.join(sorted(unknown)) or '(none)'}")
        elif header:
            for name, choices in _FRAGMENTS.findall(header.group(2)):
                fragments[name] = tuple(c.strip() for c in choices.split("|"))
        else:
            description.append(line[2:].strip())
    return dialects, fragments, description


def _checked(query: Query) -> Query:
    where = f"{query.source}:{query.name}"
    if not query.dialects:
        raise QueryError(f"{where}: no `-- dialect:` line")
    for code in code_parts(query.sql):
        untyped = _UNTYPED.search(code)
        if untyped:
            raise QueryError(f"{where}: untyped placeholder {untyped.group(0)} (write {{kind:name}})")
        dollar = _DOLLAR.search(code)
        if dollar:
            raise QueryError(f"{where}: parameter {dollar.group(0)} (write :{dollar.group(1)})")
    for name, kind in query.placeholders.items():
        if kind not in KINDS:
            raise QueryError(f"{where}: unknown placeholder kind {kind!r} in {{{kind}:{name}}}")
        if kind in ("frag", "list", "union") and name not in query.fragments:
            raise QueryError(f"{where}: {{{kind}:{name}}} has no `-- fragments: {name}=...` line")
        if kind == "twin" and name not in TWINS:
            raise QueryError(f"{where}: {{twin:{name}}} is not one of {', '.join(TWINS)}")
    return query


def parse(text: str, source: str) -> dict[str, Query]:
    """The blocks of one .sql file; a name defined twice is refused."""
    blocks: dict[str, Query] = {}
    name, head, body = None, [], []

    def flush():
        if name:
            if name in blocks:
                raise QueryError(f"query {name} defined twice in {source}")
            dialects, fragments, description = _headers(head, f"{source}:{name}")
            sql = "\n".join(body).strip().rstrip(";").strip()
            blocks[name] = _checked(Query(name, " ".join(description).strip(), sql, source, dialects, fragments))

    for line in text.splitlines():
        match = _NAME.match(line)
        if match:
            flush()
            name, head, body = match.group(1), [], []
        elif name and not body and line.startswith("--"):
            head.append(line)
        elif name:
            body.append(line)
    flush()
    return blocks


def _inlined(query: Query, blocks: dict[str, Query], seen: tuple[str, ...] = ()) -> Query:
    """`{block:NAME}` replaced by that block's SQL (a fixed part shared by several blocks)."""
    def include(match):
        kind, name = match.groups()
        if kind != "block":
            return match.group(0)
        if name not in blocks or name in seen:
            raise QueryError(f"{query.source}:{query.name}: cannot include block {name!r}")
        part = _inlined(blocks[name], blocks, seen + (query.name,))
        if not set(query.dialects) <= set(part.dialects):
            raise QueryError(f"{query.source}:{query.name}: block {name} lacks one of its dialects")
        return part.sql

    pieces = [PLACEHOLDER.sub(include, piece) if is_code else piece for is_code, piece in split_literals(query.sql)]
    sql = "".join(pieces)
    return query if sql == query.sql else Query(query.name, query.description, sql, query.source,
                                                query.dialects, {**query.fragments})


def load(files: list[tuple[str, str]]) -> dict[str, Query]:
    """The blocks of (source, text) files by name; a name defined twice is refused."""
    found: dict[str, Query] = {}
    for source, text in files:
        for name, query in parse(text, source).items():
            if name in found:
                raise QueryError(f"query {name} defined in {found[name].source} and {source}")
            found[name] = query
    return {name: _inlined(query, found) for name, query in found.items()}


@lru_cache(maxsize=None)
def all_queries() -> dict[str, Query]:
    """Every block of every queries/*.sql file (shipped inside the package), by name."""
    entries = sorted(resources.files(__package__).iterdir(), key=lambda e: e.name)
    return load([(e.name, e.read_text(encoding="utf-8")) for e in entries if e.name.endswith(".sql")])


def get(name: str) -> Query:
    try:
        return all_queries()[name]
    except KeyError:
        raise QueryError(f"no query named {name!r} in queries/*.sql") from None


# ---- a block's text for one dialect ----

@dataclass(frozen=True)
class Statement:
    """One statement of a block as it is sent, and the `:name` parameters it uses."""

    text: str
    params: tuple[str, ...]


@dataclass(frozen=True)
class Prepared:
    """A block made ready for one dialect: what the runner (queries/__init__.py) needs of it, as plain fields."""

    name: str
    params: tuple[str, ...]  # every `:name` parameter of the block, in order of first use
    statements: tuple[Statement, ...]


def prepared(name: str, dialect: str, values: dict) -> Prepared:
    """Block `name` for `dialect`, its placeholders filled from `values`."""
    query = get(name)
    texts = statements(query, dialect, values)
    return Prepared(name, _params_of(query.sql),
                    tuple(Statement(text, _params_of(template)) for template, text in zip(query.statements, texts)))


def _params_of(sql: str) -> tuple[str, ...]:
    """The `:name` parameters of a text, in order of first use."""
    return tuple(dict.fromkeys(name for code in code_parts(sql) for name in PARAM.findall(code)))


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
