"""The `mailmortem` command: a lazy click group, one module per command.

Command modules import duckdb/polars/psycopg inside their functions, so
`mailmortem --help` stays instant.
"""

from __future__ import annotations

import importlib
import importlib.util
import os
import sys

import click

from forensics import __version__
from forensics.errors import MailmortemError
from queries import QueryError

# pyarrow imports numpy, whose OpenBLAS starts a thread per core that spins on its own for a while: 0.12 CPU s of
# every run, for linear algebra mailmortem never does
os.environ.setdefault("OPENBLAS_NUM_THREADS", "1")

# name -> "module:function"; each module lives in mailmortem/cli/.
COMMANDS = {
    "diagnose": "mailmortem.cli.diagnose:diagnose",
    "affected": "mailmortem.cli.affected:affected",
    "fields": "mailmortem.cli.fields:fields",
    "simulate": "mailmortem.cli.simulate:simulate",
    "sql": "mailmortem.cli.sql:sql",
    "report": "mailmortem.cli.report:report",
    "backfill-sentlog": "mailmortem.cli.sentlog:backfill_sentlog",
    "sentlog": "mailmortem.cli.sentlog:sentlog",
    "requeue-stale": "mailmortem.cli.claims:requeue_stale",
    "audit": "mailmortem.cli.claims:audit",
    "ab-contamination": "mailmortem.cli.ab:ab_contamination",
    "ab-assign": "mailmortem.cli.ab:ab_assign",
    "watch": "mailmortem.cli.watch:watch",
}


class LazyGroup(click.Group):
    def list_commands(self, ctx):
        return sorted(name for name in COMMANDS if self._available(name))

    @staticmethod
    def _available(name: str) -> bool:
        module = COMMANDS[name].split(":")[0]
        return importlib.util.find_spec(module) is not None

    def get_command(self, ctx, name):
        target = COMMANDS.get(name)
        if target is None or not self._available(name):
            return None
        module, attr = target.split(":")
        return getattr(importlib.import_module(module), attr)

    def invoke(self, ctx):
        try:
            return super().invoke(ctx)
        except MailmortemError as exc:
            _abort(str(exc), exc.exit_code)
        except QueryError as exc:  # a named query missing, malformed or given wrong values
            _abort(str(exc), 1)
        except KeyboardInterrupt:
            _abort("interrupted", 130)
        except (click.exceptions.Exit, click.ClickException, click.exceptions.Abort):
            raise
        except BrokenPipeError:  # a write that bypassed the guarded streams: the answer was not finished
            from mailmortem.console import reader_gone

            reader_gone(sys.stdout)
            _abort("the output pipe closed before the command finished; its answer is unknown", 1)
        except Exception as exc:  # last resort: one line, no traceback, unless asked for
            if os.environ.get("MAILMORTEM_DEBUG"):
                raise
            if type(exc).__name__ == "OutOfMemoryException":
                _abort("the case did not fit in DuckDB's memory limit even with spilling to disk; "
                       "run again with a larger --memory-limit (e.g. 4GB)", 1)
            _abort(f"internal error: {type(exc).__name__}: {exc} (set MAILMORTEM_DEBUG=1 for a traceback)", 1)


def _abort(message: str, code: int) -> None:
    from forensics.textsafe import terminal_safe
    from remediation.store import redact

    # Last line of defence: whatever raised, a DSN password in the message is masked.
    click.echo(f"Error: {terminal_safe(redact(message))}", err=True)
    sys.exit(code)


def _show_version(ctx, _param, value):
    """The version, and which logfmt and JSON Lines parsers this install reads with (the compiled ones or the SQL
    fallback), and what takes the common line envelopes off (the compiled unwrapper, or DuckDB)."""
    if not value or ctx.resilient_parsing:
        return
    from forensics.ingest.readers import runtime

    try:
        parser, json_parser, unwrapping = (runtime.describe(reader) for reader in ("logfmt", "jsonl", "unwrap"))
    except MailmortemError as exc:
        _abort(str(exc), exc.exit_code)
    click.echo(f"mailmortem, version {__version__}\nline envelopes taken off by: {unwrapping}\n"
               f"parser: {parser}\nJSON Lines parser: {json_parser}")
    ctx.exit()


@click.group(cls=LazyGroup, context_settings={"help_option_names": ["-h", "--help"], "max_content_width": 100})
@click.option("--version", is_flag=True, expose_value=False, is_eager=True, callback=_show_version,
              help="Show the version and the active logfmt and JSON Lines parsers, and exit.")
def main():
    """Find out why your outreach agents emailed people twice, who was hit, and repair the state.

    \b
    Examples:
      mailmortem diagnose sample_logs/parallel-worker/
      mailmortem diagnose mail-send.log --format json | jq '.incidents[]'
      mailmortem affected logs/*.log.gz --kind retry --format csv -o exclusions.csv
      mailmortem backfill-sentlog --provider-export export.json
      mailmortem ab-contamination --test-id subj-2026-11 logs/
    """
    from forensics.ingest.readers import runtime
    from mailmortem.console import keep_exit_codes_through_closed_pipes

    keep_exit_codes_through_closed_pipes()
    runtime.guard_shrinking_files()
