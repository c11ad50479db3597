"""Open the durable store: PostgreSQL (production) or a DuckDB file (local default).

`--db` takes a postgresql:// URL, a libpq keyword string or a DuckDB path;
without it `DATABASE_URL`, then `./mailmortem.duckdb`. Passwords never appear in
anything this module says.
"""

from __future__ import annotations

import os
import re
from dataclasses import dataclass, field
from typing import Any

from forensics.errors import DatabaseError

DEFAULT_DUCKDB = "mailmortem.duckdb"
_URL_PASSWORD = re.compile(r"(?P<head>postgres(?:ql)?://[^:/@\s]*:)(?P<pw>[^@\s]*)(?P<tail>@)")
_KW_PASSWORD = re.compile(r"(?P<head>\bpassword\s*=\s*)(?P<pw>'(?:[^'\\]|\\.)*'|\S+)", re.IGNORECASE)


def redact(text: str) -> str:
    """Replace any password in a DSN (URL or keyword form) by ***."""
    text = _URL_PASSWORD.sub(lambda m: m["head"] + "***" + m["tail"], text)
    return _KW_PASSWORD.sub(lambda m: m["head"] + "***", text)


def _passwords(dsn: str) -> list[str]:
    found = [m["pw"] for m in _URL_PASSWORD.finditer(dsn)] + [m["pw"].strip("'") for m in _KW_PASSWORD.finditer(dsn)]
    return [p for p in found if p]


def scrub(message: str, dsn: str) -> str:
    """Redact a driver's error message, including any password it echoed verbatim."""
    for password in _passwords(dsn):
        message = message.replace(password, "***")
    return redact(message).strip().splitlines()[0] if message.strip() else "unknown error"


def is_postgres(db: str) -> bool:
    return db.startswith(("postgres://", "postgresql://")) or bool(re.search(r"\b(host|dbname|user)=", db))


def resolve_db(db: str | None) -> str:
    return db or os.environ.get("DATABASE_URL") or DEFAULT_DUCKDB


@dataclass
class Store:
    kind: str  # "postgres" | "duckdb"
    conn: Any
    label: str  # safe to print
    extra: dict = field(default_factory=dict)

    def close(self) -> None:
        self.conn.close()


def open_store(db: str | None, read_only: bool = False) -> Store:
    target = resolve_db(db)
    if is_postgres(target):
        return _open_postgres(target)
    return _open_duckdb(target, read_only)


def _open_postgres(dsn: str) -> Store:
    import psycopg

    try:
        conn = psycopg.connect(dsn, connect_timeout=10, application_name="mailmortem")
    except (psycopg.Error, ValueError) as exc:
        raise DatabaseError(f"cannot connect to {redact(dsn)}: {scrub(str(exc), dsn)}") from None
    return Store("postgres", conn, redact(dsn))


def _open_duckdb(path: str, read_only: bool) -> Store:
    import duckdb

    try:
        conn = duckdb.connect(path, read_only=read_only)
    except duckdb.Error as exc:
        raise DatabaseError(f"cannot open DuckDB file {path}: {str(exc).splitlines()[0]}") from None
    return Store("duckdb", conn, path)
