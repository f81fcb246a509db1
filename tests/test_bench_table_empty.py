"""#40: `bench/reasoning_sweep.py --table DIR` of a sweep that crashed before some lane finished a call divided by
zero (that lane's limit is 0 s). Such a lane is now printed as empty and the others as usual; a kept folder with
no finished call at all says so instead of a traceback."""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path

REPO = Path(__file__).resolve().parent.parent


def _kept(tmp: Path, entries: list[list[object]]) -> Path:
    """A kept sweep's folder as `--keep` leaves it: the servers' spec (seed, scale, lineup) and their logs."""
    sys.path.insert(0, str(REPO / "bench"))
    from reasoning_sweep import lineup

    kept = tmp / "kept"
    kept.mkdir()
    (kept / "server0.json").write_text(json.dumps({"models": lineup(), "scale": 0.5, "seed": 0}))
    logs = [{"log": [], "refused_by_key": {}}, {"log": entries, "refused_by_key": {"k-rpm": 2}}]
    (kept / "server_logs.json").write_text(json.dumps({"t_launch": 100.0, "logs": logs}))
    return kept


def _table(kept: Path) -> subprocess.CompletedProcess[str]:
    return subprocess.run([sys.executable, str(REPO / "bench" / "reasoning_sweep.py"), "--table", str(kept)],
                          cwd=REPO, capture_output=True, text=True, timeout=600)


def test_a_lane_with_no_finished_call_is_printed_empty(tmp_path: Path):
    # the sweep crashed 3 s in: two chat calls answered on the rpm lane, nothing anywhere else
    got = _table(_kept(tmp_path, [[100.5, "k-rpm", "cr00", 1, 0.4, 300, "answer", ""],
                                  [101.0, "k-rpm", "cr01", 1, 0.6, 280, "answer", ""]]))
    assert got.returncode == 0, got.stderr[-3000:]
    assert "Traceback" not in got.stderr
    lines = {ln.split()[0]: ln for ln in got.stdout.splitlines() if ln.split()}
    assert lines["rpm"].split()[1:3] == ["2", "580"] and " 2 " in lines["rpm"]  # its calls, tokens, 429s
    for lane in ("tpm-a", "tpm-b", "no-n", "conc", "shared", "rpm-f"):
        assert lines[lane].split()[1:] == ["0", "0", "empty"], lines[lane]
    sweep = next(ln for ln in got.stdout.splitlines() if ln.startswith("sweep:"))
    assert "2 x 429 for 2 admitted calls" in sweep


def test_a_kept_sweep_with_no_finished_call_says_so(tmp_path: Path):
    got = _table(_kept(tmp_path, []))
    assert got.returncode == 0, got.stderr[-3000:]
    assert "Traceback" not in got.stderr
    assert "no finished call" in got.stdout
