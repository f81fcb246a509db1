"""Start-up overlaps the resume scans (issue 28), without paying any call twice: a later run's finished
rows are read while the first run's calls are out, one stream skips its finished rows while another
calls, and a resumed run's results.jsonl is read once. Observed through the order of events (the
first call vs a scan, hooked), never through timings."""

from __future__ import annotations

import threading
from collections import Counter
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import orjson
import pytest

import runner.results as results
import runner.rowindex as rowindex
import runner.rundir as rundir
import runner.scheduler as scheduler
from cli.main import main
from core.types import row_identity
from tests.helpers import run_args, write_config, write_dataset
from tests.mock_openai import MockServer

GUARD_S = 30.0
"""Only a guard against a hang: with start-up not overlapped, the hooked scan waits this long in vain."""


@pytest.fixture
def mock() -> Iterator[MockServer]:
    srv = MockServer().start()
    yield srv
    srv.stop()


def _sent(monkeypatch: pytest.MonkeyPatch) -> threading.Event:
    """Set when the scheduler hands its first call to a lane."""
    first = threading.Event()
    real = scheduler.send

    async def send(*a: Any, **k: Any) -> Any:
        first.set()
        return await real(*a, **k)

    monkeypatch.setattr(scheduler, "send", send)
    return first


def _rows(path: Path) -> list[dict[str, Any]]:
    return [orjson.loads(line) for line in path.read_bytes().splitlines()]


def _one_final_row_each(run: Path, models: list[str], n: int) -> None:
    ids = Counter(row_identity(r["model"], r["item"], r["sample"], r["pass"]) for r in _rows(run / "results.jsonl"))
    assert set(ids) == {row_identity(m, f"q{i}", 0, "answer") for m in models for i in range(n)}
    assert max(ids.values()) == 1  # no identity written twice: nothing finished was called again


def test_a_later_runs_finished_rows_are_read_while_the_first_run_calls(
    tmp_path: Path, mock: MockServer, monkeypatch: pytest.MonkeyPatch, capfd: pytest.CaptureFixture[str]
):
    cfg = write_config(tmp_path / "c.toml", mock.base_url, ["ok-a"])
    for k in (0, 1):
        write_dataset(tmp_path / f"d{k}.jsonl", 6, prefix=f"Run {k} question")

    def sweep(limit: int) -> Path:
        runs = "".join(
            f'[[runs]]\nsuite = "jsonl:{tmp_path / f"d{k}.jsonl"}"\nmodels = ["ok-a"]\nlimit = {limit}\n'
            f'out = "{tmp_path / f"r{k}"}"\n'
            for k in (0, 1)
        )
        (tmp_path / "sweep.toml").write_text(f'config = "{cfg}"\n{runs}')
        return tmp_path / "sweep.toml"

    assert main(["sweep", str(sweep(2)), "--no-live", "--no-score"]) == 0  # 2 of 6 rows done in each
    assert mock.total == 4
    first = _sent(monkeypatch)
    seen: list[bool] = []
    real = rowindex.index

    def index(path: Path, *a: Any) -> Any:
        if path.parent == tmp_path / "r1":  # the second run's scan waits for the sweep's first call
            seen.append(first.wait(GUARD_S))
        return real(path, *a)

    monkeypatch.setattr(rowindex, "index", index)
    monkeypatch.setattr(rundir, "index", index)
    capfd.readouterr()
    assert main(["sweep", str(sweep(6)), "--no-live", "--no-score"]) == 0
    assert seen == [True], "the second run was read before any call went out"
    err = capfd.readouterr().err
    for k in (0, 1):  # each run still says what it resumes, before its own first call
        assert f"[jsonl-d{k}] resuming: 2 of 6 rows already done, 0 cached, 4 to call" in err, err
        _one_final_row_each(tmp_path / f"r{k}", ["ok-a"], 6)
    assert mock.total == 12 and max(mock.prompts.values()) == 1


def test_one_stream_calls_while_the_others_still_skip_their_finished_rows(
    tmp_path: Path, mock: MockServer, monkeypatch: pytest.MonkeyPatch
):
    models = ["ok-a", "ok-b", "ok-c", "ok-d"]
    done, n = 1300, 1310  # ~10 chunks of finished requests per stream before its first call
    cfg = write_config(tmp_path / "c.toml", mock.base_url, models)
    data = write_dataset(tmp_path / "d.jsonl", n)
    out = tmp_path / "run"
    assert main(run_args(data, ",".join(models), cfg, out, "--limit", "1")) == 0
    with (out / "results.jsonl").open("ab") as f:  # as if an earlier run had finished `done` rows
        for m in models:
            for i in range(1, done):
                f.write(orjson.dumps({"model": m, "item": f"q{i}", "sample": 0, "pass": "answer", "error": None,
                                      "text": "The answer is A.", "usage": {}, "cached": False}) + b"\n")  # fmt: skip
    runs: list[Any] = []
    real_run = scheduler.Scheduler.run

    async def run(self: scheduler.Scheduler, rs: list[Any]) -> None:
        runs.extend(rs)
        await real_run(self, rs)

    resumed_then: list[int] = []
    real_send = scheduler.send

    async def send(*a: Any, **k: Any) -> Any:
        if not resumed_then:
            resumed_then.append(sum(st.resumed for r in runs for st in r.stats.values()))
        return await real_send(*a, **k)

    monkeypatch.setattr(scheduler.Scheduler, "run", run)
    monkeypatch.setattr(scheduler, "send", send)
    before = mock.total
    assert main(run_args(data, ",".join(models), cfg, out)) == 0
    assert resumed_then and resumed_then[0] < len(models) * done, (
        f"every stream skipped its finished rows before the first call ({resumed_then})"
    )
    assert sum(st.resumed for r in runs for st in r.stats.values()) == len(models) * done
    _one_final_row_each(out, models, n)
    assert mock.total - before == len(models) * (n - done)


def test_a_resumed_runs_results_are_read_once(
    tmp_path: Path, mock: MockServer, monkeypatch: pytest.MonkeyPatch, capfd: pytest.CaptureFixture[str]
):
    cfg = write_config(tmp_path / "c.toml", mock.base_url, ["ok-a"])
    data = write_dataset(tmp_path / "d.jsonl", 10)
    out = tmp_path / "run"
    assert main(run_args(data, "ok-a", cfg, out, "--limit", "4")) == 0
    reads: Counter[Path] = Counter()
    real = results._lines

    def lines(path: Path, strict: bool = False) -> Any:
        reads[path] += 1
        return real(path, strict)

    monkeypatch.setattr(results, "_lines", lines)
    monkeypatch.setattr(rowindex, "_lines", lines)  # (the index reads through its own binding)
    capfd.readouterr()
    assert main(run_args(data, "ok-a", cfg, out)) == 0
    assert "resuming: 4 of 10 rows already done, 0 cached, 6 to call" in capfd.readouterr().err
    assert reads[out / "results.jsonl"] == 1, reads
    _one_final_row_each(out, ["ok-a"], 10)
