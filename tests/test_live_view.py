"""The live view's layout (cli.live) at 80 columns and 30 rows, and the plain progress log without
a TTY: one summary line per interval for the whole sweep, plus a line per model whose state changed."""

from __future__ import annotations

import random
import re
from pathlib import Path

from cli.live import abbreviate, screen
from cli.main import main
from tests.helpers import write_dataset

LONG = ["claude-3-5-sonnet-20241022-extended-thinking", "claude-3-5-sonnet-20240620-extended-thinking"]
MODELS = ["sim/" + n for n in [f"model-{i:02d}" for i in range(43)] + LONG]


def _rows(runs: int = 3) -> list[dict]:
    rnd = random.Random(0)
    out = []
    for r in range(runs):
        for m in MODELS:
            done = rnd.randint(0, 1545)
            out.append(
                {
                    "run": f"jeebench-cot-{r}",
                    "model": m,
                    "done": done,
                    "total": 1545,
                    "rps": rnd.random() * 4,
                    "tokens": rnd.randint(0, 9_000_000),
                    "cost": rnd.random() * 400,
                    "errors": 0,
                    "skipped": 0,
                    "retries": rnd.randint(0, 9),
                    "cached": 0,
                    "resumed": 0,
                    "eta_s": None if done == 0 else rnd.random() * 20000,
                    "state": "ok",
                    "batches": "",
                }
            )
    out[7]["errors"] = 12
    out[min(100, len(out) - 1)].update(state="down")
    return out


def test_45_models_by_3_runs_fit_one_screen_and_keep_what_matters():
    rows = _rows()
    lanes = [{"lane": "dead/KEY", "state": "down", "error": "connection error: h:1: connection refused"}]
    lines = screen(rows, lanes, 80, 24)
    assert len(lines) <= 24 and all(len(ln) <= 80 for ln in lines), lines
    assert lines[0].startswith("evalsweep") and "ETA" in lines[0]  # the whole sweep's ETA on top
    assert [ln.split()[1] for ln in lines if ln.startswith("▸ ")] == [f"jeebench-cot-{r}" for r in range(3)]
    shown = [ln for ln in lines[2:] if ln.startswith("  ")]  # (lines[1]: the column header)
    assert any(ln.split()[0] == "model-07" and " 12 " in ln for ln in shown)  # errors shown first
    assert any(" down" in ln for ln in shown)  # ... and a lane in trouble
    assert re.match(r"\+ \d+ more models", lines[-3]) and "lane dead/KEY: down" in lines[-2]
    for ln in shown:  # numbers whole: done/total, then $ cost
        assert re.search(r" \d+/1545 ", ln) and re.search(r"\$\d", ln) and "…" not in ln.split()[1:], ln


def test_everything_shown_when_it_fits_and_low_value_columns_go_first():
    rows = _rows(1)[:10]
    wide = screen(rows, [], 120, 40)
    narrow = screen(rows, [], 60, 40)
    assert len(wide) == 2 + 1 + 10 and len(narrow) == 13
    assert "tokens" in wide[1] and "tokens" not in narrow[1]
    for col in ("done/total", "rate", "cost", "err", "ETA"):
        assert col in narrow[1]
    assert all(len(ln) <= 60 for ln in narrow)


def test_names_abbreviated_by_rule_stay_distinct():
    short, prefix = abbreviate(MODELS, 20)
    assert prefix == "sim/" and len(set(short.values())) == len(MODELS)
    assert all(len(v) <= 20 for v in short.values())
    assert short["sim/model-05"] == "model-05"
    a, b = (short["sim/" + n] for n in LONG)
    assert "241022" in a and "240620" in b  # the part where they differ is kept
    same, prefix = abbreviate(["sim/a", "sim/b"], 20)
    assert same == {"sim/a": "sim/a", "sim/b": "sim/b"} and prefix == ""  # short names left whole


def test_no_tty_logs_a_summary_per_interval_not_a_line_per_model(tmp_path: Path):
    data = write_dataset(tmp_path / "d.jsonl", 12)
    (tmp_path / "c.toml").write_text(
        '[[endpoints]]\nname = "sim"\nkind = "sim"\nlatency_ms = 200\nmax_concurrency = 40\n'
    )
    (tmp_path / "sweep.toml").write_text(
        f'config = "c.toml"\n[[runs]]\nsuite = "jsonl:{data}"\nout = "{tmp_path / "run"}"\n'
        f"models = {MODELS!r}\n".replace("'", '"')
    )
    args = ["sweep", str(tmp_path / "sweep.toml"), "--no-live", "--no-score", "--progress-every", "0.4"]
    assert main([*args, "--cache-dir", str(tmp_path / "cache")]) == 0
    log = (tmp_path / "run" / "log.txt").read_text().splitlines()
    summaries = [ln for ln in log if "progress (1 run, 45 model-runs):" in ln]
    per_model = [ln for ln in log if re.search(r"\] sim/\S+: \d+/12 ", ln)]
    assert len(summaries) >= 4, log  # ~540 calls at ~200/s: several intervals
    assert len(per_model) <= 2 * len(MODELS), len(per_model)  # a line when a model's state changes
    assert "ETA" in summaries[0] and re.search(r"\d+/540 \(\d+%\)", summaries[0])


async def test_lane_state_retrying_down_and_back_to_ok():
    import asyncio

    import pytest

    from providers.base import ProviderError
    from runner.config import Endpoint
    from runner.lanes import Lane

    lane = Lane(
        Endpoint(name="e", base_url="http://x/v1", retry_initial_s=0.3, max_attempts=5), None, None, None
    )
    fails = 1

    async def flaky() -> str:
        nonlocal fails
        if fails:
            fails -= 1
            raise ProviderError("HTTP 503: busy", status=503, retryable=True, retry_after=0.5)
        return "ok"

    task = asyncio.create_task(lane.call(flaky, 0))
    await asyncio.sleep(0.05)
    assert lane.state == "retrying" and lane.describe()["state"] == "retrying"
    assert (await task)[0] == "ok" and lane.state == "ok"

    async def refused() -> str:
        raise ProviderError("connection error: x:80: connection refused", retryable=True)

    lane2 = Lane(
        Endpoint(name="d", base_url="http://x/v1", retry_initial_s=0.0, max_attempts=3), None, None, None
    )
    with pytest.raises(ProviderError):
        await lane2.call(refused, 0)
    d = lane2.describe()
    assert d["state"] == "down" and d["error"] == "connection error: x:80: connection refused"
    fails = 0
    await lane2.call(flaky, 0)  # an answer: the lane is up again
    assert lane2.state == "ok" and lane2.describe()["error"] is None


def test_an_unpriced_model_does_not_hide_the_known_cost():
    rows = _rows(1)[:3]
    rows[1]["cost"] = None
    top = screen(rows, [], 80, 30)[0]
    known = rows[0]["cost"] + rows[2]["cost"]
    assert f"${known:.2f}+?" in top, top
