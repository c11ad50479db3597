"""One normalisation of addresses and message ids, used by every reader and query.

SQL twins (keep in step): recipient → lower(trim(x)); msg_id → trim, then one
pair of surrounding <> removed.
"""

from __future__ import annotations


def normalize_address(value: str | None) -> str | None:
    """Trim and lower-case; case variants of one address are one person."""
    if value is None:
        return None
    value = value.strip().lower()
    return value or None


def normalize_msg_id(value: str | None) -> str | None:
    """Trim whitespace and one pair of surrounding angle brackets."""
    if value is None:
        return None
    value = value.strip()
    if value.startswith("<") and value.endswith(">"):
        value = value[1:-1].strip()
    return value or None
