"""Every SQL statement of mailmortem, as named blocks in `queries/*.sql`.

A block looks like::

    -- name: duplicate_people
    -- Recipients with two or more distinct real sends per (campaign, step).
    SELECT ... WHERE campaign = :campaign

Parameters are written `:name`; `for_duckdb()` and `for_psycopg()` translate them
in one place. `{ident}` placeholders are for identifiers only and are filled by
the caller with properly quoted identifiers (see `remediation.identifiers`).
"""

from __future__ import annotations

import re
from dataclasses import dataclass
from functools import lru_cache
from importlib import resources

_NAME = re.compile(r"^--\s*name:\s*([A-Za-z_][\w]*)\s*$")
# `:name` but not `::type` casts and not inside a word (e.g. a time like 10:30 in a literal).
_PARAM = re.compile(r"(?<![:\w]):([A-Za-z_]\w*)")


@dataclass(frozen=True)
class Query:
    name: str
    description: str
    sql: str
    source: str

    @property
    def params(self) -> list[str]:
        found: list[str] = []
        _outside_literals(self.sql, lambda code: found.extend(_PARAM.findall(code)) or code)
        return list(dict.fromkeys(found))

    def for_duckdb(self) -> str:
        return _outside_literals(self.sql, lambda code: _PARAM.sub(r"$\1", code))

    def for_psycopg(self) -> str:
        return _outside_literals(self.sql, lambda code: _PARAM.sub(r"%(\1)s", code.replace("%", "%%")),
                                 literal=lambda text: text.replace("%", "%%"))


# Quoted strings, quoted identifiers and comments are never parameters.
_LITERAL = re.compile(r"'(?:[^']|'')*'|\"(?:[^\"]|\"\")*\"|--[^\n]*")


def _outside_literals(sql: str, code, literal=lambda text: text) -> str:
    out, pos = [], 0
    for match in _LITERAL.finditer(sql):
        out.append(code(sql[pos:match.start()]))
        out.append(literal(match.group(0)))
        pos = match.end()
    out.append(code(sql[pos:]))
    return "".join(out)


def _parse(text: str, source: str) -> dict[str, Query]:
    blocks: dict[str, Query] = {}
    name, description, body = None, [], []

    def flush():
        if name:
            sql = "\n".join(body).strip().rstrip(";").strip()
            blocks[name] = Query(name, " ".join(description).strip(), sql, source)

    for line in text.splitlines():
        match = _NAME.match(line)
        if match:
            flush()
            name, description, body = match.group(1), [], []
        elif name and not body and line.startswith("--"):
            description.append(line[2:].strip())
        elif name:
            body.append(line)
    flush()
    return blocks


@lru_cache(maxsize=None)
def all_queries() -> dict[str, Query]:
    found: dict[str, Query] = {}
    for entry in sorted(resources.files(__name__).iterdir(), key=lambda e: e.name):
        if entry.name.endswith(".sql"):
            for name, query in _parse(entry.read_text(encoding="utf-8"), entry.name).items():
                if name in found:
                    raise RuntimeError(f"query {name} defined in {found[name].source} and {entry.name}")
                found[name] = query
    return found


def get(name: str) -> Query:
    try:
        return all_queries()[name]
    except KeyError:
        raise KeyError(f"no query named {name!r} in queries/*.sql") from None
