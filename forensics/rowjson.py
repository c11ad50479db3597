"""JSON text of rows made by polars expressions, one text per row, spelled exactly as Python's json.dumps
(ensure_ascii=False) spells the same row in each layout the writers print; escaped with json_safe afterwards.

A row is a list of (key, value) pairs; a value is a scalar column or, for a list of structs, a `Items` entry."""

from __future__ import annotations

import json
from dataclasses import dataclass

COMPACT, ONE_LINE, INDENTED = "compact", "one-line", "indented"  # DuckDB to_json, json.dumps(), indent=2


@dataclass(frozen=True)
class Items:
    """A list-of-structs column written as an array of objects with these keys."""
    column: str
    keys: tuple[str, ...]


def _marks(layout: str, depth: int) -> tuple[str, str, str, str]:
    """(after the opening bracket, between items, before the closing bracket, between key and value)."""
    if layout == INDENTED:
        inner, outer = "\n" + "  " * (depth + 1), "\n" + "  " * depth
        return inner, "," + inner, outer, ": "
    return ("", ",", "", ":") if layout == COMPACT else ("", ", ", "", ": ")


def literal(expr):
    """The JSON literal of a scalar (a string, a number or null), as json.dumps spells it."""
    import polars as pl

    return pl.struct(expr.alias("v")).struct.json_encode().str.strip_prefix('{"v":').str.strip_suffix("}")


def _object(pairs, layout: str, depth: int):
    import polars as pl

    first, between, last, colon = _marks(layout, depth)
    parts = []
    for n, (key, value) in enumerate(pairs):
        parts += [pl.lit(("{" + first if n == 0 else between) + json.dumps(key) + colon), value]
    return pl.concat_str(parts + [pl.lit(last + "}")]) if parts else pl.lit("{}")


def _array(items: Items, layout: str, depth: int):
    import polars as pl

    first, between, last, _ = _marks(layout, depth)
    element = pl.element().struct.field
    texts = pl.col(items.column).list.eval(
        _object([(k, literal(element(k))) for k in items.keys], layout, depth + 1))
    joined = pl.concat_str([pl.lit("[" + first), texts.list.join(between), pl.lit(last + "]")])
    return pl.when(pl.col(items.column).list.len() == 0).then(pl.lit("[]")).otherwise(joined)


def row_text(row: list[tuple[str, object]], layout: str, depth: int = 0):
    """One expression giving each row's JSON object text; `row` pairs keys with column names or Items."""
    import polars as pl

    pairs = [(key, _array(value, layout, depth + 1) if isinstance(value, Items) else literal(pl.col(value)))
             for key, value in row]
    return _object(pairs, layout, depth)
