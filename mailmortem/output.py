"""One output path: rows or documents to table | json | jsonl | csv on stdout.

Small results are Python rows; large ones (the affected list) arrive as polars frames of ready, escaped text
(forensics.affected) and are written by polars' CSV writer straight to the byte stream, a batch at a time."""

from __future__ import annotations

import contextlib
import csv
import datetime as dt
import errno
import os
import sys
import tempfile
from typing import Any, Iterable, Sequence

from forensics.jsonfmt import iso_utc, to_json
from forensics.textsafe import spreadsheet_safe, terminal_safe

FORMATS = ("table", "json", "jsonl", "csv")


def write_json(document: Any, out=None) -> None:
    out = out or sys.stdout
    out.write(to_json(document) + "\n")


def write_jsonl(rows: Iterable[dict], out=None) -> None:
    out = out or sys.stdout
    for row in rows:
        out.write(to_json(row, indent=None) + "\n")


def _csv_cell(value: Any) -> Any:
    if isinstance(value, (list, tuple)):
        value = ";".join(str(v) for v in value)
    elif isinstance(value, dict):
        value = to_json(value, indent=None)
    elif isinstance(value, dt.datetime):
        value = iso_utc(value)
    if isinstance(value, str):
        value = terminal_safe(value)  # `affected --format csv` shown on a terminal must not drive it
    return spreadsheet_safe(value)


def write_csv(rows: Sequence[dict], columns: Sequence[str], out=None) -> None:
    """CSV with formula-looking cells neutralised so it is safe to open in a spreadsheet."""
    out = out or sys.stdout
    writer = csv.writer(out, lineterminator="\n")
    writer.writerow(columns)
    for row in rows:
        writer.writerow([_csv_cell(row.get(c)) for c in columns])


def _table_cell(value: Any) -> str:
    if value is None:
        return ""
    if isinstance(value, dt.datetime):
        return iso_utc(value)
    if isinstance(value, (list, tuple)):
        return ", ".join(terminal_safe(v) for v in value)
    if isinstance(value, float):
        return f"{value:.3g}"
    return terminal_safe(value)


def write_table(rows: Sequence[dict], columns: Sequence[str], title: str | None = None, console=None) -> None:
    """A rich table whose cells never wrap: an address or a timestamp split over two lines is misread."""
    from rich.measure import Measurement
    from rich.table import Table

    from mailmortem.console import make_console

    console = console or make_console()
    table = Table(title=terminal_safe(title) if title else None, show_lines=False)
    for column in columns:
        table.add_column(column, no_wrap=True, overflow="ignore")
    for row in rows:
        table.add_row(*(_table_cell(row.get(c)) for c in columns))
    # Wider than the terminal: let the terminal fold the line rather than rich cutting cells.
    natural = Measurement.get(console, console.options, table).maximum
    console.print(table, width=max(console.width, natural))


def write_rows(rows: Sequence[dict], fmt: str, columns: Sequence[str] | None = None, title: str | None = None) -> None:
    """Render a list of flat rows in any of the four formats."""
    columns = list(columns or (rows[0].keys() if rows else []))
    if fmt == "json":
        write_json(list(rows))
    elif fmt == "jsonl":
        write_jsonl(rows)
    elif fmt == "csv":
        write_csv(rows, columns)
    else:
        write_table(rows, columns, title=title)


def _bytes_sink(out):
    """The byte stream under a text stream (text written so far flushed first, to keep the order)."""
    out.flush()
    return getattr(out, "buffer", None)


def _write_frame(frame, out, **options) -> None:
    sink = _bytes_sink(out)
    if sink is None:  # a text-only stream (e.g. io.StringIO): polars renders the batch to text
        out.write(frame.write_csv(**options))
        return
    try:
        frame.write_csv(sink, **options)
        sink.flush()
    except OSError as exc:  # polars reports a closed pipe (`| head`) as a plain OSError
        if isinstance(exc, BrokenPipeError) or f"os error {errno.EPIPE})" in str(exc):
            from mailmortem.console import reader_gone

            reader_gone(sink)
            return
        raise


def write_texts(texts, out, first: str, between: str) -> bool:
    """Write one-column frames of text: `first` before the first row, `between` before every other; raw (never
    quoted). Returns whether any row was written."""
    import polars as pl

    wrote = False
    for frame in texts:
        if frame.height:
            opening = pl.lit(between if wrote else first)
            lead = pl.when(pl.int_range(pl.len()) > 0).then(pl.lit(between)).otherwise(opening)
            _write_frame(frame.select(pl.concat_str(lead, pl.col("text"))), out, include_header=False,
                         quote_style="never", line_terminator="")
            wrote = True
    return wrote


def write_json_array(texts, out=None) -> None:
    """A JSON array of ready element texts (indented as json.dumps(indent=2) indents a list)."""
    out = out or sys.stdout
    out.write("[")
    out.write("\n]\n" if write_texts(texts, out, "\n  ", ",\n  ") else "]\n")


def write_json_lines(texts, out=None) -> None:
    """JSON Lines from ready one-line texts."""
    out = out or sys.stdout
    if write_texts(texts, out, "", "\n"):
        out.write("\n")


def write_csv_frames(frames, columns: Sequence[str], out=None) -> None:
    """CSV of frames already made safe (forensics.affected.csv_frames), quoted as csv.writer quotes."""
    import polars as pl

    out = out or sys.stdout
    _write_frame(pl.DataFrame(schema={c: pl.String for c in columns}), out, line_terminator="\n")
    for frame in frames:
        _write_frame(frame.select(columns), out, include_header=False, line_terminator="\n")


def write_document(document: dict, affected_texts, out=None) -> None:
    """The diagnose document as JSON with the affected entries (one-column frames of compact JSON text,
    forensics.affected.json_texts) spliced in, one per line."""
    out = out or sys.stdout
    head = to_json({k: v for k, v in document.items() if k != "affected"})
    out.write(head[:-2] + ',\n  "affected": [')
    out.write("\n  ]\n}\n" if write_texts(affected_texts, out, "\n    ", ",\n    ") else "]\n}\n")


@contextlib.contextmanager
def to_file(path: str | None):
    """Standard output goes to `path` while the block runs, and `path` is replaced only when the block completes:
    the output is written to a temporary file in the same folder, then renamed over it (os.replace, atomic). A
    command that fails leaves the old file as it was; a shell `>` would have emptied it before the command ran.
    Without `path` nothing changes."""
    if not path:
        yield
        return
    from forensics.errors import InputError

    folder = os.path.dirname(os.path.abspath(path))
    try:
        handle = tempfile.NamedTemporaryFile("w", encoding="utf-8", newline="", dir=folder, delete=False,
                                             prefix=f".{os.path.basename(path)}.", suffix=".tmp")
    except OSError as exc:
        raise InputError(f"cannot write {path}: {exc.strerror or exc}") from None
    try:
        with handle, contextlib.redirect_stdout(handle):
            yield
        os.chmod(handle.name, _new_file_mode())
        os.replace(handle.name, path)
    except OSError as exc:
        raise InputError(f"cannot write {path}: {exc.strerror or exc}") from None
    finally:
        with contextlib.suppress(FileNotFoundError):
            os.unlink(handle.name)  # still there only when the block failed


def _new_file_mode() -> int:
    """The mode `>` would give a new file (0666 less the umask); a temporary file is created 0600."""
    umask = os.umask(0)
    os.umask(umask)
    return 0o666 & ~umask
