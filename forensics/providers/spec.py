"""How to read provider exports: the paths and the options every command that reads them shares."""

from __future__ import annotations

from dataclasses import dataclass, field, replace

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
    # Exports found among the LOGS (forensics.providers.files.provider_of): (path, provider), each read as its provider's.
    found: tuple[tuple[str, str], ...] = ()

    @classmethod
    def of(cls, exports) -> ExportSpec:
        """An ExportSpec as given, or one that reads these paths with the defaults."""
        if isinstance(exports, ExportSpec):
            return exports
        return cls(tuple(str(p) for p in exports or ()))

    def __bool__(self) -> bool:
        return bool(self.paths or self.found)

    def with_found(self, found: list[dict]) -> ExportSpec:
        """These exports, and those found among the LOGS (`{"path", "provider"}`), read with the same keys and times."""
        more = tuple((f.get("file", f["path"]), f["provider"]) for f in found)
        return replace(self, found=self.found + more) if more else self

    def read(self) -> ProviderRead:
        reads = [read_events(self.paths, provider=self.provider, mapping=self.mapping, keys=self.keys,
                             year=self.year, tz=self.tz)] if self.paths else []
        for provider in dict.fromkeys(p for _path, p in self.found):
            paths = [path for path, p in self.found if p == provider]
            reads.append(read_events(paths, provider=provider, keys=self.keys, year=self.year, tz=self.tz))
        return reads[0] if len(reads) == 1 else ProviderRead.merged(reads)

    def arguments(self) -> list[str]:
        """The command-line arguments that read the exports the same way (for printed next steps)."""
        # an export found among the LOGS is named too (backfill-sentlog reads no LOGS), told by its own fields
        # unless --provider forces one provider on every path
        found = [path for path, _provider in self.found] if not self.provider else []
        args = [arg for path in (*self.paths, *found) for arg in ("--provider-export", path)]
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


def export_arguments(exports) -> list[str]:
    """The command-line arguments that read `exports` (paths, or an ExportSpec) as this run did."""
    return ExportSpec.of(exports).arguments()
