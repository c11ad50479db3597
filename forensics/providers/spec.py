"""How to read provider exports: the paths and the options every command that reads them shares."""

from __future__ import annotations

from dataclasses import dataclass, field

from forensics.providers.reader import Keys, ProviderRead, read_events

_KEY_FLAGS = (("campaign", "--campaign-key"), ("step", "--step-key"), ("candidate", "--candidate-key"))


@dataclass
class ExportSpec:
    """`--provider-export` paths with `--provider`, `--map`, the metadata keys, `--year` and `--tz`."""

    paths: tuple[str, ...] = ()
    provider: str | None = None
    mapping: dict[str, str] = field(default_factory=dict)
    keys: Keys = field(default_factory=Keys)
    year: int | None = None
    tz: str | None = None

    @classmethod
    def of(cls, exports) -> ExportSpec:
        """An ExportSpec as given, or one that reads these paths with the defaults."""
        if isinstance(exports, ExportSpec):
            return exports
        return cls(tuple(str(p) for p in exports or ()))

    def __bool__(self) -> bool:
        return bool(self.paths)

    def read(self) -> ProviderRead:
        return read_events(self.paths, provider=self.provider, mapping=self.mapping, keys=self.keys,
                           year=self.year, tz=self.tz)

    def arguments(self) -> list[str]:
        """The command-line arguments that read the exports the same way (for printed next steps)."""
        args = [arg for path in self.paths for arg in ("--provider-export", path)]
        if self.provider:
            args += ["--provider", self.provider]
        args += [arg for name, column in self.mapping.items() for arg in ("--map", f"{name}={column}")]
        default = Keys()
        for name, flag in _KEY_FLAGS:
            mine = getattr(self.keys, name)
            if mine != getattr(default, name):
                args += [arg for key in mine for arg in (flag, key)]
        if self.year is not None:
            args += ["--year", str(self.year)]
        if self.tz:
            args += ["--tz", self.tz]
        return args
