"""Progress on stderr, shown only for reads that take more than a second."""

from __future__ import annotations

import threading
from contextlib import contextmanager


@contextmanager
def delayed_status(message: str, delay_s: float = 1.0):
    """Yield a callback(index, total, label); a spinner appears on stderr after `delay_s`."""
    from mailmortem.console import make_console
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
