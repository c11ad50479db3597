"""Remediation's own error: a change refused because it cannot be proven right."""

from forensics.errors import MailmortemError


class RefusedError(MailmortemError):
    """A remediation that would touch rows it cannot prove it should."""
