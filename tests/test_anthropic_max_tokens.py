"""The native Anthropic provider never imposes a hidden cap: with max_tokens left open by the suite it sends
the model's maximum output (config `max_output_tokens`, else litellm's bundled map, else the smallest
Claude maximum), checked on the wire against the local mock Messages endpoint."""

from __future__ import annotations

import asyncio
from pathlib import Path

import pytest

from core.types import Request, user
from providers.anthropic import FALLBACK_MAX_TOKENS
from providers.pricing import map_entry
from runner.config import load_config
from runner.pool import build_models, close_models
from tests.mock_batch import MockBatchServer


@pytest.fixture
def mock():
    srv = MockBatchServer(delay_s=0.0).start()
    yield srv
    srv.stop()


def _req(max_tokens: int | None) -> Request:
    return Request(suite="s", item="i", messages=[user("Think step by step.")], decoding={"max_tokens": max_tokens})


def test_max_tokens_from_config_then_litellm_map_then_fallback(tmp_path: Path, mock: MockBatchServer) -> None:
    cfg = tmp_path / "c.toml"
    cfg.write_text(
        f'[[endpoints]]\nname = "claude"\nkind = "anthropic"\nbase_url = "{mock.base_url.removesuffix("/v1")}"\n'
        '[[models]]\nname = "configured"\nendpoint = "claude"\nmodel = "claude-sonnet-4-5"\nmax_output_tokens = 12345\n'
        '[[models]]\nname = "mapped"\nendpoint = "claude"\nmodel = "claude-haiku-4-5"\n'
        '[[models]]\nname = "unknown"\nendpoint = "claude"\nmodel = "claude-x"\n'
    )
    models = build_models(load_config(cfg), ["configured", "mapped", "unknown"])

    async def call(name: str, max_tokens: int | None) -> int:
        m = models[name]
        await m.lanes[0].provider.complete(_req(max_tokens), m.model_id, 1, 0, None, m.cfg.params)
        return mock.max_tokens[m.model_id]

    async def go() -> list[int]:
        try:
            return [
                await call("configured", None),
                await call("mapped", None),
                await call("unknown", None),
                await call("mapped", 777),  # a suite's own max_tokens is sent as is
            ]
        finally:
            await close_models(models)

    mapped = map_entry("claude-haiku-4-5")["max_output_tokens"]
    assert mapped > FALLBACK_MAX_TOKENS  # the model map's figure (64000 in litellm 1.8x), not the old 1024
    assert asyncio.run(go()) == [12345, mapped, FALLBACK_MAX_TOKENS, 777]


def test_max_output_tokens_must_be_positive(tmp_path: Path) -> None:
    from runner.config import ConfigError

    cfg = tmp_path / "c.toml"
    cfg.write_text('[[models]]\nname = "m"\nprovider = "sim"\nmax_output_tokens = 0\n')
    with pytest.raises(ConfigError, match="max_output_tokens"):
        load_config(cfg)


def test_vrb_sends_retired_claude_maximum_and_records_the_fallback(tmp_path: Path, mock: MockBatchServer) -> None:
    """VRB leaves max_tokens to each model's maximum (the reference sends 33,000): a retired Claude gets its
    documented maximum, not 4,096; a model whose maximum is unknown gets the fallback, recorded as a deviation."""
    import json

    from cli.main import main
    from suites.vrb.synthetic import write_dataset

    data = tmp_path / "vrb"
    write_dataset(data, {"zambia": 3})
    cfg = tmp_path / "c.toml"
    cfg.write_text(
        f'[[endpoints]]\nname = "claude"\nkind = "anthropic"\nbase_url = "{mock.base_url.removesuffix("/v1")}"\n'
        '[[models]]\nname = "sonnet35"\nendpoint = "claude"\nmodel = "claude-3-5-sonnet-20241022"\n'
        '[[models]]\nname = "unknown"\nendpoint = "claude"\nmodel = "claude-x"\n'
    )
    out = tmp_path / "run"
    args = ["run", "vrb", "--models", "sonnet35,unknown", "--data-dir", str(data), "--out", str(out)]
    assert main([*args, "--config", str(cfg), "--no-live"]) == 0
    assert mock.max_tokens == {"claude-3-5-sonnet-20241022": 8192, "claude-x": FALLBACK_MAX_TOKENS}
    devs = json.loads((out / "manifest.json").read_text())["model_deviations"]
    assert devs == [
        "unknown: max_tokens 4,096 (its maximum output is unknown: set max_output_tokens in the config; the "
        "paper's code: 33,000)"
    ]
