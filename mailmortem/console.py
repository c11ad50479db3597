"""The one place that builds rich Consoles: no markup, no emoji, no highlighting."""

from __future__ import annotations

import os
import sys


NO_TTY_WIDTH = 100_000


def _is_terminal(file) -> bool:
    try:
        return file.isatty()
    except (AttributeError, ValueError):
        return False


def make_console(stderr: bool = False):
    from rich.console import Console

    class QuietConsole(Console):
        def on_broken_pipe(self) -> None:
            # `mailmortem diagnose … | head` is normal use, not an error.
            devnull = os.open(os.devnull, os.O_WRONLY)
            os.dup2(devnull, self.file.fileno())
            raise SystemExit(0)

    file = sys.stderr if stderr else sys.stdout
    return QuietConsole(
        file=file,
        # Not a terminal (a pipe, a file): no width to fit, so a table row stays one line however long.
        width=None if _is_terminal(file) else NO_TTY_WIDTH,
        markup=False,
        emoji=False,
        highlight=False,
        no_color=bool(os.environ.get("NO_COLOR")) or None,
        soft_wrap=False,
    )


def warn(message: str) -> None:
    """A warning for people, on stderr, so stdout stays machine-readable."""
    from forensics.textsafe import terminal_safe

    print(f"Warning: {terminal_safe(message)}", file=sys.stderr)
