"""One watch from its start to its end: what --since makes of the lines already written, the follower, the
state and the hooks put together, the start said, and the diagnosis of what was seen."""

from __future__ import annotations

import dataclasses
import datetime as dt
from collections.abc import Callable

from forensics.errors import ConfigError
from forensics.ingest import window
from forensics.watch.follow import Follower, Pace
from forensics.watch.hooks import Hooks, split_command
from forensics.watch.run import Ending, Plan, Watch
from forensics.watch.state import Options, State

NOW, ALL = "now", "all"


def since_start(text: str) -> tuple[bool, window.Bound | None, str]:
    """--since as (read the files found at start from their start?, the time records must be from, what is said)."""
    given = text.strip().lower()
    if given == NOW:
        return False, None, "counting only lines written after the watch began (--since now)"
    if given == ALL:
        return True, None, "counting every line already written in the files found at start (--since all)"
    try:
        bound = window.parse_bound(text)
    except ConfigError as exc:
        raise ConfigError(f"--since {text!r}: pass now, all, or {window.FORMS.replace('newest record', 'watch began')}"
                          ) from exc
    if bound.back is not None:
        at = dt.datetime.now(dt.timezone.utc) - bound.back
        bound = window.Bound(bound.given, at=at)
    return True, bound, f"counting lines already written whose record is from {bound.at.isoformat()} on (--since)"


def watch(paths: list[str], since: str, options: Options, plan: Plan, pace: Pace, skip_unreadable: bool,
          hook: str | None, batch: float | None, emit: Callable[[dict], None],
          status: Callable[[dict], None] | None = None) -> tuple[Ending, dict | None]:
    """Run the watch to its end: the Ending, and with --for the diagnose document of what was seen."""
    from_start, bound, said = since_start(since)
    argv = split_command(hook) if hook else None
    follower = Follower(list(paths), from_start, pace, skip_unreadable)
    state = State(dataclasses.replace(options, since=bound))
    try:
        if follower.compressed:
            said += f"; {len(follower.compressed)} compressed file(s) left out (complete: read them with diagnose)"
        emit({"event": "start", "files": follower.labels, "since": since, "detail": said})
        for notice in follower.initial:
            emit({"event": "lost", "source": notice.source, "what": notice.what, "detail": notice.detail})
        watching = Watch(follower, state, plan, emit, status, Hooks(argv, batch, emit))
        watching.lost += follower.initial
        ending = watching.run()
        document = state.diagnosis(follower.lines_read(), watching.unread(),
                                   [p for p in paths if p != "-"]) if ending.summarize else None
        return ending, document
    finally:
        state.close()
