"""#40: a sweep's runs whose answers lead to follow-ups (answer -> critique chains) queue on a shared lane
ahead of the same model's single calls. Each kind of call (a model's pass) goes in arrival order, so a chain
run started after a single run had its answers behind the single run's, and its critiques (which cannot start
before their answer ends) at the lane's tail (bench/reasoning_sweep.py: the conc lane ended on a chain).
Against the local mock server: the order its requests arrived in."""

from __future__ import annotations

from pathlib import Path

from cli.main import main
from tests.helpers import write_config, write_dataset
from tests.mock_openai import MockServer


def test_a_chain_runs_answers_reach_the_lane_before_a_single_runs_calls(tmp_path: Path):
    srv = MockServer(latency_s=0.05).start()
    try:
        cfg = write_config(tmp_path / "c.toml", srv.base_url, ["m"], extra_endpoint="max_concurrency = 4\n")
        data = write_dataset(tmp_path / "one.jsonl", 8)
        sweep = tmp_path / "sweep.toml"
        sweep.write_text(  # the single run first in the file, as the bench writes it
            f'config = "{cfg}"\nout = "{tmp_path / "runs"}"\n'
            f'[[runs]]\nsuite = "jsonl:{data}"\nmodels = ["m"]\nout = "{tmp_path / "runs/one"}"\n'
            f'[[runs]]\nsuite = "jeebench"\nvariant = "cot-critique"\nlimit = 4\nmodels = ["m"]\n'
            f'out = "{tmp_path / "runs/chain"}"\n'
        )
        args = ["sweep", str(sweep), "--no-live", "--no-score", "--cache-dir", str(tmp_path / "cache")]
        assert main(args) == 0
        kinds = ["one" if p.startswith("Question ") else "chain" for _, _, p, _ in srv.arrivals]
        assert kinds.count("one") == 8 and kinds.count("chain") == 8  # (4 answers, 4 critiques)
        # The chain's 4 answers (its stream's window: the lane's concurrency) came first; before, the
        # single run's 4 did, and the chain's answers waited for them.
        assert kinds[:4] == ["chain"] * 4, kinds
    finally:
        srv.stop()
