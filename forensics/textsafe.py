"""Make hostile log text harmless for terminals and spreadsheets.

Log fields are attacker-controlled (recipients, error strings). On a terminal they
must not move the cursor, change colours or reorder text; in a CSV they must not
become formulas.
"""

from __future__ import annotations

import functools
import re
import unicodedata

# Bidirectional overrides and isolates can visually reorder a line (Trojan Source).
_BIDI = {0x202A, 0x202B, 0x202C, 0x202D, 0x202E, 0x2066, 0x2067, 0x2068, 0x2069, 0x200E, 0x200F}


def _escape_char(ch: str) -> str:
    code = ord(ch)
    if ch == "\n":
        return "\\n"
    if ch == "\r":
        return "\\r"
    if ch == "\t":
        return "\\t"
    return f"\\x{code:02x}" if code < 0x100 else f"\\u{code:04x}"


def _needs_escape(ch: str) -> bool:
    return ord(ch) in _BIDI or unicodedata.category(ch) in ("Cc", "Cf", "Cs")


def terminal_safe(value: object) -> str:
    """Return `value` as text with control, format and bidi characters shown escaped."""
    text = "" if value is None else str(value)
    if all(ch.isprintable() for ch in text):
        return text
    return "".join(_escape_char(ch) if _needs_escape(ch) else ch for ch in text)


# Control, format (bidi included), surrogate and line/paragraph-separator code points (Unicode categories
# Cc, Cf, Cs, Zl, Zp), as ranges so no output pays for a scan of the Unicode table; a test keeps it complete.
UNSAFE_RANGES = (
    (0x0, 0x1F), (0x7F, 0x9F), (0xAD, 0xAD), (0x600, 0x605), (0x61C, 0x61C), (0x6DD, 0x6DD), (0x70F, 0x70F),
    (0x890, 0x891), (0x8E2, 0x8E2), (0x180E, 0x180E), (0x200B, 0x200F), (0x2028, 0x202E), (0x2060, 0x2064),
    (0x2066, 0x206F), (0xD800, 0xDFFF), (0xFEFF, 0xFEFF), (0xFFF9, 0xFFFB), (0x110BD, 0x110BD),
    (0x110CD, 0x110CD), (0x13430, 0x1343F), (0x1BCA0, 0x1BCA3), (0x1D173, 0x1D17A), (0xE0001, 0xE0001),
    (0xE0020, 0xE007F),
)
# JSON encoders already escape U+0000-U+001F inside strings, and a raw newline or tab outside them is layout.
_JSON_UNSAFE = re.compile("[" + "".join(f"\\U{max(a, 0x7F):08x}-\\U{b:08x}" for a, b in UNSAFE_RANGES[1:]) + "]")


def _json_escape(match: re.Match) -> str:
    return _json_escape_code(ord(match.group(0)))


def _json_escape_code(code: int) -> str:
    if code > 0xFFFF:  # JSON spells a code point beyond the BMP as a surrogate pair
        code -= 0x10000
        return f"\\u{0xD800 + (code >> 10):04x}\\u{0xDC00 + (code & 0x3FF):04x}"
    return f"\\u{code:04x}"


def json_safe(text: str) -> str:
    """Escape, in serialised JSON, every control/format/bidi character a JSON encoder leaves raw.

    The escapes are JSON's own (ESC is \\u001b), so a parser reads back the same string while a
    terminal, pager or editor showing the raw JSON sees no escape sequence and no reordering."""
    return _JSON_UNSAFE.sub(_json_escape, text)


# What a spreadsheet runs as a formula, in ASCII and in the fullwidth forms some spreadsheets fold to ASCII.
_FORMULA_LEAD = ("=", "+", "-", "@", "\uff1d", "\uff0b", "\uff0d", "\uff20")
_FORMULA_BLANKS = " \t\r\n\x0b\x0c\u00a0\u3000"  # what a spreadsheet skips before a formula's first sign


def spreadsheet_safe(value: object) -> object:
    """Neutralise a CSV cell a spreadsheet would run as a formula (OWASP advice), also when blanks or control
    characters come before the formula sign (a leading newline, tab or CR is skipped by spreadsheets)."""
    if isinstance(value, str) and value.lstrip(_FORMULA_BLANKS).startswith(_FORMULA_LEAD):
        return "'" + value
    if isinstance(value, str) and value[:1] in ("\t", "\r"):
        return "'" + value
    return value


# The same escapes as columnar expressions (polars), for output written by a columnar writer: a few hundred
# literal replacements found in one pass (Aho-Corasick), and only over a batch where a regex finds one at all.
# Surrogates are left out: Arrow and DuckDB text is valid UTF-8 and cannot hold them.


def _points(categories: tuple[str, ...] | None, start: int = 0) -> list[int]:
    return [c for a, b in UNSAFE_RANGES for c in range(max(a, start), b + 1) if not 0xD800 <= c <= 0xDFFF
            and (categories is None or unicodedata.category(chr(c)) in categories)]


def _class(points: list[int]) -> str:
    return "[" + "".join(f"\\x{{{c:x}}}" for c in points) + "]"


@functools.lru_cache(maxsize=None)
def _json_table() -> tuple[str, list[str], list[str]]:
    points = _points(None, start=0x7F)
    return _class(points), [chr(c) for c in points], [_json_escape_code(c) for c in points]


@functools.lru_cache(maxsize=None)
def _terminal_table() -> tuple[str, list[str], list[str]]:
    points = _points(("Cc", "Cf", "Cs"))  # what terminal_safe escapes (bidi marks are Cf)
    return _class(points), [chr(c) for c in points], [_escape_char(chr(c)) for c in points]


def _escaped_columns(frame, columns, table):
    import polars as pl

    pattern, found, escapes = table
    hit = [c for c in columns if frame.select(pl.col(c).str.contains(pattern).any()).item()]
    return frame.with_columns(pl.col(c).str.replace_many(found, escapes) for c in hit) if hit else frame


def json_safe_columns(frame, columns):
    """json_safe over serialised-JSON text columns of a polars frame."""
    return _escaped_columns(frame, columns, _json_table())


def terminal_safe_columns(frame, columns):
    """terminal_safe over text columns of a polars frame (nulls stay null)."""
    return _escaped_columns(frame, columns, _terminal_table())


def spreadsheet_safe_expr(expr):
    """spreadsheet_safe as a polars expression over a text column."""
    import polars as pl

    blanks = "".join(f"\\x{{{ord(c):x}}}" for c in _FORMULA_BLANKS)
    leads = "".join(f"\\x{{{ord(c):x}}}" for c in _FORMULA_LEAD)
    formula = expr.str.contains(f"^[{blanks}]*[{leads}]") | expr.str.contains("^[\\t\\r]")
    return pl.when(~formula).then(expr).otherwise(pl.lit("'") + expr)
