"""`--max-cost` and a model's `max_cost` against the mock servers on 127.0.0.1: a run stopped by its
ceiling sends nothing more, ends each unsent call as a skipped row, exits 5 saying what was spent and
how to go on; going on with a higher ceiling re-sends no answered call. Batched calls count too; an
unpriced model cannot run under a ceiling; the dry run says how far the ceiling reaches."""

from __future__ import annotations

import json
import re
import shlex
from collections import Counter
from pathlib import Path

import pytest

from cli.live import screen
from cli.main import main
from runner.calls.spend import round_up, with_max_cost
from tests.helpers import rows, run_args, write_config, write_dataset
from tests.mock_batch import MockBatchServer
from tests.mock_openai import MockServer

WORST = 1024 * 2.0 / 1e6
"""A jsonl call's worst case is mostly its 1,024 output tokens at $2 per million."""


@pytest.fixture
def mock():
    srv = MockServer().start()
    yield srv
    srv.stop()


def _manifest(run: Path) -> dict:
    return json.loads((run / "manifest.json").read_text())


def _go_on(stderr: str) -> list[str]:
    """The command the stop message gives, as arguments of `main`."""
    line = next(ln.strip() for ln in stderr.splitlines() if ln.strip().startswith("evalsweep run "))
    return shlex.split(line)[1:]


def test_a_run_stopped_by_its_ceiling_goes_on_with_a_higher_one_paying_nothing_twice(
    tmp_path: Path, mock: MockServer, capsys: pytest.CaptureFixture[str]
):
    data = write_dataset(tmp_path / "d.jsonl", 20)
    cfg = write_config(tmp_path / "c.toml", mock.base_url, ["ok-a"])
    out = tmp_path / "run"
    ceiling = WORST + 0.0004  # the first call's worst case fits, then ~10 answers of ~$0.00004
    args = run_args(data, "ok-a", cfg, out, "--cache-dir", str(tmp_path / "cache"), "--max-cost", str(ceiling))
    assert main(args) == 5
    err = capsys.readouterr().err
    first = rows(out)
    ok = [r for r in first if r["error"] is None]
    skipped = [r for r in first if r["error"] is not None]
    assert len(first) == 20 and len({r["item"] for r in first}) == 20  # one final row each
    assert ok and skipped and all(r["error_kind"] == "skipped" for r in skipped)
    assert all("--max-cost $" in r["error"] and "reached" in r["error"] for r in skipped)
    spent = sum(r["cost_usd"] for r in ok)
    worst = float(re.search(r"worst case, \$([0-9.]+)", skipped[0]["error"]).group(1))  # type: ignore[union-attr]
    assert WORST < worst < WORST + 0.0001  # output at the model's price, and the input
    assert spent <= ceiling and spent + worst + 0.00005 > ceiling  # stopped only when the next would cross
    assert mock.total == len(ok)  # nothing skipped was sent
    assert f"spent ${spent:.4f} of the ${ceiling:g} ceiling" in err and f"{len(skipped)} calls not sent" in err
    man = _manifest(out)
    assert man["status"] == "stopped" and man["spend"]["--max-cost"]["reached"] is True
    assert man["spend"]["--max-cost"]["spent_usd"] == pytest.approx(spent)
    assert "spent $" in (out / "log.txt").read_text()  # the progress line shows spent / ceiling

    again = _go_on(err)
    higher = float(again[again.index("--max-cost") + 1])
    # from the run's real rate (#39), with room for one call's worst case at a time: enough to go on
    assert higher > ceiling and higher >= spent + WORST
    before = Counter(mock.prompts)
    assert main(again) == 0
    second = [r for r in rows(out)[20:]]
    assert {r["item"] for r in second} == {r["item"] for r in skipped} and all(r["error"] is None for r in second)
    assert mock.total == 20 and set(mock.prompts.values()) == {1}  # each prompt sent once over both runs
    assert all(before[p] == 0 for p in Counter(mock.prompts) - before)  # the resumed run sent only new ones
    man = _manifest(out)
    assert man["status"] == "complete" and man["spend"]["--max-cost"]["spent_usd"] == pytest.approx(
        sum(r["cost_usd"] for r in rows(out) if r["error"] is None)
    )


def test_the_same_ceiling_again_sends_nothing(tmp_path: Path, mock: MockServer, capsys: pytest.CaptureFixture[str]):
    data = write_dataset(tmp_path / "d.jsonl", 8)
    cfg = write_config(tmp_path / "c.toml", mock.base_url, ["ok-a"])
    args = run_args(data, "ok-a", cfg, tmp_path / "run", "--no-cache", "--max-cost", str(WORST + 0.0001))
    assert main(args) == 5
    sent = mock.total
    assert 0 < sent < 8
    assert main(args) == 5  # what the first run was billed counts: the ceiling is as full as it was
    assert mock.total == sent and "calls not sent" in capsys.readouterr().err


