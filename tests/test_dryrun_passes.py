"""The dry run counts every pass (#37, #40): a critique run is twice the calls, a judge pass made only for
answers the rules cannot read is a range (0 expected, every answer at most), each priced at the model it
calls; the real run's calls fall in that range."""

from __future__ import annotations

import re
from pathlib import Path

import orjson
import pytest

from cli.dryrun import estimate
from cli.main import main
from runner.config import load_config
from runner.rundir import RunPlan
from suites.base import RunSpec


def _plan(out: Path, **opts: object) -> RunPlan:
    spec = RunSpec(suite="jeebench", options={"variant": "cot-critique", **opts}, limit=12)
    return RunPlan(spec=spec, models=["sim/strong", "sim/weak"], out=out)


def test_a_critique_run_plans_both_passes_and_the_run_makes_them(tmp_path: Path, capsys: pytest.CaptureFixture[str]):
    cache, out = tmp_path / "cache", tmp_path / "run"
    argv = ["run", "jeebench", "--variant", "cot-critique", "--models", "sim/strong,sim/weak", "--limit", "12",
            "--out", str(out), "--cache-dir", str(cache), "--judge", "sim/strong"]
    assert main([*argv, "--dry-run"]) == 0
    said = capsys.readouterr().out
    m = re.search(r"remaining: (\d+) calls \+ (\d+) follow-up calls \(at most (\d+)\)", said)
    assert m, said
    first, expected, most = map(int, m.groups())
    assert first == 24 and expected == 24 and most == 72  # critique for every answer; judges 0..every answer
    assert "+12 critique, +0-12 judge" in said
    assert main([*argv, "--no-live", "--no-score"]) == 0
    rows = [orjson.loads(x) for x in (out / "results.jsonl").read_bytes().splitlines()]
    follow = [r for r in rows if r["pass"] != "answer"]
    assert sum(r["pass"] == "answer" for r in rows) == first
    assert sum(r["pass"] == "critique" for r in rows) == 24
    assert expected <= len(follow) <= most
    capsys.readouterr()
    assert main([*argv, "--dry-run"]) == 0  # all done: nothing left of any pass
    said = capsys.readouterr().out
    assert "remaining: 0 calls (" in said, said[-1500:]
    # five critiques lost (a crash between the passes): planned from the real answers, exactly five
    gone = [r for r in rows if r["pass"] == "critique" and r["model"] == "sim/weak"][:5]
    kept = [r for r in rows if r not in gone]
    (out / "results.jsonl").write_bytes(b"".join(orjson.dumps(r) + b"\n" for r in kept))
    assert main([*argv, "--dry-run"]) == 0
    said = capsys.readouterr().out
    m = re.search(r"remaining: 0 calls \+ (\d+) follow-up calls", said)
    assert m and int(m.group(1)) == 5, said[-1500:]


def test_follow_ups_are_priced_at_the_model_they_call(tmp_path: Path):
    cfg = load_config(None)
    rows, _, _ = estimate([_plan(tmp_path / "r", judge="sim/strong")], cfg, cache_dir=None)
    weak = next(d for d in rows if d["model"] == "sim/weak")
    no_judge, _, _ = estimate([_plan(tmp_path / "r2")], cfg, cache_dir=None)
    weak0 = next(d for d in no_judge if d["model"] == "sim/weak")
    # the judge's calls count under sim/weak's run but at sim/strong's price: the max grows by them
    assert weak["follow_passes"]["judge"] == [0, 12] and "judge" not in weak0["follow_passes"]
    assert weak["est_cost_usd_max"] > weak0["est_cost_usd_max"]
    assert weak["follow_calls"] == weak0["follow_calls"] == 12


def test_the_wall_forecast_uses_what_the_calls_took_so_far(tmp_path: Path, capsys: pytest.CaptureFixture[str]):
    """A key at 2 calls at once, calls of 0.3 s against the local mock: 10 done, 20 left -> the forecast
    says ~3 s (20 x 0.3 / 2), bound by the lane's concurrency (the prior alone said ~10 s)."""
    from cli.dryrun import FORECAST
    from tests.helpers import run_args, write_config, write_dataset
    from tests.mock_openai import MockServer

    srv = MockServer(latency_s=0.3).start()
    try:
        data = write_dataset(tmp_path / "d.jsonl", 30)
        cfg = write_config(tmp_path / "c.toml", srv.base_url, ["ok-a"], extra_endpoint="max_concurrency = 2\n")
        out = tmp_path / "run"
        assert main(run_args(data, "ok-a", cfg, out, "--limit", "10", "--no-cache")) == 0
        assert main([*run_args(data, "ok-a", cfg, out, "--no-cache"), "--dry-run"]) == 0
        said = capsys.readouterr().out
        f = FORECAST[0]
        assert 2.0 <= f.expected_s <= 5.0 and f.bound == "concurrency", (f, said)
        assert "forecast wall: ~" in said and "(bound by its concurrency)" in said
    finally:
        srv.stop()
