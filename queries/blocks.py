"""Named blocks of `queries/*.sql`: parsed once, checked as they are loaded.

A block is a `-- name:` line, its description (the comment lines after it), header lines
`-- dialect: duckdb postgres` (required) and `-- fragments: NAME=A|B|C` (the only things a
`{frag:NAME}`, `{list:NAME}` or `{union:NAME}` may hold), then its SQL.
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
        found: list[str] = []
        for code in code_parts(self.sql):
            found.extend(PARAM.findall(code))
        return list(dict.fromkeys(found))

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
