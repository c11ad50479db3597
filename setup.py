"""The optional compiled readers: the logfmt tokenizer, the JSON Lines reader and the line envelopes'
unwrapper. Without a C compiler (or Python's headers) the build skips them and mailmortem reads those files through
the SQL path (forensics/ingest/readers/: logfmt.py, jsonl.py, unwrap.py), as PyYAML and MarkupSafe do. All three
include _typing.h (the columns and the typing they share), _grammar.h (the lines, the logfmt key and strict JSON,
each written once) and _buffers.h (the buffers they hand to Python, and the module made); the two that fill the
canonical fields, _fields.h (the field table they were built for, which their configure() checks against Python's at
import, and the Batch both fill, read on up to two threads). All sit
beside them in forensics/ingest/readers/."""

from setuptools import Extension, setup

_ROOM = "forensics/ingest/readers"
_THREADED = {"optional": True, "extra_compile_args": ["-O2", "-pthread"], "extra_link_args": ["-pthread"],
             "depends": [f"{_ROOM}/{h}" for h in ("_typing.h", "_buffers.h", "_grammar.h", "_fields.h")]}

setup(ext_modules=[Extension("forensics.ingest.readers._logfmt", [f"{_ROOM}/_logfmt.c"], **_THREADED),
                   Extension("forensics.ingest.readers._jsonl", [f"{_ROOM}/_jsonl.c"], **_THREADED),
                   Extension("forensics.ingest.readers._unwrap", [f"{_ROOM}/_unwrap.c"], **_THREADED)])
