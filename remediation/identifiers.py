"""Table and column names given on the command line, parsed and quoted safely.

Names reach SQL only through `{ident:...}` placeholders, which the query runner
always quotes, and only after they match a plain pattern (letters, digits, `_`, `$`;
at most 63 bytes, PostgreSQL's limit).
Anything else — quotes, semicolons, spaces, dots in a column — is refused with a
one-line ConfigError before any SQL is built, so a hostile name is never executed.
"""

from __future__ import annotations

import re
from dataclasses import dataclass

from forensics.errors import ConfigError
from forensics.textsafe import terminal_safe

_NAME = re.compile(r"[A-Za-z_][A-Za-z0-9_$]*")
MAX_NAME_BYTES = 63


def _shown(text: object) -> str:
    return terminal_safe(str(text)[:80])


def parse_name(text: object, what: str = "name") -> str:
    """One SQL identifier, unquoted; refuse anything that is not a plain name."""
    if not isinstance(text, str) or not _NAME.fullmatch(text) or len(text.encode()) > MAX_NAME_BYTES:
        raise ConfigError(f"refusing {what} {_shown(text)!r}: use letters, digits and _ only "
                          f"(start with a letter or _, at most {MAX_NAME_BYTES} bytes)")
    return text


@dataclass(frozen=True)
class TableName:
    schema: str | None
    name: str

    def __str__(self) -> str:
        return f"{self.schema}.{self.name}" if self.schema else self.name

    def ident(self) -> str | tuple[str, str]:
        """The value for an `{ident:...}` placeholder (quoted by the runner as `"schema"."table"`)."""
        return (self.schema, self.name) if self.schema else self.name


def parse_table(text: object) -> TableName:
    """`table` or `schema.table` → TableName; anything else is refused."""
    if not isinstance(text, str) or text.count(".") > 1:
        raise ConfigError(f"refusing table {_shown(text)!r}: expected table or schema.table")
    parts = text.split(".")
    if len(parts) == 2:
        return TableName(parse_name(parts[0], "schema name"), parse_name(parts[1], "table name"))
    return TableName(None, parse_name(parts[0], "table name"))


def parse_mapping(text: object, known: tuple[str, ...]) -> tuple[str, str]:
    """`logical=actual` (e.g. `claimed_at=locked_at`) → (logical, actual), both checked."""
    if not isinstance(text, str) or text.count("=") != 1:
        raise ConfigError(f"bad column mapping {_shown(text)!r}: expected NAME=COLUMN, e.g. claimed_at=locked_at")
    logical, actual = (part.strip() for part in text.split("="))
    if logical not in known:
        raise ConfigError(f"unknown column {_shown(logical)!r} in mapping: expected one of {', '.join(known)}")
    return logical, parse_name(actual, "column name")
