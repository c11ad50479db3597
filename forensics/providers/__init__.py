"""Provider send-history readers: SendGrid, Mailgun, SES, Postmark, Resend, Brevo, Postfix, CSV/JSONL.

`read_events(paths, ...)` gives one row per event and recipient with a verdict
('sent' | 'not_sent' | 'not_a_send_event'); `ProviderRead.sends()` collapses them
to one row per (message, recipient); `ExportSpec` carries the paths and reading options that every
command reading exports shares. A file's provider is chosen only on that provider's own marker fields
(forensics.providers.detect). The per-provider semantics live in
`queries/providers.sql`; the work happens in DuckDB over Arrow, not Python loops.
"""

from __future__ import annotations

from forensics.providers.reader import COLUMNS, Keys, ProviderRead, read_events  # noqa: F401
from forensics.providers.detect import PROVIDERS  # noqa: F401
from forensics.providers.spec import ExportSpec  # noqa: F401
