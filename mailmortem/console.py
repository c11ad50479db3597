"""The one terminal wrapper: every rich Console is built here (no markup, no emoji, no highlighting). Also here:
a view's page said at once (`show`), progress on stderr for reads over a second, and exit codes kept through
closed pipes."""

from __future__ import annotations

import os
import sys
import threading
from contextlib import contextmanager


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
            reader_gone(self.file)

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


def show(page, stderr: bool = False) -> None:
    """Say a view's page: `page` holds, in order, the objects and options of each Console.print (a line of text,
    a rich Table or Text), all printed by one Console."""
    console = make_console(stderr)
    for objects, options in page:
        console.print(*objects, **options)


@contextmanager
def delayed_status(message: str, delay_s: float = 1.0):
    """Yield a callback(index, total, label); a spinner appears on stderr after `delay_s`, so a read that takes
    less shows nothing."""
    from forensics.textsafe import terminal_safe

    console = make_console(stderr=True)
    state = {"status": None, "text": message}
    lock = threading.Lock()

    def start():
        with lock:
            state["status"] = console.status(state["text"])
            state["status"].start()

    timer = threading.Timer(delay_s, start)
    timer.daemon = True
    timer.start()

    def update(index: int, total: int, label: str) -> None:
        with lock:
            state["text"] = f"{message} {index + 1}/{total}: {terminal_safe(label)}"
            if state["status"] is not None:
                state["status"].update(state["text"])

    try:
        yield update
    finally:
        timer.cancel()
        with lock:
            if state["status"] is not None:
                state["status"].stop()


def reader_gone(stream) -> None:
    """The reader of `stream` went away (`| head`, `| true`): what is still written goes to /dev/null, so the
    command finishes and exits with the code its answer deserves (a closed pipe must not turn "already sent",
    exit 3, into 0). The first broken write is the only sign; nothing is said."""
    try:
        fd = stream.fileno()
    except (AttributeError, OSError, ValueError):  # not a real file: nothing to redirect
        return
    devnull = os.open(os.devnull, os.O_WRONLY)
    os.dup2(devnull, fd)
    os.close(devnull)


class PipeSafe:
    """A standard stream whose writes survive the reader closing the pipe (see reader_gone); every other
    attribute is the stream's own. `.buffer` is wrapped alike, for the writers that write bytes."""

    def __init__(self, stream):
        self._stream = stream

    def write(self, data):
        try:
            return self._stream.write(data)
        except BrokenPipeError:
            reader_gone(self._stream)
            return len(data)

    def writelines(self, lines) -> None:
        for line in lines:
            self.write(line)

    def flush(self) -> None:
        try:
            self._stream.flush()
        except BrokenPipeError:
            reader_gone(self._stream)
            self._stream.flush()  # the buffered rest now goes to /dev/null

    @property
    def buffer(self):
        return PipeSafe(self._stream.buffer)

    def __getattr__(self, name):
        return getattr(self._stream, name)


def keep_exit_codes_through_closed_pipes() -> None:
    """Wrap stdout and stderr (once) so that a closed pipe silences them instead of ending the command."""
    if not isinstance(sys.stdout, PipeSafe):
        sys.stdout = PipeSafe(sys.stdout)
    if not isinstance(sys.stderr, PipeSafe):
        sys.stderr = PipeSafe(sys.stderr)


def warn(message: str) -> None:
    """A warning for people, on stderr, so stdout stays machine-readable."""
    from forensics.textsafe import terminal_safe

    print(f"Warning: {terminal_safe(message)}", file=sys.stderr)
