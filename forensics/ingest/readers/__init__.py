"""The readers' room: how a file's lines become typed `staged` rows, each reader a pair with one name.

- logfmt.py + _logfmt.c: logfmt lines, by the compiled tokenizer where it takes them (plain, gzipped as it is
  decompressed, or inside an envelope), else by the SQL path.
- jsonl.py + _jsonl.c: JSON Lines, by the compiled reader (the lines it is unsure of left to SQL), else by SQL.
- unwrap.py + _unwrap.c: the common line envelopes taken off in C, their records read by the two above.
- sql.py: the SQL path (queries/ingest.sql and ingest_logfmt.sql, ingest_jsonl.sql, ingest_csv.sql): key samples, field picks, and the CSV reader.
- runtime.py: what they share: the one C-or-SQL switch (runtime.compiled), ranges and halves cut at line ends,
  read-ahead through a memory map, Arrow batches, and handing them to DuckDB.
- grammar.py: the logfmt grammar (a key, a value, a pair) for the Python side.
- _typing.h, _buffers.h: what the C readers share.

forensics.ingest.load picks one reader per file (load.READERS) and tells it whether to read in C (`compiled=`,
from runtime.compiled).
"""
