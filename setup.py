"""The optional compiled logfmt tokenizer: without a C compiler (or Python's headers) the build skips it and
mailmortem reads logfmt through the SQL path (forensics/ingest/tokenizer.py), as PyYAML and MarkupSafe do."""

from setuptools import Extension, setup

setup(ext_modules=[Extension("forensics._logfmt", ["forensics/_logfmt.c"], optional=True,
                             extra_compile_args=["-O2", "-pthread"], extra_link_args=["-pthread"])])
