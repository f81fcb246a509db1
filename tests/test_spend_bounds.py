"""The ceiling holds by construction (#39): a stream cut mid-answer is charged what it consumed (its
prompt and the output received), never $0 (before: 100 cut streams under --max-cost 10 billed $112.90
while the run said $0.00); its row says how it was cut and how long it took."""

from __future__ import annotations

import re
from pathlib import Path

import pytest

from cli.main import main
from tests.helpers import rows, run_args, write_config, write_dataset
from tests.mock_openai import InflatedUsage, MockServer


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


class _Inflated(InflatedUsage):
    absurd = True


def test_inflated_usage_is_billed_flagged_once_and_sets_no_absurd_ceiling(tmp_path: Path, caplog, capsys):
    srv = _Inflated().start()
    try:
        data = write_dataset(tmp_path / "d.jsonl", 30)
        cfg = write_config(tmp_path / "c.toml", srv.base_url, ["ok-a"], extra_endpoint="max_concurrency = 1\n")
        out = tmp_path / "run"
        code = main(run_args(data, "ok-a", cfg, out, "--max-tokens", "50", "--max-cost", "0.05"))
        got = rows(out)
        flagged = [r for r in got if r.get("usage_flag")]
        assert flagged and all(r["cost_usd"] for r in flagged)  # billed as reported
        assert caplog.text.count("reports usage the request cannot explain") == 1  # said once for the model
        said = capsys.readouterr().err
        assert code == 5, said[-2000:]
        m = re.search(r"--max-cost (\S+)", said.split("Go on with a higher ceiling")[-1])
        assert m and float(m.group(1)) < 10, said[-800:]  # from the run's rate, not the $1,000 row
    finally:
        srv.stop()


def test_output_billed_past_the_limit_cannot_run_the_bill_past_the_ceiling(tmp_path: Path):
    """Every answer billed 3,000 output tokens for a 50-token limit, 4 calls in flight. Before: calls were
    reserved at their limit, so each let 60x its reservation out; the provider's bill passed the ceiling.
    Now the model's first answer (it goes alone) teaches its real worst case."""
    srv = _Inflated()
    srv.absurd = False
    srv.start()
    try:
        data = write_dataset(tmp_path / "d.jsonl", 40)
        cfg = write_config(tmp_path / "c.toml", srv.base_url, ["ok-a"], extra_endpoint="max_concurrency = 4\n")
        ceiling = 0.05
        code = main(run_args(data, "ok-a", cfg, tmp_path / "run", "--max-tokens", "50", "--max-cost", str(ceiling)))
        got = rows(tmp_path / "run")
        sent = [r for r in got if r.get("error_kind") != "skipped"]
        per_call = max(r["cost_usd"] for r in sent)  # what the provider bills a call, as it reports it
        assert code == 5 and len(sent) == srv.total and len(got) == 40
        assert srv.total * per_call <= ceiling  # the provider's bill, by its own usage
        assert srv.total >= int(ceiling / per_call) - 1  # and the ceiling is still used
    finally:
        srv.stop()
