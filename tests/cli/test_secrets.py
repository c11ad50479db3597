"""A DSN's password never reaches the terminal: not in errors, plans, --show-sql or audit output, whatever
form the DSN takes and whether it comes from --db or DATABASE_URL."""

from __future__ import annotations

from urllib.parse import urlsplit

import pytest

from remediation.store import REDACTED, safe_label

SECRET_PARTS = ("Sup3r", "S3cret")

# Each form of DSN people paste, with {host}, {port} and {db} filled from the test server (trust auth:
# the password is accepted and never checked, so the commands get as far as they can).
FORMS = {
    "url": "postgresql://postgres:Sup3rS3cret@{host}:{port}/{db}",
    "upper-scheme": "POSTGRESQL://postgres:Sup3rS3cret@{host}:{port}/{db}",
    "postgres-scheme": "postgres://postgres:Sup3rS3cret@{host}:{port}/{db}",
    "sqlalchemy": "postgresql+psycopg://postgres:Sup3rS3cret@{host}:{port}/{db}",
    "percent-encoded": "postgresql://postgres:Sup3r%40S3cret@{host}:{port}/{db}",
    "raw-at": "postgresql://postgres:Sup3r@S3cret@{host}:{port}/{db}",
    "raw-space": "postgresql://postgres:Sup3r S3cret@{host}:{port}/{db}",
    "query": "postgresql://postgres@{host}:{port}/{db}?password=Sup3rS3cret",
    "keywords": "host={host} port={port} user=postgres password=Sup3rS3cret dbname={db}",
    "quoted-keyword": "host={host} port={port} user=postgres password='Sup3r S3cret' dbname={db}",
}

COMMANDS = (
    ("sentlog", "check", "--campaign", "c-1", "--recipient", "a@b.co"),
    ("requeue-stale", "--older-than", "45m", "--show-sql"),
    ("audit",),
    ("audit", "--run", "2026-11-30T10:12:03Z-7f3a", "--undo"),
)


def _dsn(form: str, server: str) -> str:
    url = urlsplit(server)
    return FORMS[form].format(host=url.hostname, port=url.port, db=url.path.lstrip("/"))


def _leaks(result) -> list[str]:
    text = result.stdout + result.stderr
    return [part for part in SECRET_PARTS if part in text]


@pytest.mark.slow
@pytest.mark.parametrize("form", sorted(FORMS))
@pytest.mark.parametrize("via", ("--db", "DATABASE_URL"))
def test_no_command_prints_the_password(cli, pg_dsn, form, via):
    dsn = _dsn(form, pg_dsn)
    for args in COMMANDS:
        if via == "--db":
            result = cli(*args, "--db", dsn)
        else:
            result = cli(*args, env={"DATABASE_URL": dsn})
        assert not _leaks(result), (args, result.stdout + result.stderr)


@pytest.mark.parametrize("form", sorted(FORMS))
def test_unreachable_server_errors_hide_the_password(cli, form):
    dsn = FORMS[form].format(host="127.0.0.1", port=1, db="nowhere")
    result = cli("sentlog", "check", "--campaign", "c", "--recipient", "a@b.co", "--db", dsn)
    assert result.exit_code == 1 and result.stderr.startswith("Error: ")
    assert not _leaks(result), result.stderr


@pytest.mark.parametrize("form", ["raw-space"])
def test_a_dsn_libpq_cannot_parse_is_printed_as_redacted(cli, form):
    dsn = FORMS[form].format(host="127.0.0.1", port=1, db="nowhere")
    assert safe_label(dsn) == REDACTED
    result = cli("sentlog", "check", "--campaign", "c", "--recipient", "a@b.co", "--db", dsn)
    assert result.exit_code == 1 and REDACTED in result.stderr and "percent-encode" in result.stderr


@pytest.mark.parametrize("dsn,label", [
    ("postgresql://u:pw@h/db", "postgresql://u:***@h/db"),
    ("postgresql+psycopg://u:pw@h/db", "postgresql+psycopg://u:***@h/db"),
    ("postgresql://u@h/db?sslmode=require&password=pw", "postgresql://u@h/db?sslmode=require&password=***"),
    ("host=h user=u password='p w' dbname=db", "host=h user=u password=*** dbname=db"),
    ("postgresql:/u:pw@h/db", REDACTED),  # a mistyped URL is taken for a path: still not echoed
    ("./state.duckdb", "./state.duckdb"),
])
def test_labels_keep_what_helps_and_mask_the_password(dsn, label):
    assert safe_label(dsn) == label
