"""The ceiling holds by construction (#39): a stream cut mid-answer is charged what it consumed (its
prompt and the output received), never $0 (before: 100 cut streams under --max-cost 10 billed $112.90
while the run said $0.00); its row says how it was cut and how long it took."""

from __future__ import annotations

from pathlib import Path

import pytest

from cli.main import main
from tests.helpers import rows, run_args, write_config, write_dataset
from tests.mock_openai import MockServer


@pytest.fixture
def mock():
    srv = MockServer().start()
    yield srv
    srv.stop()


def test_cut_streams_are_charged_and_the_ceiling_stops_them(tmp_path: Path, mock: MockServer):
    data = write_dataset(tmp_path / "d.jsonl", 40, prefix="Explain at length [[stream:cut]] question")
    cfg = write_config(tmp_path / "c.toml", mock.base_url, ["ok-a"],
                       extra_endpoint="stream_above_tokens = 0\nmax_concurrency = 2\n")
    out = tmp_path / "run"
    ceiling = 0.002
    code = main(run_args(data, "ok-a", cfg, out, "--max-tokens", "50", "--max-cost", str(ceiling)))
    got = rows(out)
    cut = [r for r in got if r.get("finish_reason") == "partial"]
    skipped = [r for r in got if r.get("error_kind") == "skipped"]
    assert cut and all(r["cost_usd"] and r["cost_usd"] > 0 for r in cut)  # before: None, counted $0
    assert all("stream cut before its end: connection dropped" in r["error"] for r in cut)  # the cause, on the row
    assert all(r["latency_s"] > 0 for r in cut)  # before: 0.0
    assert sum(r["cost_usd"] for r in cut) <= ceiling
    assert skipped and all("--max-cost" in r["error"] for r in skipped) and code != 0
    assert mock.total == len(cut) < 40  # nothing sent beyond the ceiling; before: all 40
