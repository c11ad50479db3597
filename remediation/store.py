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

import queries
from forensics.errors import DatabaseError

DEFAULT_DUCKDB = "mailmortem.duckdb"
REDACTED = "<dsn redacted>"
# postgresql://, postgres://, any case, and SQLAlchemy's postgresql+driver:// (common in DATABASE_URL).
_URL_SCHEME = re.compile(r"^\s*postgres(?:ql)?(?:\+\w+)?://", re.IGNORECASE)
_KEYWORDS = re.compile(r"(?:^|\s)(?:host|hostaddr|dbname|user|password|port|service)\s*=", re.IGNORECASE)
# Free text (driver messages, anything echoed): a URL's userinfo password and any password=... value.
_TEXT_URL_PASSWORD = re.compile(r"(?P<head>\b[a-z][\w+.-]*://[^\s:/@]*:)(?P<pw>[^\s@]*)(?P<tail>@)", re.IGNORECASE)
_KW_PASSWORD = re.compile(r"(?P<head>\bpassword\s*=\s*)(?P<pw>'(?:[^'\\]|\\.)*'|[^\s&]+)", re.IGNORECASE)


def is_postgres(db: str) -> bool:
    return bool(_URL_SCHEME.match(db) or _KEYWORDS.search(db))


def libpq_dsn(db: str) -> str:
    """The DSN as libpq reads it: the URL scheme lower-cased and a SQLAlchemy driver suffix dropped."""
    match = _URL_SCHEME.match(db)
    return "postgresql://" + db[match.end():] if match else db


def _parsed(dsn: str) -> dict | None:
    from psycopg.conninfo import conninfo_to_dict

    try:
        parsed = conninfo_to_dict(libpq_dsn(dsn))
    except Exception:  # libpq's parse errors quote the DSN, password included: never surface them
        return None
    # A raw '@' in a URL password makes libpq read the rest of the password as part of the host name.
    return None if "@" in str(parsed.get("host", "")) else parsed


def _mask_url(dsn: str) -> str:
    scheme_end = _URL_SCHEME.match(dsn).end()
    rest = dsn[scheme_end:]
    at = rest.rfind("@")  # a raw '@' in a password: everything before the last one is userinfo
    if at >= 0 and ":" in rest[:at]:
        rest = rest[:rest.index(":")] + ":***" + rest[at:]
    return dsn[:scheme_end] + re.sub(r"(?i)([?&]password=)[^&]*", r"\1***", rest)


def safe_label(db: str) -> str:
    """What may be printed of a --db value: a DuckDB path as given, a DSN with its password as ***, and
    `<dsn redacted>` for a DSN that cannot be parsed or whose password the masking cannot prove gone."""
    if not is_postgres(db):
        # A mistyped URL (postgresql:/u:pw@h) is taken for a DuckDB path: never echo what may hold a password.
        return REDACTED if "@" in db or "password" in db.lower() else db
    parsed = _parsed(db)
    if parsed is None:
        return REDACTED
    label = _mask_url(db.strip()) if _URL_SCHEME.match(db) else _KW_PASSWORD.sub(lambda m: m["head"] + "***", db.strip())
    again = _parsed(label)
    if again is None or again.get("password", "***") != "***" or (parsed.get("password") and "password" not in again):
        return REDACTED
    return label


def redact(text: str) -> str:
    """Replace any password in DSNs inside free text (URL or keyword form) by ***."""
    text = _TEXT_URL_PASSWORD.sub(lambda m: m["head"] + "***" + m["tail"], text)
    return _KW_PASSWORD.sub(lambda m: m["head"] + "***", text)


def scrub(message: str, dsn: str) -> str:
    """Redact a driver's error message, including any password it echoed verbatim."""
    password = (_parsed(dsn) or {}).get("password") or ""
    if len(password) >= 4:
        message = message.replace(password, "***")
    elif password:
        message = re.sub(rf"(?<![\w]){re.escape(password)}(?![\w])", "***", message)
    return redact(message).strip().splitlines()[0] if message.strip() else "unknown error"


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


def open_store(db: str | None, read_only: bool = False, must_exist: bool = False) -> Store:
    """Open the store for writing (a DuckDB file is created if missing, unless `must_exist`), or
    `read_only` for a read: then a DuckDB file must already exist and is opened read-only, so a read
    never creates anything. `must_exist` is for writes that only change what is there (a release)."""
    if read_only:
        return open_existing(db)
    target = _existing_or_refuse(db) if must_exist else resolve_db(db)
    if is_postgres(target):
        return _open_postgres(target)
    return _open_duckdb(target, False)


WHICH_STORE = "pass --db postgresql://… (or set DATABASE_URL) or --db PATH of an existing DuckDB file"


def existing_target(db: str | None) -> str | None:
    """The store a read would use, or None when there is none: a read never guesses an empty one."""
    target = resolve_db(db)
    if is_postgres(target) or os.path.isfile(target):
        return target
    return None


def open_existing(db: str | None) -> Store:
    """Open the store for a read: PostgreSQL, or a DuckDB file that exists (opened read-only)."""
    target = _existing_or_refuse(db)
    if is_postgres(target):
        return _open_postgres(target)
    return _open_duckdb(target, True)


def _existing_or_refuse(db: str | None) -> str:
    target = existing_target(db)
    if target is None:
        given = db or os.environ.get("DATABASE_URL")
        where = f"no DuckDB file at {safe_label(given)}" if given else \
            f"no --db or DATABASE_URL given and no ./{DEFAULT_DUCKDB} here"
        raise DatabaseError(f"{where}: {WHICH_STORE}")
    return target


def connection_kind(conn_or_store: Any) -> tuple[Any, str]:
    """(connection, "postgres" | "duckdb") for a Store or a raw psycopg / DuckDB connection."""
    kind = getattr(conn_or_store, "kind", None)
    if kind in ("postgres", "duckdb") and hasattr(conn_or_store, "conn"):
        return conn_or_store.conn, kind
    try:
        return conn_or_store, queries.dialect_of(conn_or_store)
    except queries.QueryError:
        raise TypeError(f"not a Store, psycopg or DuckDB connection: {type(conn_or_store).__name__}") from None


def _open_postgres(dsn: str) -> Store:
    import psycopg

    label = safe_label(dsn)
    if _parsed(dsn) is None:
        raise DatabaseError(f"cannot read the database address {label}: pass --db postgresql://user:password@host/db "
                            "(percent-encode @, / and spaces in the password) or "
                            "\"host=… user=… password='…' dbname=…\"")
    try:
        conn = psycopg.connect(libpq_dsn(dsn), connect_timeout=10, application_name="mailmortem")
    except (psycopg.Error, ValueError) as exc:
        raise DatabaseError(f"cannot connect to {label}: {scrub(str(exc), dsn)}") from None
    return Store("postgres", conn, label)


def _open_duckdb(path: str, read_only: bool) -> Store:
    import duckdb

    try:
        conn = duckdb.connect(path, read_only=read_only)
    except duckdb.Error as exc:
        raise DatabaseError(f"cannot open DuckDB file {safe_label(path)}: {redact(str(exc).splitlines()[0])}") from None
    return Store("duckdb", conn, safe_label(path))
