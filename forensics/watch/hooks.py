"""--on-duplicate CMD: the user's command run once per new duplicated person (or per burst, with --batch), with
the event as JSON on stdin. CMD is split once (shlex) from the user's own option and run without a shell: text
from the logs only ever reaches it as JSON on stdin, never as part of a command line. A hook runs in a thread of
its own, so a slow one does not hold the watch; one that fails (exit code, timeout, not found) is reported and
the watch goes on."""

from __future__ import annotations

import json
import queue
import shlex
import subprocess
import threading
from collections.abc import Callable

from forensics.errors import ConfigError
from forensics.jsonfmt import to_json

HOOK_TIMEOUT_S = 60.0


def split_command(text: str) -> list[str]:
    try:
        argv = shlex.split(text)
    except ValueError as exc:
        raise ConfigError(f"--on-duplicate {text!r}: {exc}; quote it as you would in a shell") from None
    if not argv:
        raise ConfigError("--on-duplicate is empty: pass the command to run, e.g. --on-duplicate 'notify-oncall'")
    return argv


class Hooks:
    def __init__(self, argv: list[str] | None, batch: float | None, report: Callable[[dict], None]):
        self.argv, self.batch, self.report = argv, batch, report
        self.pending: list[dict] = []
        self.pending_since: float | None = None
        self.done: queue.Queue = queue.Queue()
        self.running: list[threading.Thread] = []

    def add(self, event: dict, now: float) -> None:
        if not self.argv:
            return
        if self.batch is None:
            self._start(event)
            return
        if not self.pending:
            self.pending_since = now
        self.pending.append(event)

    def tick(self, now: float) -> None:
        """Start a due batch; report the hooks that failed since the last tick."""
        if self.pending and self.batch is not None and now - self.pending_since >= self.batch:
            self.flush()
        while not self.done.empty():
            self.report(self.done.get())

    def flush(self) -> None:
        if self.pending:
            self._start({"event": "duplicates", "people": self.pending})
            self.pending = []

    def finish(self, timeout: float = HOOK_TIMEOUT_S) -> None:
        """Run what is pending and wait for every hook (the watch is ending)."""
        self.flush()
        for thread in self.running:
            thread.join(timeout)
        self.tick(0.0)

    def _start(self, payload: dict) -> None:
        thread = threading.Thread(target=self._run, args=(to_json(payload, indent=None) + "\n",), daemon=True)
        thread.start()
        self.running = [t for t in self.running if t.is_alive()] + [thread]

    def _run(self, text: str) -> None:
        command = shlex.join(self.argv)
        try:
            done = subprocess.run(self.argv, input=text.encode(), capture_output=True, timeout=HOOK_TIMEOUT_S,
                                  check=False)
        except (OSError, subprocess.TimeoutExpired) as exc:
            self.done.put({"event": "hook-failed", "command": command, "reason": _reason(exc)})
            return
        if done.returncode != 0:
            said = done.stderr.decode("utf-8", "replace").strip().splitlines()
            self.done.put({"event": "hook-failed", "command": command,
                           "reason": f"exit code {done.returncode}" + (f": {said[-1]}" if said else "")})


def _reason(exc: BaseException) -> str:
    if isinstance(exc, subprocess.TimeoutExpired):
        return f"still running after {HOOK_TIMEOUT_S:g} s (stopped)"
    return (getattr(exc, "strerror", None) or str(exc)).lower()


def payload_people(payload: str) -> list[dict]:
    """The people a hook's stdin names (one event, or a burst of them): for a hook written in Python, and tests."""
    data = json.loads(payload)
    return data["people"] if data.get("event") == "duplicates" else [data]
