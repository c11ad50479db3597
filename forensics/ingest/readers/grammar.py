"""The logfmt grammar, once for the Python side: a key, a value, and the patterns built of them (the SQL of
queries/ingest_logfmt.sql and the C of _logfmt.c read the same grammar)."""

from __future__ import annotations

import re

KEY = r'[^\s="]+'  # a key: no blank, no '=', no '"'
VALUE = r'"(?:[^"\\]|\\.)*"|[^\s"]*'  # a quoted value (escapes kept) or a bare one

KEY_RE = re.compile(KEY)  # fullmatch: a key a logfmt line can hold
PAIR_RE = re.compile(rf'(?:^|\s){KEY}=({VALUE})')  # a whole pair (its value captured)
KEY_OF_PAIR_RE = re.compile(rf'(?:^|\s)({KEY})=')  # a pair's key (captured)
PAIR_START_RE = re.compile(rf'(?:^|\s){KEY}=\S')  # a pair with a value begun
