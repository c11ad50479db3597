"""The optional compiled readers: the logfmt tokenizer, the JSON Lines reader and the line envelopes'
unwrapper. Without a C compiler (or Python's headers) the build skips them and mailmortem reads those files through
the SQL path (forensics/ingest/tokenizer.py, jsontokenizer.py, unwrapper.py), as PyYAML and MarkupSafe do. All
three include forensics/_typing.h (the columns and the typing they share), forensics/_grammar.h (the lines, the
logfmt key and strict JSON, each written once) and forensics/_buffers.h (the buffers they hand to Python); the
two that fill the canonical fields, forensics/_fields.h (the field table they were built for, which their
configure() checks against Python's at import)."""

from setuptools import Extension, setup

_THREADED = {"optional": True, "extra_compile_args": ["-O2", "-pthread"], "extra_link_args": ["-pthread"],
             "depends": ["forensics/_typing.h", "forensics/_buffers.h", "forensics/_grammar.h", "forensics/_fields.h"]}

setup(ext_modules=[Extension("forensics._logfmt", ["forensics/_logfmt.c"], **_THREADED),
                   Extension("forensics._jsonl", ["forensics/_jsonl.c"], **_THREADED),
                   Extension("forensics._unwrap", ["forensics/_unwrap.c"], **_THREADED)])
