"""How a command reads logs: one value (`ReadOptions`), built once from the command line and passed down.

The same value loads the case (forensics.ingest.case.load_case) and is repeated by every next command a run
prints (`arguments`), so that a pasted next step reads the logs exactly as the run did: a case read with
`--field recipient=To` whose next `affected` forgot it would read no sends and name no incident.

A `mailmortem.toml` in the working directory is read when no `--config` is given (`--no-config` ignores it);
a malformed one is an error naming it, never a silent default.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from pathlib import Path
from typing import TYPE_CHECKING

from forensics.errors import ConfigError
from forensics.ingest.envelopes import Reading
from forensics.ingest.window import Window

if TYPE_CHECKING:
    from forensics.ingest.fields import FieldMap

CONFIG_NAME = "mailmortem.toml"


@dataclass(frozen=True)
class Config:
    """The TOML file the fields were mapped by: given with --config, or found in the working directory."""

    path: str
    found: bool  # found in the working directory, not given
    fields: dict[str, str] = field(default_factory=dict)
    events: dict[str, str] = field(default_factory=dict)  # [events]: the logs' own wording (lower-case) → event

    def to_json(self) -> dict:
        return {"path": self.path, "found_in_working_directory": self.found, "fields": dict(self.fields),
                "events": dict(self.events)}


def find_config(given: str | None, ignore: bool = False, folder: str | Path = ".") -> Config | None:
    """The config to read: `given`, else mailmortem.toml in `folder` unless `ignore` (--no-config)."""
    from forensics.ingest.fields import load_config

    if given:
        loaded = load_config(given)
        return Config(str(given), False, loaded.fields, loaded.events)
    found = Path(folder) / CONFIG_NAME
    if ignore or not (found.exists() or found.is_symlink()):
        return None
    if not found.is_file():
        raise ConfigError(f"{CONFIG_NAME} in the working directory is not a readable file; remove it, "
                          "or pass --no-config to ignore it")
    loaded = load_config(found)
    return Config(CONFIG_NAME if Path(folder) == Path(".") else str(found), True, loaded.fields, loaded.events)


@dataclass(frozen=True)
class ReadOptions:
    """Every option that says how logs are read. `fields` and `events` are the --field and --event mappings (they
    win over the config's); `infer` is off under --no-infer."""

    syntax: str | None = None
    fields: dict[str, str] = field(default_factory=dict)
    events: dict[str, str] = field(default_factory=dict)  # the logs' own wording (lower-case) → canonical event
    infer: bool = True
    config: Config | None = None
    no_config: bool = False
    envelope: str | None = None
    tz: str | None = None
    year: int | None = None
    window: Window = Window()
    # How the case is loaded, on the commands that take LOGS (not on requeue-stale --logs):
    strict: bool = False
    memory_limit: str | None = None
    skip_unreadable: bool = False

    def field_map(self):
        """The FieldMap of --field, --event, the config and --no-infer (the options win over the config)."""
        from forensics.ingest.fields import FieldMap

        fields, events = (self.config.fields, self.config.events) if self.config else ({}, {})
        from_config = frozenset(set(fields) - set(self.fields) | set(events) - set(self.events))
        return FieldMap({**fields, **self.fields}, {**events, **self.events}, infer=self.infer,
                        from_config=from_config)

    def reading(self) -> Reading:
        return Reading(self.envelope, self.tz or "UTC", self.year)

    def how_read(self) -> tuple[FieldMap, Reading]:
        """(field_map(), reading()): what loading a case asks of the options, at once."""
        return self.field_map(), self.reading()

    def arguments(self, cut=None, *, loading: bool = False) -> list[str]:
        """The options a next command repeats to read the logs as this run did: what was given, and the window as
        applied (`cut`, forensics.ingest.window.Cut: absolute UTC times, so `--since 6h` names the same hours).
        A config found in the working directory is found again there; a given one is repeated. `loading`: also how
        the case was loaded (--memory-limit, --skip-unreadable), for a next command that takes LOGS as this one did."""
        args = ["--syntax", self.syntax] if self.syntax else []
        if self.config and not self.config.found:
            args += ["--config", self.config.path]
        args += ["--no-config"] if self.no_config else []
        args += [arg for canon, key in self.fields.items() for arg in ("--field", f"{canon}={key}")]
        args += [arg for value, canon in self.events.items() for arg in ("--event", f"{canon}={value}")]
        args += [] if self.infer else ["--no-infer"]
        args += ["--envelope", self.envelope] if self.envelope else []
        args += ["--tz", self.tz] if self.tz else []
        args += ["--year", str(self.year)] if self.year is not None else []
        args += cut.arguments() if cut else []
        if loading:
            args += ["--memory-limit", self.memory_limit] if self.memory_limit else []
            args += ["--skip-unreadable"] if self.skip_unreadable else []
        return args

    def given_flags(self) -> list[str]:
        """The options given on the command line (a config found in the working directory is not given)."""
        flags = [flag for flag, value in (
            ("--syntax", self.syntax), ("--field", self.fields), ("--event", self.events),
            ("--no-infer", not self.infer), ("--config", self.config and not self.config.found),
            ("--no-config", self.no_config), ("--envelope", self.envelope), ("--tz", self.tz),
            ("--year", self.year is not None), ("--since", self.window.since), ("--until", self.window.until),
            ("--strict", self.strict), ("--memory-limit", self.memory_limit),
            ("--skip-unreadable", self.skip_unreadable)) if value]
        return flags


class OptionsConflict(ConfigError):
    """Two reading options that say opposite things (--config with --no-config, an --until before --since): the
    command line's mistake, which the CLI reports as a usage error."""


def options_from(*, syntax: str | None = None, fields=(), events=(), config: str | None = None, no_config: bool = False,
                 no_infer: bool = False, envelope: str | None = None, tz: str | None = None, year: int | None = None,
                 since=None, until=None) -> ReadOptions:
    """The ReadOptions of a command line's values (--field and --event as given, `NAME=VALUE`): the config read
    (given, or found in the working directory) and the mappings checked now, so a malformed one is refused before
    any log is read."""
    from forensics.ingest.fields import parse_mappings

    if config and no_config:
        raise OptionsConflict("--config and --no-config say opposite things; pass one of them")
    window = Window(since, until)
    problem = window.order_problem()
    if problem:
        raise OptionsConflict(f"{problem}; pass an --until later than --since")
    fields, events = parse_mappings(fields, events)
    return ReadOptions(syntax=syntax, fields=fields, events=events,
                       infer=not no_infer, config=find_config(config, no_config), no_config=no_config,
                       envelope=envelope, tz=tz, year=year, window=window)
