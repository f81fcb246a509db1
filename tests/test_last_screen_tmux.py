"""The morning after, in a real terminal: tmux at 80x24 runs a 45-model sweep of 3 runs to its end
(scored and reported; one model on an endpoint that refuses connections), and the last screen, read with
`capture-pane` the way a person reads it, holds the whole outcome: the head line with the exit code, a
row per model in trouble and one for the rest, what to do next, where the tables and the report are."""

from __future__ import annotations

import os
import shutil
import subprocess
import sys
import time
from pathlib import Path

import pytest

from tests.helpers import closed_port
from tests.test_live_tmux import ROOT, _capture, _setup

pytestmark = pytest.mark.skipif(shutil.which("tmux") is None, reason="needs tmux (apt-get install tmux)")


def test_the_last_screen_of_a_45_model_sweep_holds_its_outcome(tmp_path: Path):
    _setup(tmp_path, closed_port())
    session = f"evalsweep-last-{os.getpid()}"
    env = f"PYTHONPATH={ROOT} LITELLM_LOCAL_MODEL_COST_MAP=True MPLBACKEND=Agg"
    cmd = (f"cd {tmp_path} && {env} {sys.executable} -m cli sweep sweep.toml --keep-going "
           f"--cache-dir {tmp_path / 'cache'}; echo EXIT=$?; sleep 120")
    subprocess.run(["tmux", "new-session", "-d", "-s", session, "-x", "80", "-y", "24", cmd], check=True)
    try:
        deadline = time.monotonic() + 240
        while "EXIT=" not in _capture(session) and time.monotonic() < deadline:
            time.sleep(0.5)
        screen = _capture(session)
    finally:
        subprocess.run(["tmux", "kill-session", "-t", session], check=False)
    if os.environ.get("EVALSWEEP_CAPTURE"):
        Path(os.environ["EVALSWEEP_CAPTURE"]).write_text(screen)
    lines = screen.rstrip("\n").splitlines()
    assert lines[-1] == "EXIT=3", screen  # the dead model's calls ended in error rows
    head = next(i for i, ln in enumerate(lines) if ln.startswith("evalsweep: "))
    assert "(exit 3) · 3 runs" in lines[head], screen
    shown = "\n".join(lines[head:])
    assert "dead-model" in shown and "+ 45 more, all ok" in shown, screen  # trouble named, the rest one row
    assert "next:" in shown and "rerun to retry" in shown, screen
    assert any(ln.startswith("tables (--tables prints them): ") for ln in lines[head:]), screen
    assert any(ln.startswith("report: ") and ln.endswith("index.html") for ln in lines[head:]), screen
    # nothing of the paper tables on the terminal: 45 models, so they went to tables.txt and the report
    assert (tmp_path / "runs" / "r10" / "tables.txt").read_text().strip()
    assert not any("┃" in ln for ln in lines[head:])
