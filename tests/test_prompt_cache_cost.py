"""Cost reporting of the providers' prompt caches (issue #29 part 3): per model, the share of input read
from cache, the tokens written, and the USD saved against no caching, in scores.json, the report's cost
table (leaderboard.csv) and the live view's cost cell; against the provider-contract mock on 127.0.0.1,
whose Anthropic answers read half of each prompt from the cache and write 8 tokens to it."""

from __future__ import annotations

import csv
import json
from pathlib import Path

import pytest

from cli.live import cost_cell
from cli.main import main
from providers.pricing import Prices
from runner.prompt_cache import PromptCache
from tests.helpers import rows, run_args, write_dataset
from tests.mock_contract import ContractServer

PRICES = {"price_in": 3.0, "price_out": 15.0, "price_cache_read": 0.3, "price_cache_write": 3.75}


@pytest.fixture
def contract():
    srv = ContractServer().start()
    yield srv
    srv.stop()


def test_scores_and_report_say_what_the_prompt_cache_read_wrote_and_saved(tmp_path: Path, contract: ContractServer):
    cfg = tmp_path / "c.toml"
    prices = "".join(f"{k} = {v}\n" for k, v in PRICES.items())
    cfg.write_text(
        f'[[endpoints]]\nname = "claude"\nkind = "anthropic"\nbase_url = "http://127.0.0.1:{contract.port}"\n'
        f'[[models]]\nname = "claude"\nendpoint = "claude"\nmodel = "claude-sonnet-4-5"\n{prices}'
    )
    data = write_dataset(tmp_path / "d.jsonl", 6)
    run = tmp_path / "run"
    assert main(run_args(data, "claude", cfg, run, "--no-cache")) == 0
    rs = rows(run)
    ins = sum(r["usage"]["input_tokens"] for r in rs)
    cached = sum(r["usage"]["cached_input_tokens"] for r in rs)
    writes = sum(r["usage"]["cache_write_tokens"] for r in rs)
    assert cached and writes == 8 * 6
    # by hand: each cached token costs $0.30/M instead of $3/M, each written one $3.75/M instead of $3/M
    saved = (cached * (3.0 - 0.3) - writes * (3.75 - 3.0)) / 1e6
    uncached = sum((r["usage"]["input_tokens"] * 3.0 + r["usage"]["output_tokens"] * 15.0) / 1e6 for r in rs)
    assert uncached - sum(r["cost_usd"] for r in rs) == pytest.approx(saved)

    assert main(["score", str(run)]) == 0
    pc = json.loads((run / "scores.json").read_text())["models"]["claude"]["prompt_cache"]
    assert pc["input_tokens"] == ins and pc["cached_input_tokens"] == cached and pc["cache_write_tokens"] == writes
    assert pc["cached_share"] == pytest.approx(cached / ins) and pc["saved_usd"] == pytest.approx(saved, abs=1e-6)

    out = tmp_path / "report"
    assert main(["report", str(run), "--out", str(out)]) == 0
    (row,) = list(csv.DictReader((out / "leaderboard.csv").open()))
    assert float(row["cached_input_share"]) == pytest.approx(cached / ins)
    assert int(row["cache_write_tokens"]) == writes and float(row["cache_saved_usd"]) == pytest.approx(saved, abs=1e-6)
    assert "saved by caching" in (out / "index.html").read_text()


def test_a_batch_rows_saving_is_discounted_like_its_cost():
    p = Prices(3.0, 15.0, 0.3, 3.75, "config")
    usage = {"input_tokens": 1000, "cached_input_tokens": 600, "cache_write_tokens": 0, "output_tokens": 10}
    live, batch = PromptCache(), PromptCache()
    live.add({"usage": usage, "cost_usd": p.cost(1000, 10, 600, 0)}, p)
    batch.add({"usage": usage, "cost_usd": 0.5 * p.cost(1000, 10, 600, 0)}, p)
    assert live.saved_usd == pytest.approx(600 * 2.7 / 1e6) and batch.saved_usd == pytest.approx(live.saved_usd / 2)
    unknown = PromptCache()
    unknown.add({"usage": usage, "cost_usd": None}, Prices())
    assert unknown.fields()["saved_usd"] is None and unknown.fields()["cached_share"] == 0.6


def test_live_cost_cell_shows_the_share_of_input_from_cache():
    assert cost_cell({"cost": 1.2, "cached_in": 0.4}) == "$1.20 c40%"
    assert cost_cell({"cost": 1.2, "cached_in": 0.0}) == "$1.20"
