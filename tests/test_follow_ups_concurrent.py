"""#40: the follow-ups of an n call's samples (cot-critique with --samples 3: one critique per sample)
run at once, not one critique's whole latency after another's. Against the local mock server: it records
how many calls of the model were in flight when each arrived."""

from __future__ import annotations

import json
from pathlib import Path

from cli.main import main
from tests.helpers import write_config
from tests.mock_openai import MockServer


def test_the_critiques_of_an_n_calls_samples_are_in_flight_together(tmp_path: Path):
    srv = MockServer(latency_s=0.3).start()
    try:
        cfg = write_config(tmp_path / "c.toml", srv.base_url, ["m"])
        out = tmp_path / "r"
        args = ["run", "jeebench", "--variant", "cot-critique", "--models", "m", "--limit", "2", "--samples", "3"]
        args += ["--config", str(cfg), "--out", str(out), "--cache-dir", str(tmp_path / "cache")]
        assert main([*args, "--no-live", "--no-score"]) == 0
        rs = [json.loads(line) for line in (out / "results.jsonl").read_text().splitlines()]
        assert sorted((r["pass"], r["sample"]) for r in rs if r["item"] == rs[0]["item"]) == [
            ("answer", 0), ("answer", 1), ("answer", 2), ("critique", 0), ("critique", 1), ("critique", 2)
        ]  # fmt: skip
        critiques = [a for a in srv.arrivals if a[3] == 1]
        assert len(critiques) == 6  # (the answers: one n=3 call per item)
        # One after another, every critique arrived alone beside at most the other item's chain (<= 2 in
        # flight); at once, an item's three critiques are in flight together.
        assert max(flying for _, _, flying in srv.seen_on_arrival) >= 3, srv.seen_on_arrival
    finally:
        srv.stop()
