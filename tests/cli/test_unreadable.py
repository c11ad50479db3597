"""What cannot be read is never passed over in silence. Run as an unprivileged user (uid 65534): root reads
every file whatever its mode, so a permission test as root would prove nothing (the `unprivileged` fixture, which
brings what that user runs where it can read it)."""

from __future__ import annotations

import json
import shutil
import stat
import tempfile
from pathlib import Path

import pytest

REPO = Path(__file__).resolve().parents[2]
SAMPLE = REPO / "sample_logs" / "parallel-worker"
FIXTURES = REPO / "tests" / "fixtures" / "providers"


@pytest.fixture()
def as_nobody(unprivileged):
    return unprivileged.run


@pytest.fixture()
def tree():
    """logs/a/ readable, logs/a/locked.log mode 000, logs/b/ mode 000 (in a folder anyone may enter)."""
    root = Path(tempfile.mkdtemp(prefix="mm-perm-", dir="/tmp"))
    (root / "logs" / "a").mkdir(parents=True)
    (root / "logs" / "b").mkdir()
    shutil.copy(SAMPLE / "worker-sender-1.log", root / "logs" / "a" / "w1.log")
    shutil.copy(SAMPLE / "worker-sender-2.log", root / "logs" / "b" / "w2.log")
    shutil.copy(SAMPLE / "worker-sender-3.log", root / "logs" / "a" / "locked.log")
    for path in [root, *root.rglob("*")]:
        path.chmod(0o755 if path.is_dir() else 0o644)
    (root / "logs" / "a" / "locked.log").chmod(0)
    (root / "logs" / "b").chmod(0)
    yield root
    (root / "logs" / "b").chmod(stat.S_IRWXU)
    shutil.rmtree(root, ignore_errors=True)


@pytest.mark.slow
def test_an_unreadable_subfolder_is_an_error_naming_it(tree, as_nobody):
    result = as_nobody("diagnose", str(tree / "logs"))
    assert result.returncode == 1, result.stdout
    assert result.stderr.startswith(f"Error: {tree / 'logs' / 'b'}: permission denied")
    assert "--skip-unreadable" in result.stderr and "Traceback" not in result.stderr and not result.stdout


@pytest.mark.slow
def test_an_unreadable_file_is_an_input_error_not_an_internal_one(tree, as_nobody):
    result = as_nobody("diagnose", str(tree / "logs" / "a" / "locked.log"))
    assert result.returncode == 1
    assert result.stderr == f"Error: {tree / 'logs' / 'a' / 'locked.log'}: permission denied " \
                            "(fix its permissions, or pass --skip-unreadable to read the rest and list it as not read)\n"

@pytest.mark.slow
def test_skip_unreadable_reads_the_rest_and_says_what_it_did_not_read(tree, as_nobody):
    result = as_nobody("diagnose", str(tree / "logs"), "--skip-unreadable", "--format", "json")
    assert result.returncode == 0, result.stderr
    doc = json.loads(result.stdout)
    assert doc["complete"] is False
    assert {u["path"] for u in doc["lost_evidence"]["files_not_read"]} == {
        str(tree / "logs" / "b"), str(tree / "logs" / "a" / "locked.log")}
    assert [i["path"] for i in doc["inputs"]] == [str(tree / "logs" / "a" / "w1.log")]
    table = as_nobody("diagnose", str(tree / "logs"), "--skip-unreadable")
    assert table.stdout.startswith("INCOMPLETE: 2 file(s) or folder(s) not read")
    assert as_nobody("diagnose", str(tree / "logs"), "--skip-unreadable", "--fail-on-duplicates").returncode == 4
    listed = as_nobody("affected", str(tree / "logs"), "--skip-unreadable", "--format", "csv")
    assert "were not read" in listed.stderr


def test_backfill_refuses_an_export_folder_it_cannot_read_entirely(tree, as_nobody):
    exports = tree / "exports"
    (exports / "more").mkdir(parents=True)
    shutil.copy(FIXTURES / "sendgrid-events.jsonl", exports / "a.jsonl")
    shutil.copy(FIXTURES / "sendgrid-events.jsonl", exports / "more" / "b.jsonl")
    for path in [exports, *exports.rglob("*")]:
        path.chmod(0o755 if path.is_dir() else 0o644)
    (exports / "more").chmod(0)
    try:
        result = as_nobody("backfill-sentlog", "--provider-export", str(exports), "--dry-run")
    finally:
        (exports / "more").chmod(0o755)
    assert result.returncode == 1 and result.stderr.startswith(f"Error: {exports / 'more'}: permission denied")
