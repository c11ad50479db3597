"""`python -m mailmortem …` as an unprivileged user (uid 65534) when the tests run as root: root reads every file
whatever its mode, so a permission test as root would prove nothing. Not root, the tests run it as themselves.

That user has to reach what it runs, and a checkout in a private folder (mode 700, as `mktemp -d` and root's home
make) puts the project, its virtual environment, or the interpreter (pyenv's lives in root's home) out of its
reach. Each of those it cannot reach is brought to a folder it can read (mode 755, in the temp folder): hard links
where the file system allows, copies where not. It runs from there; no test is skipped for it.
"""

from __future__ import annotations

import os
import shutil
import stat
import subprocess
import sys
import sysconfig
import tempfile
from pathlib import Path

NOBODY = 65534
REPO = Path(__file__).resolve().parent.parent
PACKAGES = ("mailmortem", "forensics", "remediation", "queries")  # pyproject's [tool.setuptools.packages.find]
_NOT_STDLIB = shutil.ignore_patterns("site-packages", "test")  # compiled .pyc files come along: nothing recompiles
_NOT_PACKAGES = shutil.ignore_patterns("__editable__*")  # the editable install's finder points into the checkout


def reachable(path: Path) -> bool:
    """Whether any user may walk to `path`: every folder on the way lets others pass (o+x)."""
    path = Path(path).resolve()
    folders = [path, *path.parents] if path.is_dir() else list(path.parents)
    return all(folder.stat().st_mode & stat.S_IXOTH for folder in folders)


def _link_or_copy(source: str, target: str) -> None:
    try:
        os.link(source, target)  # never written through: the folder is only read, then removed
    except OSError:  # another file system, or links refused
        shutil.copy2(source, target)


def _bring(source: Path, target: Path, ignore=_NOT_PACKAGES) -> Path:
    shutil.copytree(source, target, copy_function=_link_or_copy, ignore=ignore)
    return target


class Unprivileged:
    """What runs mailmortem as uid 65534: `command(*args)` and `env()`; `close()` removes what was brought."""

    def __init__(self) -> None:
        self.as_root = os.geteuid() == 0
        self.root = Path(tempfile.mkdtemp(prefix="mm-unprivileged-"))
        self.root.chmod(0o755)
        self.python, self.library_path = self._interpreter() if self.as_root else (sys.executable, None)
        self.path = self._import_path() if self.as_root else []

    def _interpreter(self) -> tuple[str, str | None]:
        """The base interpreter (a venv's bin/python is a link into the checkout), brought with its standard
        library and libpython when that user cannot reach them."""
        executable = Path(getattr(sys, "_base_executable", sys.executable)).resolve()
        stdlib = Path(sysconfig.get_paths()["stdlib"])
        if reachable(executable) and reachable(stdlib):
            return str(executable), None
        home = self.root / "python"
        (home / "bin").mkdir(parents=True)
        _link_or_copy(str(executable), str(home / "bin" / executable.name))
        _bring(stdlib, home / "lib" / stdlib.name, _NOT_STDLIB)  # lib-dynload is inside it
        libdir = Path(sysconfig.get_config_var("LIBDIR") or stdlib.parent)
        for library in libdir.glob("libpython*.so*"):
            _link_or_copy(str(library.resolve()), str(home / "lib" / library.name))
        return str(home / "bin" / executable.name), str(home / "lib")

    def _import_path(self) -> list[str]:
        """The project's packages, then the environment's site-packages: each where it is, or brought."""
        if reachable(REPO):
            path = [str(REPO)]
        else:
            for package in PACKAGES:
                _bring(REPO / package, self.root / "src" / package)
            path = [str(self.root / "src")]
        for number, site in enumerate(dict.fromkeys([sysconfig.get_paths()["purelib"],
                                                     sysconfig.get_paths()["platlib"]])):
            path.append(site if reachable(Path(site)) else str(_bring(Path(site), self.root / f"site-{number}")))
        return path

    def command(self, *args: str) -> list[str]:
        command = [self.python, "-m", "mailmortem", *args]
        if self.as_root:
            command = ["setpriv", f"--reuid={NOBODY}", f"--regid={NOBODY}", "--clear-groups", "--inh-caps=-all",
                       "--"] + command
        return command

    def env(self) -> dict[str, str]:
        env = {**os.environ, "HOME": tempfile.gettempdir()}
        if self.path:
            env.update(PYTHONPATH=os.pathsep.join(self.path), PYTHONNOUSERSITE="1")
        if self.library_path:
            env["LD_LIBRARY_PATH"] = os.pathsep.join(filter(None, [self.library_path,
                                                                   os.environ.get("LD_LIBRARY_PATH")]))
        return env

    def run(self, *args: str) -> subprocess.CompletedProcess:
        """Run `mailmortem *args` from the temp folder (a folder that user can enter) to its end."""
        return subprocess.run(self.command(*args), capture_output=True, text=True, cwd=tempfile.gettempdir(),
                              env=self.env(), timeout=300)

    def close(self) -> None:
        shutil.rmtree(self.root, ignore_errors=True)  # unlinks the links; what they point at stays