def test_a_model_without_a_price_is_refused_before_anything_is_sent(
    tmp_path: Path, mock: MockServer, capsys: pytest.CaptureFixture[str]
):
    data = write_dataset(tmp_path / "d.jsonl", 3)
    cfg = tmp_path / "c.toml"
    cfg.write_text(
        f'[[endpoints]]\nname = "m"\nkind = "openai"\nbase_url = "{mock.base_url}"\n'
        '[[models]]\nname = "mystery"\nendpoint = "m"\nmodel = "ok-no-such-model-anywhere"\n'
    )
    assert main(run_args(data, "mystery", cfg, tmp_path / "run", "--max-cost", "1")) == 2
    err = capsys.readouterr().err
    assert "--max-cost: model 'mystery' has no known price" in err and "price_in" in err
    assert mock.total == 0 and mock.models_requests == 0  # not even the pre-flight
    assert main(run_args(data, "mystery", cfg, tmp_path / "run2", "--dry-run", "--max-cost", "1")) == 2


def test_a_models_own_max_cost_stops_only_that_model(
    tmp_path: Path, mock: MockServer, capsys: pytest.CaptureFixture[str]
):
    data = write_dataset(tmp_path / "d.jsonl", 10)
    cfg = write_config(tmp_path / "c.toml", mock.base_url, ["ok-a"])
    cfg.write_text(
        cfg.read_text()
        + f'[[models]]\nname = "ok-b"\nendpoint = "mock"\nprice_in = 1.0\nprice_out = 2.0\nmax_cost = {WORST + 0.0001}\n'
    )
    assert main(run_args(data, "ok-a,ok-b", cfg, tmp_path / "run", "--no-cache")) == 5
    err = capsys.readouterr().err
    by = Counter((r["model"], r["error_kind"] if r["error"] else "ok") for r in rows(tmp_path / "run"))
    assert by[("ok-a", "ok")] == 10 and 0 < by[("ok-b", "ok")] < 10
    assert by[("ok-b", "ok")] + by[("ok-b", "skipped")] == 10
    assert "stopped by max_cost of ok-b" in err and "To go on, raise max_cost of ok-b in the config" in err
    assert mock.per_model["ok-b"] == by[("ok-b", "ok")]


def test_batched_calls_count_against_the_ceiling(tmp_path: Path, capsys: pytest.CaptureFixture[str]):
    srv = MockBatchServer(delay_s=0.05).start()
    try:
        data = write_dataset(tmp_path / "d.jsonl", 8)
        fast = "batch = true\nbatch_poll_s = 0.02\nbatch_idle_s = 0.02\n"
        cfg = write_config(tmp_path / "c.toml", srv.base_url, ["ok-a"], extra_endpoint=fast)
        # reserved at the live price, billed at half: each batch of one answer frees room for the next
        ceiling = WORST + 0.0001
        code = main(run_args(data, "ok-a", cfg, tmp_path / "run", "--no-cache", "--max-cost", str(ceiling)))
        assert code == 5
        rs = rows(tmp_path / "run")
        ok = [r for r in rs if r["error"] is None]
        assert len(rs) == 8 and ok and len(ok) < 8 and all(r["batch_id"] for r in ok)
        assert srv.total == 0 and sum(srv.submissions.values()) == len(ok)  # nothing skipped was submitted
        assert sum(r["cost_usd"] for r in ok) <= ceiling
        assert _manifest(tmp_path / "run")["spend"]["--max-cost"]["spent_usd"] == pytest.approx(
            sum(r["cost_usd"] for r in ok)
        )
    finally:
        srv.stop()


def test_dry_run_says_how_far_the_ceiling_reaches(tmp_path: Path, capsys: pytest.CaptureFixture[str]):
    data = write_dataset(tmp_path / "d.jsonl", 100)
    cfg = write_config(tmp_path / "c.toml", "http://127.0.0.1:9/v1", ["ok-a"])
    args = [*run_args(data, "ok-a", cfg, tmp_path / "run", "--dry-run", "--keep-going"), "--max-cost", "0.15"]
    assert main(args) == 0
    line = next(ln for ln in capsys.readouterr().out.splitlines() if ln.startswith("--max-cost"))
    # 100 calls: expected $0.10 (half the limit), max $0.21 (1,024 output tokens at $2/M, plus input)
    assert "all 100 calls at their expected cost ($0.10)" in line, line
    m = re.search(r"~(\d+)% of the 100 calls \(~(\d+)\) at their max cost \(\$0\.21\)", line)
    assert m and 70 <= int(m.group(1)) <= 73 and int(m.group(2)) == int(m.group(1)), line


