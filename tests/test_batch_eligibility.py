"""Which endpoints batch (only those whose provider has a batch API we implement, whatever their kind),
and models served only on the Responses API batched as `/v1/responses` lines against the mock batch
server on 127.0.0.1: same answers as live at the batch price, a failed item going live once."""

from __future__ import annotations

import json
from pathlib import Path

import orjson
import pytest

from cli.main import main
from runner.batch.plan import has_batch_api
from runner.config import ConfigError, Endpoint, load_config
from suites.jsonl import prompt_of
from tests.helpers import rows, run_args, write_config, write_dataset
from tests.mock_batch import MockBatchServer

FAST = "batch_poll_s = 0.05\nbatch_idle_s = 0.05\nretry_initial_s = 0.01\nretry_max_s = 0.05\n"


@pytest.fixture
def mock():
    srv = MockBatchServer(delay_s=0.1).start()
    yield srv
    srv.stop()


@pytest.mark.parametrize(
    ("kind", "base_url", "extra", "batched"),
    [
        ("openai", "https://api.openai.com/v1", {}, True),
        ("anthropic", None, {}, True),  # the native API's default host
        ("anthropic", "https://api.anthropic.com", {}, True),
        ("openai", "https://api.deepseek.com/v1", {}, False),  # chat API, no batch API
        ("openai", "https://api.x.ai/v1", {}, False),
        ("openai", "http://10.0.0.5:8000/v1", {}, False),  # vLLM
        ("openai", "https://myproxy.lab/v1", {"batch_api": True}, True),  # said by the config
        ("openai", "https://my.openai.azure.com/v1", {"batch": True}, True),
        ("openai", "https://api.openai.com/v1", {"batch": False}, False),
        ("litellm", None, {}, False),
    ],
)
def test_an_endpoint_batches_only_where_its_provider_has_a_batch_api(kind, base_url, extra, batched):
    assert has_batch_api(Endpoint(name="e", kind=kind, base_url=base_url, **extra)) is batched


def test_batch_api_needs_a_kind_we_batch(tmp_path: Path):
    cfg = tmp_path / "c.toml"
    cfg.write_text('[[endpoints]]\nname = "l"\nkind = "litellm"\nbatch_api = true\n')
    with pytest.raises(ConfigError, match=r"batch_api = true needs kind 'openai' or 'anthropic'"):
        load_config(cfg)


def test_batch_on_sends_an_endpoint_without_a_batch_api_live(tmp_path: Path, mock: MockBatchServer):
    """A vLLM-like server of kind openai (127.0.0.1, nothing in its config): live calls, no batch tried."""
    data = write_dataset(tmp_path / "d.jsonl", 5)
    cfg = write_config(tmp_path / "c.toml", mock.base_url, ["ok-a"], extra_endpoint=FAST)
    out = tmp_path / "run"
    assert main(run_args(data, "ok-a", cfg, out, "--no-cache", "--batch", "on")) == 0
    assert mock.total == 5 and not mock.uploads and not (out / "batches.jsonl").exists()
    assert "batch" not in json.loads((out / "manifest.json").read_text())


def _responses_config(path: Path, base: str, extra: str = "") -> Path:
    path.write_text(
        f'[[endpoints]]\nname = "oai"\nkind = "openai"\nbase_url = "{base}"\n{FAST}{extra}\n'
        '[[models]]\nname = "pro"\nendpoint = "oai"\nmodel = "gpt-5-pro"\nprice_in = 15.0\nprice_out = 120.0\n'
    )
    return path


def test_responses_only_model_goes_through_the_batch_api(tmp_path: Path, mock: MockBatchServer):
    data = write_dataset(tmp_path / "d.jsonl", 6)
    prompts = {d["id"]: prompt_of(d) for d in map(orjson.loads, data.read_bytes().splitlines())}
    live = tmp_path / "live"
    cfg = _responses_config(tmp_path / "l.toml", mock.base_url)
    assert main(run_args(data, "pro", cfg, live, "--no-cache")) == 0
    assert mock.total == 6 and not mock.uploads and "input" in mock.last_body["gpt-5-pro"]  # live /v1/responses

    mock.total = 0
    mock.prompts.clear()
    mock.outcome = lambda p: "expired" if p.startswith("Question 3:") else "ok"
    run = tmp_path / "batch"
    cfg = _responses_config(tmp_path / "b.toml", mock.base_url, "batch = true\n")
    assert main(run_args(data, "pro", cfg, run, "--no-cache")) == 0
    (up,) = mock.uploads
    assert up["lines"] == 6 and up["models"] == {"gpt-5-pro"}  # one request per sample, one file
    (b,) = mock.batches.values()
    assert b["url"] == "/v1/responses" and all("max_output_tokens" in body for _, body in b["reqs"])
    assert all(body["reasoning"] == {"effort": "high"} for _, body in b["reqs"])  # gpt-5-pro takes only high
    lv = {r["item"]: r for r in rows(live)}
    for r in rows(run):
        assert r["error"] is None and r["text"] == lv[r["item"]]["text"]
        assert r["usage"]["reasoning_tokens"] == lv[r["item"]]["usage"]["reasoning_tokens"] == 4
        if r["item"] == "q3":  # expired in the batch: one live Responses call, at the live price
            assert r["batch_fallback"] and "batch_id" not in r and r["cost_usd"] == lv["q3"]["cost_usd"]
        else:
            assert r["batch_id"] and r["cost_usd"] == pytest.approx(0.5 * lv[r["item"]]["cost_usd"])
    assert mock.total == 1 and mock.prompts[prompts["q3"]] == 1  # only the expired item went live
