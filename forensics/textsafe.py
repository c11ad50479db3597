"""Make hostile log text harmless for terminals and spreadsheets.

Log fields are attacker-controlled (recipients, error strings). On a terminal they
must not move the cursor, change colours or reorder text; in a CSV they must not
become formulas.
"""

from __future__ import annotations

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


_FORMULA_LEAD = ("=", "+", "-", "@", "\t", "\r")


def spreadsheet_safe(value: object) -> object:
    """Neutralise a CSV cell a spreadsheet would run as a formula (OWASP advice)."""
    if isinstance(value, str) and value.startswith(_FORMULA_LEAD):
        return "'" + value
    return value
