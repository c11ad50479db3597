"""Repairs that cannot make things worse: each a plan builder plus an applier."""