@pytest.mark.parametrize("bad", ["-1", "0", "nan", "lots"])
def test_max_cost_must_be_a_positive_amount(tmp_path: Path, bad: str, capsys: pytest.CaptureFixture[str]):
    data = write_dataset(tmp_path / "d.jsonl", 1)
    with pytest.raises(SystemExit) as e:
        main([*run_args(data, "sim/weak", None, tmp_path / "run"), "--max-cost", bad])
    assert e.value.code == 2 and "--max-cost" in capsys.readouterr().err and not (tmp_path / "run").exists()


def test_live_view_and_command_helpers():
    d = {"run": "r", "model": "m", "done": 1, "total": 2, "rps": 0.0, "tokens": 0, "cost": 0.0, "errors": 0,
         "skipped": 0, "exhausted": 0, "retries": 0, "cached": 0, "resumed": 0, "eta_s": None, "eta": "?",
         "state": "", "batches": ""}
    assert "spent $0.12/$0.20" in screen([d], [], 120, 10, "$0.12/$0.20")[0]
    assert with_max_cost("evalsweep run x --max-cost 0.2 --no-live", 0.5) == "evalsweep run x --max-cost 0.5 --no-live"
    assert with_max_cost("evalsweep run x --max-cost=0.2", 1) == "evalsweep run x --max-cost 1"
    assert round_up(0.04131) == 0.042 and round_up(12.3) == 13 and round_up(0.2) == 0.2


def test_a_sweep_shares_one_ceiling_and_goes_on(tmp_path: Path, mock: MockServer, capsys: pytest.CaptureFixture[str]):
    a, b = write_dataset(tmp_path / "a.jsonl", 6), write_dataset(tmp_path / "b.jsonl", 6, prefix="Task")
    write_config(tmp_path / "c.toml", mock.base_url, ["ok-a"])
    sweep = tmp_path / "s.toml"
    sweep.write_text(
        f'config = "c.toml"\nout = "{tmp_path / "runs"}"\n'
        f'[[runs]]\nsuite = "jsonl:{a}"\nmodels = ["ok-a"]\n[[runs]]\nsuite = "jsonl:{b}"\nmodels = ["ok-a"]\n'
    )
    args = ["sweep", str(sweep), "--no-live", "--no-score", "--no-cache", "--max-cost", str(WORST + 0.0002)]
    assert main(args) == 5
    err = capsys.readouterr().err
    line = next(ln.strip() for ln in err.splitlines() if ln.strip().startswith("evalsweep sweep "))
    sent = mock.total
    assert 0 < sent < 12 and "--max-cost" in line
    assert main(shlex.split(line)[1:]) == 0
    assert mock.total == 12 and set(mock.prompts.values()) == {1}


def test_a_batch_sent_before_is_collected_whatever_the_ceiling(tmp_path: Path):
    """Re-attaching to a batch of an earlier run sends nothing: its answers are collected (they are billed
    anyway) and counted as spent, even under a ceiling smaller than one call's worst case."""
    srv = MockBatchServer(delay_s=0.05).start()
    try:
        data = write_dataset(tmp_path / "d.jsonl", 5)
        fast = "batch = true\nbatch_poll_s = 0.02\nbatch_idle_s = 0.02\n"
        cfg = write_config(tmp_path / "c.toml", srv.base_url, ["ok-a"], extra_endpoint=fast)
        run = tmp_path / "run"
        assert main(run_args(data, "ok-a", cfg, run, "--no-cache")) == 0
        paid = sum(r["cost_usd"] for r in rows(run))
        # as if killed right after the batch was created: its id journaled, no row written yet
        journal = run / "batches.jsonl"
        journal.write_bytes(b"".join(journal.read_bytes().splitlines(keepends=True)[:2]))
        (run / "results.jsonl").unlink()
        assert main(run_args(data, "ok-a", cfg, run, "--no-cache", "--max-cost", "0.0001")) == 0
        rs = rows(run)
        assert len(rs) == 5 and all(r["error"] is None and r["batch_id"] for r in rs)
        assert sum(srv.submissions.values()) == 5 and len(srv.batches) == 1 and srv.total == 0
        spend = _manifest(run)["spend"]["--max-cost"]
        assert spend["spent_usd"] == pytest.approx(paid) and spend["reached"] is False
    finally:
        srv.stop()
