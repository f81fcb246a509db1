"""Profile-shaped bodies on the litellm path, checked on the wire at a real local server: a Gemini
thinking budget reaches Gemini's native API as generationConfig.thinkingConfig.thinkingBudget (not a
top-level `google` field, which generateContent refuses)."""

from __future__ import annotations

import asyncio
from pathlib import Path
from typing import Any

from aiohttp import web

from core.types import Request, user
from runner.config import load_config
from runner.pool import build_models, close_models


def test_gemini_thinking_budget_through_litellm(tmp_path: Path) -> None:
    seen: list[dict[str, Any]] = []

    async def generate(request: web.Request) -> web.Response:
        seen.append(await request.json())
        return web.json_response({
            "candidates": [{"content": {"parts": [{"text": "B"}], "role": "model"}, "finishReason": "STOP"}],
            "usageMetadata": {"promptTokenCount": 3, "candidatesTokenCount": 1, "totalTokenCount": 4},
        })

    async def go() -> str | None:
        app = web.Application()
        app.router.add_route("POST", "/{tail:.*}", generate)
        runner = web.AppRunner(app)
        await runner.setup()
        site = web.TCPSite(runner, "127.0.0.1", 0)
        await site.start()
        port = site._server.sockets[0].getsockname()[1]  # type: ignore[union-attr]
        cfg = tmp_path / "c.toml"
        cfg.write_text(
            f'[[endpoints]]\nname = "g"\nkind = "litellm"\nbase_url = "http://127.0.0.1:{port}"\n'
            '[[models]]\nname = "gem"\nendpoint = "g"\nmodel = "gemini/gemini-2.5-pro"\nthinking_budget = 2048\n'
        )
        models = build_models(load_config(cfg), ["gem"])
        m = models["gem"]
        req = Request(suite="s", item="i", messages=[user("2+2?")], decoding={"max_tokens": 100})
        try:
            comp = await m.lanes[0].provider.complete(req, m.model_id, 1, 0, "k", m.cfg.params, m.shape)
        finally:
            await close_models(models)
            await runner.cleanup()
        return comp.texts[0]

    assert asyncio.run(go()) == "B"
    body = seen[0]
    assert "google" not in body and "extra_body" not in body
    gen = body["generationConfig"]
    assert gen["thinkingConfig"]["thinkingBudget"] == 2048
    assert gen["max_output_tokens"] == 100 + 2048  # the answer budget plus the thinking budget


def test_grok_3_mini_effort_is_one_xai_takes(tmp_path: Path) -> None:
    """grok-3-mini takes reasoning_effort "low" or "high" only (docs.x.ai reasoning guide): never the
    "medium" default of OpenAI's models; grok-4 reasons but is sent no effort at all. On the wire."""
    from tests.mock_openai import MockServer

    srv = MockServer().start()
    try:
        cfg = tmp_path / "c.toml"
        cfg.write_text(
            f'[[endpoints]]\nname = "x"\nkind = "openai"\nbase_url = "{srv.base_url}"\n'
            '[[models]]\nname = "mini"\nendpoint = "x"\nmodel = "grok-3-mini"\n'
            '[[models]]\nname = "mini-med"\nendpoint = "x"\nmodel = "grok-3-mini-fast"\nreasoning_effort = "medium"\n'
            '[[models]]\nname = "g4"\nendpoint = "x"\nmodel = "grok-4"\n'
        )
        models = build_models(load_config(cfg), ["mini", "mini-med", "g4"])
        req = Request(suite="s", item="i", messages=[user("2+2?")], decoding={"max_tokens": 100})

        async def go() -> None:
            try:
                for m in models.values():
                    await m.lanes[0].provider.complete(req, m.model_id, 1, 0, None, m.cfg.params, m.shape)
            finally:
                await close_models(models)

        asyncio.run(go())
        sent = srv.last_body
    finally:
        srv.stop()
    assert sent["grok-3-mini"]["reasoning_effort"] == "low"
    assert sent["grok-3-mini-fast"]["reasoning_effort"] == "high"
    assert "reasoning_effort" not in sent["grok-4"]
    assert sent["grok-3-mini"]["max_tokens"] > 100  # the answer budget plus the reasoning budget


def test_minimal_effort_on_an_o_series_model_exits_2_before_sending(tmp_path: Path, capsys) -> None:
    from cli.main import main

    cfg = tmp_path / "c.toml"
    cfg.write_text('[[endpoints]]\nname = "o"\nkind = "openai"\nbase_url = "http://127.0.0.1:9/v1"\n'
                   '[[models]]\nname = "o3m"\nendpoint = "o"\nmodel = "o3-mini"\nreasoning_effort = "minimal"\n'
                   '[[models]]\nname = "g5"\nendpoint = "o"\nmodel = "gpt-5-mini"\nreasoning_effort = "minimal"\n')
    data = tmp_path / "d.jsonl"
    data.write_text('{"id": "1", "prompt": "hi", "choices": ["a", "b"], "answer": "A"}\n')
    args = ["run", f"jsonl:{data}", "--config", str(cfg), "--dry-run", "--keep-going"]
    assert main([*args, "--models", "o3m", "--out", str(tmp_path / "r1")]) == 2
    assert "model 'o3m': reasoning_effort = 'minimal'" in capsys.readouterr().err
    main([*args, "--models", "g5", "--out", str(tmp_path / "r2")])
    assert "reasoning_effort = 'minimal'" not in capsys.readouterr().err


def test_claude_thinking_keeps_top_p_only_in_anthropics_range() -> None:
    from core.types import Decoding
    from providers.anthropic import messages_body
    from providers.base import wire_body
    from providers.capabilities import resolve
    from providers.shape import shape_for
    from runner.config import ModelCfg

    s = shape_for(resolve(ModelCfg(name="c", model="claude-3-7-sonnet-20250219", thinking_budget=2048), "anthropic"))

    def req(tp: float) -> Request:
        return Request(suite="s", item="i", messages=[user("hi")], decoding=Decoding(temperature=0.0, max_tokens=500, top_p=tp))

    low, high = messages_body(req(0.9), "claude-3-7-sonnet-20250219", {}, s), messages_body(req(0.97), "m", {}, s)
    assert "top_p" not in low and "temperature" not in low and low["max_tokens"] == 2548
    assert high["top_p"] == 0.97
    via_litellm = wire_body(req(0.5), "anthropic/claude-3-7-sonnet-20250219", 1, {}, s)
    assert "top_p" not in via_litellm and via_litellm["thinking"]["budget_tokens"] == 2048
