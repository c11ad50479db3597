"""What `mailmortem watch` shows: events on stdout (one line each, or JSON Lines), notes and the status line on
stderr, the diagnose summary at the end of --for. Every text from the logs is made terminal-safe."""

from __future__ import annotations

import sys

from forensics.textsafe import terminal_safe

ON_STDOUT = {"duplicate", "kind", "new-worker", "worker-restart", "stopped-growing", "send"}  # text format


class View:
    def __init__(self, fmt: str, terminal: bool = False):
        self.fmt, self.terminal = fmt, terminal
        self.status_shown = False

    def emit(self, event: dict) -> None:
        if self.fmt == "jsonl":
            from forensics.jsonfmt import to_json

            self._out(to_json(event, indent=None))
        if event["event"] in ON_STDOUT:
            if self.fmt != "jsonl":
                self._out(_line(event))
        elif self.fmt != "jsonl" or event["event"] in ("lost", "hook-failed", "start", "end"):
            self._err(_line(event))  # lost evidence is said on stderr at once in either format

    def status(self, status: dict) -> None:
        rates = ", ".join(f"{terminal_safe(w or '-')} {n}/min" for w, n in status["sends_per_minute"].items()) \
            or "no sends"
        idle = ", ".join(f"{terminal_safe(f)} {s:g}s" for f, s in status["idle_s"].items())
        text = (f"sends in the last minute: {rates} | duplicated people: {status['duplicated_people']} | "
                f"files followed: {status['files']} | since the last line: {idle}"
                + (f" | LOST: {status['lost']}" if status["lost"] else ""))
        if self.terminal:
            sys.stderr.write("\r\x1b[2K" + text[:200])
            self.status_shown = True
        else:
            sys.stderr.write(text + "\n")
        sys.stderr.flush()

    def summary(self, document: dict | None) -> None:
        if document is None:
            self._err("nothing was read while watching: no record was written to the followed files")
        elif self.fmt == "jsonl":
            from forensics.jsonfmt import to_json

            self._out(to_json({"event": "summary", "diagnosis": document}, indent=None))
        else:
            from mailmortem.cli.diagnose import show_diagnosis

            show_diagnosis(document)

    def _out(self, text: str) -> None:
        self._clear_status()
        sys.stdout.write(text + "\n")
        sys.stdout.flush()

    def _err(self, text: str) -> None:
        self._clear_status()
        sys.stderr.write(text + "\n")
        sys.stderr.flush()

    def _clear_status(self) -> None:
        if self.status_shown:
            sys.stderr.write("\r\x1b[2K")
            self.status_shown = False


def _line(event: dict) -> str:
    what = event["event"]
    shown = _SHOWN.get(what)
    return terminal_safe(shown(event) if shown else f"{what}: {event.get('source') or ''} {event.get('detail') or ''}")


def _person(e: dict) -> str:
    return f"{e['recipient']} (campaign {e['campaign'] or '-'}, step {e['step'] or '-'})"


def _send(s: dict) -> str:
    return f"{s['msg_id']} by {s['worker'] or '?'} at {s['ts']} ({s['source']}:{s['line']})"


_SHOWN = {
    "duplicate": lambda e: f"DUPLICATE {_person(e)}: {_send(e['first'])}, then {_send(e['second'])}",
    "kind": lambda e: f"KIND {_person(e)}: {e['kind']} (confidence {e['confidence']:.2f})",
    "new-worker": lambda e: f"NEW WORKER {e['worker']} (incarnation {e['incarnation'] or '-'}) in {e['source']}",
    "worker-restart": lambda e: (f"WORKER RESTART {e['worker']} (incarnation {e['incarnation'] or '-'}) "
                                 f"in {e['source']}"),
    "stopped-growing": lambda e: f"STOPPED GROWING {e['source']}: {e['detail']}",
    "send": lambda e: f"SEND to {_person(e)}: {_send(e)}",
    "lost": lambda e: f"LOST EVIDENCE {e['source']}: {e['what']}: {e['detail']} (exit code 4)",
    "start": lambda e: f"watching {len(e['files'])} file(s): {', '.join(e['files'][:5])}; {e['detail']}",
    "end": lambda e: f"watch ended: {e['reason']} (exit code {e['exit_code']})",
    "hook-failed": lambda e: f"--on-duplicate failed: {e['command']}: {e['reason']} (the watch goes on)",
    "new-file": lambda e: f"following new file {e['source']}",
    "rotated": lambda e: f"{e['source']} rotated ({e['detail']}): read from its start",
}
