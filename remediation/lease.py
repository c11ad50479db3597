"""requeue-stale's lease check: the worst claim→release batch seen in the logs against `--older-than`."""

from __future__ import annotations

import queries
from forensics.errors import MailmortemError
from remediation.errors import RefusedError
from remediation.requeue_scope import db_error

LEASE_MARGIN = 1.5


def worst_batch(con) -> dict | None:
    """Longest claim→release span in a DuckDB connection holding an `events` table."""
    return queries.one(con, "requeue_worst_batch")


def worst_batch_from_logs(paths: list[str], options=None) -> dict | None:
    """Ingest the logs (forensics.ingest.case, read as `options`, a forensics.ingest.reading.ReadOptions, says) and
    find the worst batch; RefusedError if ingest is unavailable."""
    import importlib.util

    if importlib.util.find_spec("forensics.ingest.case") is None:
        raise RefusedError("log ingest (forensics.ingest.case) is not available in this build")
    from forensics.ingest.case import load_case

    case = load_case(list(paths), options=options)  # claims and releases are what it reads: no send required
    try:
        return worst_batch(case.con)
    except MailmortemError:
        raise
    except Exception as exc:  # an events table without claims/releases, or an older layout
        raise RefusedError(f"cannot measure batch durations from these logs: {db_error('query', exc)}") from None


def lease_warnings(older_than_s: float, worst: dict | None) -> list[str]:
    """Warn when --older-than, or the lease seen in the logs, is under 1.5× the worst batch."""
    if not worst or not worst.get("batch_s"):
        return []
    need = LEASE_MARGIN * float(worst["batch_s"])
    warnings = []
    if older_than_s < need:
        warnings.append(f"--older-than {older_than_s:g}s is under {LEASE_MARGIN}× the worst batch "
                        f"({float(worst['batch_s']):.0f}s): live batches may be re-queued; use at least {need:.0f}s")
    lease = worst.get("max_lease_s")
    if lease and float(lease) < need:
        warnings.append(f"the lease in the logs ({float(lease):g}s) is under {LEASE_MARGIN}× the worst batch: "
                        f"raise it to at least {need:.0f}s and renew it with a heartbeat")
    return warnings
