"""A run's private folders: made, held, removed; a killed run's swept by the next, and nothing that is not ours."""

from __future__ import annotations

import os
import subprocess
import sys
import tempfile

from forensics.ingest import runfolders


def test_a_folder_is_private_and_removed_with_everything_in_it(tmp_path, monkeypatch):
    monkeypatch.setattr(tempfile, "tempdir", str(tmp_path))
    folder = runfolders.make("mailmortem-test-")
    (folder / "copy.log").write_text("a whole mail log\n")
    assert folder.parent == tmp_path and folder.stat().st_mode & 0o777 == 0o700
    runfolders.remove(folder)
    assert list(tmp_path.iterdir()) == []


def test_only_folders_of_dead_runs_are_swept(tmp_path, monkeypatch):
    monkeypatch.setattr(tempfile, "tempdir", str(tmp_path))
    # a folder of the same name without an owner file is not a run's: someone's own, never removed
    (tmp_path / "mailmortem-notes").mkdir()
    (tmp_path / "mailmortem-notes" / "keep.txt").write_text("mine\n")
    holder = subprocess.Popen([sys.executable, "-c", "import sys; from forensics.ingest import runfolders; "
                               "print(runfolders.make('mailmortem-test-'), flush=True); sys.stdin.read()"],
                              stdin=subprocess.PIPE, stdout=subprocess.PIPE, text=True,
                              env={**os.environ, "TMPDIR": str(tmp_path)})
    held = holder.stdout.readline().strip()  # the event: the folder is made and held
    try:
        runfolders.sweep_abandoned()
        assert (tmp_path / "mailmortem-notes" / "keep.txt").exists() and held and os.path.isdir(held)
    finally:
        holder.kill()
        holder.communicate(timeout=120)
    runfolders.sweep_abandoned()
    assert not os.path.exists(held) and (tmp_path / "mailmortem-notes" / "keep.txt").exists()
