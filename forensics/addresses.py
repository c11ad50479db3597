"""One normalisation of addresses and message ids, used by every reader and query.

An address's normal form, the same in Python, DuckDB and PostgreSQL and on every
server locale:

1. the code points in WHITESPACE are trimmed from both ends;
2. a value ending in `>` keeps only what lies between the last `<` and that `>`
   (a display name and one pair of angle brackets go), trimmed again;
3. ASCII A–Z are lower-cased, nothing else (`str.lower()`, DuckDB's and
   PostgreSQL's `lower()` disagree on other letters, PostgreSQL's by collation);
4. an empty result is None (NULL).

The SQL twins: `address_duckdb_macro` (queries/macros.sql) and `address_pg_function` (queries/addresses.sql);
tests/test_addresses.py keeps all three equal.

msg_id → trim, then one pair of surrounding <> removed (SQL twin: mm_msg_id in queries/macros.sql).

A label — a campaign, a step, an A/B test id — has a normal form too (`normalize_label`), the
same in Python, DuckDB and PostgreSQL: every decision that reads a label compares it so
(`C1`, ` c1` are one campaign; `01`, `1` one step). Its SQL twin is `mm_label` in
queries/labels.sql; tests/test_labels.py keeps the three equal. Stored values are never rewritten.
"""

from __future__ import annotations

# Unicode White_Space (U+0009–U+000D, U+0020, U+0085, U+00A0, U+1680, U+2000–U+200A,
# U+2028, U+2029, U+202F, U+205F, U+3000) plus the zero-width space and the byte-order
# mark, which copy-paste and spreadsheets leave around addresses.
WHITESPACE_CODE_POINTS = (
    *range(0x09, 0x0E), 0x20, 0x85, 0xA0, 0x1680, *range(0x2000, 0x200C), 0x2028, 0x2029, 0x202F, 0x205F,
    0x3000, 0xFEFF,
)
WHITESPACE = "".join(map(chr, WHITESPACE_CODE_POINTS))
_ASCII_LOWER = str.maketrans("ABCDEFGHIJKLMNOPQRSTUVWXYZ", "abcdefghijklmnopqrstuvwxyz")
_ASCII_DIGITS = "0123456789"


def normalize_address(value: str | None) -> str | None:
    """The normal form of an address (see the module docstring); None when nothing is left."""
    if value is None:
        return None
    text = value.strip(WHITESPACE)
    if text.endswith(">"):
        start = text.rfind("<", 0, len(text) - 1)
        if start >= 0:
            text = text[start + 1:-1].strip(WHITESPACE)
    return text.translate(_ASCII_LOWER) or None


def normalize_label(value: str | None) -> str:
    """A campaign, step or test id as compared everywhere: WHITESPACE trimmed, ASCII A-Z lower-cased, and a
    label of ASCII digits only without its leading zeros (`007` is `7`, `000` is `0`). None is ''.

    SQL twin: mm_label (queries/labels.sql), installed by install_sql.
    """
    text = (value or "").strip(WHITESPACE).translate(_ASCII_LOWER)
    if text and text.strip(_ASCII_DIGITS) == "":
        return text.lstrip("0") or "0"
    return text


def normalize_msg_id(value: str | None) -> str | None:
    """Trim whitespace and one pair of surrounding angle brackets."""
    if value is None:
        return None
    value = value.strip()
    if value.startswith("<") and value.endswith(">"):
        value = value[1:-1].strip()
    return value or None


def install_pg(conn) -> None:
    """Create pg_temp.mm_address and pg_temp.mm_label (the SQL twins) for this PostgreSQL session if missing.

    Runs in the caller's transaction: they last for the session once that commits,
    and are created again by the next caller after a rollback.
    """
    import queries

    present = queries.one(conn, "sql_twins_pg_present")
    if not present["address"]:
        queries.run(conn, "address_pg_function")
    if not present["label"]:
        queries.run(conn, "label_pg_function")


def install_sql(conn) -> None:
    """The SQL twins for a PostgreSQL or DuckDB connection: PostgreSQL's session functions (install_pg), DuckDB's
    temporary macros mm_address and mm_label (a DuckDB file opened read-only takes them too)."""
    import queries

    if queries.dialect_of(conn) == "postgres":
        install_pg(conn)
        return
    queries.script(conn, "address_duckdb_macro")
    queries.script(conn, "label_duckdb_macro")
