"""mailmortem: the command line and terminal output over forensics (reads) and remediation (repairs)."""

from forensics import __version__  # noqa: F401  (one version for the whole distribution)
