"""The live view in a real terminal: tmux at 80x30 runs a sweep of 45 models x 3 runs (one model on an
endpoint that refuses connections), and `capture-pane` is read the way a person reads the screen."""

from __future__ import annotations

import json
import os
import re
import shutil
import subprocess
import sys
import time
from pathlib import Path

import pytest

from tests.helpers import closed_port

pytestmark = pytest.mark.skipif(shutil.which("tmux") is None, reason="needs tmux (apt-get install tmux)")

ROOT = Path(__file__).resolve().parent.parent
NAMES = (
    ["frontier", "strong", "medium", "weak", "random", "open-large"]
    + [f"model-{i:02d}" for i in range(37)]
    + ["claude-3-5-sonnet-20241022-extended-thinking", "claude-3-5-sonnet-20240620-extended-thinking"]
)
LIMITS = (10, 20, 30)
SUMMARY = re.compile(r"^evalsweep  \d+/\d+ \(\d+%\)")


def _setup(t: Path, dead_port: int, concurrency: int = 64) -> list[str]:
    with (t / "d.jsonl").open("w") as f:
        for i in range(30):
            f.write(
                json.dumps({"id": f"q{i}", "prompt": f"Q{i}?", "choices": ["a", "b"], "answer": "AB"[i % 2]})
                + "\n"
            )
    (t / "c.toml").write_text(
        f'[[endpoints]]\nname = "sim"\nkind = "sim"\nlatency_ms = 250\nmax_concurrency = {concurrency}\n\n'
        f'[[endpoints]]\nname = "dead"\nkind = "openai"\nbase_url = "http://127.0.0.1:{dead_port}/v1"\n'
        'max_attempts = 2\nretry_initial_s = 0.1\n\n[[models]]\nname = "dead-model"\nendpoint = "dead"\n'
    )
    models = ["sim/" + n for n in NAMES]
    assert len(models) == 45
    runs = ""
    for k, lim in enumerate(LIMITS):
        ms = models[:44] + ["dead-model"] if k == 0 else models
        runs += (
            f'[[runs]]\nsuite = "jsonl:{t / "d.jsonl"}"\nlimit = {lim}\nout = "{t / "runs" / f"r{lim}"}"\n'
        )
        runs += f"models = {json.dumps(ms)}\n"
    (t / "sweep.toml").write_text(f'config = "{t / "c.toml"}"\n' + runs)
    return models


def _capture(session: str, history: bool = False) -> str:
    args = ["tmux", "capture-pane", "-p", "-J", "-t", session] + (["-S", "-"] if history else [])
    return subprocess.run(args, capture_output=True, text=True, check=True).stdout


def _matches(shown: str, names: list[str]) -> list[str]:
    """The full names a displayed (maybe abbreviated) name can stand for."""
    if "…" not in shown:
        return [n for n in names if n == shown or n.endswith("/" + shown)]
    head, tail = shown.split("…", 1)
    return [n for n in names if head in n and tail in n[n.index(head) + len(head) :]]


def _sweep_in_tmux(tmp_path: Path, interrupt: bool = False, min_pct: int = 0) -> tuple[str, str, str]:
    """(a mid-run screen with the dead lane found, the screen at the end, the whole scrollback)."""
    session = f"evalsweep-{os.getpid()}"
    env = f"PYTHONPATH={ROOT} LITELLM_LOCAL_MODEL_COST_MAP=True"
    cmd = (
        f"cd {tmp_path} && {env} {sys.executable} -m cli sweep sweep.toml --no-score --keep-going --grace 3 "
        f"--cache-dir {tmp_path / 'cache'}; echo EXIT=$?; sleep 120"
    )
    subprocess.run(["tmux", "new-session", "-d", "-s", session, "-x", "80", "-y", "30", cmd], check=True)
    try:
        mid = ""
        deadline = time.monotonic() + 90
        while time.monotonic() < deadline:  # mid-run: the dead lane found, the sims still running
            screen = _capture(session)
            if "EXIT=" in screen:
                break
            pct = re.search(r"^evalsweep  \d+/\d+ \((\d+)%\)", screen, re.M)
            if pct and int(pct[1]) >= min_pct and "down" in screen and "connection refused" in screen:
                mid = screen
                break
            time.sleep(0.3)
        assert mid, f"no mid-run screen with the lane down:\n{_capture(session)}"
        if interrupt:  # a real Ctrl-C typed into the terminal
            subprocess.run(["tmux", "send-keys", "-t", session, "C-c"], check=True)
        while "EXIT=" not in _capture(session) and time.monotonic() < deadline:
            time.sleep(0.5)
        return mid, _capture(session), _capture(session, history=True)
    finally:
        subprocess.run(["tmux", "kill-session", "-t", session], check=False)


