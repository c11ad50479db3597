"""A log writer process for the `mailmortem watch` tests: it holds its log files open (O_APPEND, as a logger does)
and obeys one JSON command per line on stdin, answering `ok` on stderr when done, so a test knows a line is on
disk before it waits for the watch to say something about it.

Commands: {"open": NAME, "path": PATH} · {"write": NAME, "text": TEXT} · {"reopen": NAME} (after a rename, as a
logger does on SIGHUP) · {"stdout": TEXT} (for `watch -`) · {"close_stdout": true}.
"""

from __future__ import annotations

import json
import os
import sys


def main() -> None:
    files: dict[str, tuple[str, int]] = {}
    for line in sys.stdin:
        command = json.loads(line)
        if "open" in command:
            files[command["open"]] = (command["path"], _open(command["path"]))
        elif "write" in command:
            os.write(files[command["write"]][1], command["text"].encode())
        elif "reopen" in command:
            path, fd = files[command["reopen"]]
            os.close(fd)
            files[command["reopen"]] = (path, _open(path))
        elif "stdout" in command:
            sys.stdout.write(command["stdout"])
            sys.stdout.flush()
        elif "close_stdout" in command:
            sys.stdout.close()
            os.close(1)
        sys.stderr.write("ok\n")
        sys.stderr.flush()


def _open(path: str) -> int:
    return os.open(path, os.O_WRONLY | os.O_APPEND | os.O_CREAT, 0o644)


if __name__ == "__main__":
    main()
