"""The repository's own files: no merge left half done."""

import re
import subprocess
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[1]
MARKER = re.compile(rb"^(<{7} |>{7} |={7}$)", re.MULTILINE)
TEXT = {".py", ".md", ".yaml", ".yml", ".toml", ".html", ".js", ".css", ".json", ".ini", ".cfg", ".txt", ".sh"}


def _tracked() -> list[Path]:
    try:
        out = subprocess.run(["git", "ls-files", "-z"], cwd=ROOT, capture_output=True, check=True, timeout=60).stdout
    except (OSError, subprocess.SubprocessError):
        pytest.skip("not a git checkout: the tracked files are unknown")
    return [ROOT / p for p in out.decode().split("\0") if p and Path(p).suffix in TEXT]


def test_no_merge_conflict_markers():
    files = _tracked()
    assert files, "git lists no text files"
    bad = [str(p.relative_to(ROOT)) for p in files if p.is_file() and MARKER.search(p.read_bytes())]
    assert not bad, f"merge conflict markers left in: {', '.join(bad)}"
