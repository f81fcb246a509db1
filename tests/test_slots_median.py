"""#40: a concurrency-bound lane ranks its waiting calls by the median latency of their kind, not its mean:
one early long thought (a heavy tail's draw) does not put a model whose calls are quick ahead of a slower one
for the rest of the run, leaving the slower model's backlog for the lane's end. Against the local mock server,
whose latency per model is the test's law: the order its requests arrived in."""

from __future__ import annotations

from pathlib import Path

from cli.main import main
from tests.helpers import run_args, write_config, write_dataset
from tests.mock_openai import MockServer


def test_one_long_first_answer_does_not_rank_a_quick_model_ahead_of_a_slower_one(tmp_path: Path):
    srv = MockServer().start()
    # "no-n-a": its first answer a long thought, then quick (0.01 s); "no-n-b": every answer 0.05 s.
    # By mean, a stays ahead of b for 12 answers; by median, after its third.
    srv.latency_of = lambda model, prompt, before: (0.5 if before == 0 else 0.01) if model == "no-n-a" else 0.05
    try:
        cfg = write_config(
            tmp_path / "c.toml", srv.base_url, ["no-n-a", "no-n-b"],
            extra_endpoint="max_concurrency = 1\nsupports_n = false\n",
        )
        data = write_dataset(tmp_path / "d.jsonl", 1)
        args = run_args(data, "no-n-a,no-n-b", cfg, tmp_path / "r", "--samples", "8")
        assert main([*args, "--cache-dir", str(tmp_path / "cache")]) == 0
        order = "".join(m[-1] for _, m, _, _ in srv.arrivals)
        assert sorted(order) == ["a"] * 8 + ["b"] * 8
        # Each model's first call alone (its gate): a's long one, then b's; a few of a's while neither has
        # the answers to rank by, then b's backlog before a's quick rest. By mean (0.17 s after a's third
        # answer), a's whole backlog went first and b's 7 calls were the lane's last.
        assert order.startswith("ab") and "b" * 7 + "a" * 3 in order and order.endswith("a" * 3), order
    finally:
        srv.stop()