def _one_copy(full: str) -> None:
    """Exactly one copy of the live view's summary and column header in the whole scrollback."""
    assert sum(1 for ln in full.splitlines() if SUMMARY.match(ln)) == 1, full
    assert sum(1 for ln in full.splitlines() if re.match(r"^  model .*done/total", ln)) == 1, full


def test_ctrl_c_leaves_no_stale_copy_of_the_live_view(tmp_path: Path):
    dead_port = closed_port()
    _setup(tmp_path, dead_port, concurrency=8)  # most items still unsent when Ctrl-C comes
    _, end, full = _sweep_in_tmux(tmp_path, interrupt=True)
    assert "EXIT=130" in end and "Resume with" in full, end
    assert "^C" not in full and "interrupted: no new calls" in full
    _one_copy(full)


def test_live_view_at_80x30_during_a_45_model_sweep(tmp_path: Path):
    dead_port = closed_port()
    models = _setup(tmp_path, dead_port)
    mid, end, full = _sweep_in_tmux(tmp_path, min_pct=30)  # well into the sweep
    if os.environ.get("EVALSWEEP_CAPTURE"):
        Path(os.environ["EVALSWEEP_CAPTURE"]).write_text(mid)
    lines = mid.splitlines()
    top = next(i for i, ln in enumerate(lines) if SUMMARY.match(ln))
    live = lines[top:]
    while live and not live[-1].strip():
        live.pop()
    assert all(len(ln) <= 80 for ln in live), [ln for ln in live if len(ln) > 80]  # nothing wrapped
    assert len(live) <= 30 and "ETA" in live[0]  # one screen, the whole sweep's ETA on top
    # warnings sit above the live area and stay there
    assert any(
        "dead-model" in ln and f"127.0.0.1:{dead_port}: connection refused" in ln for ln in lines[:top]
    )
    # grouped per run, each run's summary line
    heads = [ln for ln in live if ln.startswith("▸ ")]
    assert [h.split()[2] for h in heads] == [f"(r{lim})" for lim in LIMITS], heads
    assert all("ETA" in h for h in heads)
    run_of: dict[int, int] = {}
    current = None
    rows = []
    for i, ln in enumerate(live):
        if ln.startswith("▸ "):
            current = LIMITS[len([h for h in live[:i] if h.startswith("▸ ")])]
        elif current is not None and re.match(r"^  \S", ln) and i > 1:  # (live[1]: the column header)
            rows.append((current, ln))
            run_of[i] = current
    assert rows, live
    for lim, ln in rows:
        m = re.match(
            r"^  (\S+)\s+(\d+)/(\d+) +([\d.]+/s) +(\$[\d.,]+|<\$0\.001) +(\d+(?:\+\d+s)?) +(\S+)", ln
        )
        assert m, ln  # every number whole: done/total, rate, cost, errors, ETA
        assert int(m[3]) == lim and int(m[2]) <= lim, ln
        assert re.fullmatch(r"done|\?|\d+s|[\d.]+[mh]", m[7]), ln
        shown = m[1]
        full_names = _matches(shown, [*models, "dead-model"])
        assert len(full_names) == 1, (shown, full_names)  # every name tells its model apart
    dead = [ln for lim, ln in rows if ln.lstrip().startswith("dead-model")]
    assert dead and " down" in dead[0] and re.search(r" [1-9]\d*(\+\d+s)? ", dead[0]), dead
    assert any(
        f"lane dead: down: connection error: 127.0.0.1:{dead_port}: connection refused" in ln for ln in live
    )
    # the run ended; exactly one copy of the live view's header is left, in the whole scrollback
    assert "EXIT=3" in end, end
    _one_copy(full)
