"""Capability profiles, request shaping, usage as billed and prices: hand-made cases for each rule, and
the providers' own published response bodies through our parsers."""

from __future__ import annotations

import json
from pathlib import Path

import orjson
import pytest

from cli.main import main
from core.types import Decoding, Request, user
from providers.anthropic import max_output_tokens, messages_body
from providers.base import wire_body
from providers.capabilities import problems, resolve
from providers.parse import anthropic_message, openai_chat
from providers.pricing import Prices, resolve_prices
from providers.responses import parse_responses, responses_body
from providers.shape import departures, key_params, shape_for
from runner.config import ModelCfg
from runner.rows import billed, exhausted

BODIES = Path(__file__).parent / "data" / "provider_bodies"


def _m(model: str, **kw: object) -> ModelCfg:
    return ModelCfg(name=kw.pop("name", model), model=model, **kw)  # type: ignore[arg-type]


def _req(max_tokens: int | None = 1024, top_p: float | None = None) -> Request:
    return Request(suite="t", item="1", messages=[user("2+2?")],
                   decoding=Decoding(temperature=0.0, max_tokens=max_tokens, top_p=top_p))


def test_profiles_come_from_the_config_then_litellm_map_then_family_rules():
    o3 = resolve(_m("o3"), "openai")
    assert (o3.family, o3.limit_field, o3.reasoning, o3.effort) == ("openai-reasoning", "max_completion_tokens", True, "medium")
    assert "temperature" not in o3.sampling and o3.sources["reasoning"] == "litellm map"
    assert (o3.max_output_tokens, o3.context_window) == (100000, 200000)
    future = resolve(_m("o4-mini-2027-01-01"), "openai")  # not in the map: the family rule
    assert future.reasoning and future.sources["reasoning"] == "family rule" and future.max_output_tokens is None
    assert resolve(_m("gpt-5-codex"), "openai").api == "responses"
    assert resolve(_m("gpt-5-codex", api="chat"), "openai").sources["api"] == "config"
    plain = resolve(_m("gpt-4o"), "openai")
    assert not plain.reasoning and plain.limit_field == "max_tokens" and shape_for(plain).trivial
    assert resolve(_m("gpt-4o", context_window=1000), "openai").context_window == 1000
    local = resolve(_m("meta-llama/Llama-3.3-70B-Instruct"), "openai")
    assert local.family == "other" and local.sources["reasoning"] == "default"


def test_claude_thinks_only_when_asked_and_its_rules_are_checked_before_the_run():
    plain = resolve(_m("claude-sonnet-4-5"), "anthropic")
    assert plain.reasoning and not plain.thinks and plain.exclusive_sampling and "temperature" in plain.sampling
    t = resolve(_m("claude-sonnet-4-5", thinking_budget=8000), "anthropic")
    assert t.thinks and t.reasoning_budget == 8000 and "temperature" not in t.sampling
    assert resolve(_m("claude-opus-4-5", reasoning_effort="low"), "anthropic").reasoning_budget == 4096
    assert not resolve(_m("claude-3-5-haiku-20241022", thinking_budget=2000), "anthropic").thinks
    assert problems(resolve(_m("claude-sonnet-4-5", thinking_budget=500), "anthropic"), "c") == [
        "model 'c': thinking_budget = 500 is below Anthropic's minimum of 1024 tokens"]
    (msg,) = problems(resolve(_m("claude-sonnet-4-5", thinking_budget=64000), "anthropic"), "c")
    assert "must be below the model's max_output_tokens (64000)" in msg


def test_a_request_the_provider_would_refuse_exits_2_naming_model_and_field(tmp_path: Path, capsys):
    cfg = tmp_path / "c.toml"
    cfg.write_text('[[endpoints]]\nname = "a"\nkind = "anthropic"\n[[models]]\nname = "claude"\nendpoint = "a"\n'
                   'model = "claude-sonnet-4-5"\nthinking_budget = 100\n')
    data = tmp_path / "d.jsonl"
    data.write_text('{"id": "1", "prompt": "hi", "choices": ["a", "b"], "answer": "A"}\n')
    code = main(["run", f"jsonl:{data}", "--models", "claude", "--config", str(cfg), "--out", str(tmp_path / "r"),
                 "--dry-run", "--keep-going"])
    err = capsys.readouterr().err
    assert code == 2 and "model 'claude': thinking_budget = 100" in err


def test_bodies_are_shaped_by_the_profile():
    o3 = shape_for(resolve(_m("o3"), "openai"))
    b = wire_body(_req(), "o3", 1, {}, o3)
    assert b["max_completion_tokens"] == 1024 + 16384 and "max_tokens" not in b and "temperature" not in b
    assert b["reasoning_effort"] == "medium"
    assert wire_body(_req(), "o3", 1, {"reasoning_effort": "low"}, o3)["reasoning_effort"] == "low"  # params win
    assert "max_completion_tokens" not in wire_body(_req(None), "o3", 1, {}, o3)  # the suite left it open
    hi = shape_for(resolve(_m("o3", reasoning_effort="high"), "openai"))
    assert wire_body(_req(), "o3", 1, {}, hi)["max_completion_tokens"] == 1024 + 32768
    capped = shape_for(resolve(_m("o3", thinking_budget=200_000), "openai"))
    assert wire_body(_req(), "o3", 1, {}, capped)["max_completion_tokens"] == 100000  # the model's maximum
    c = shape_for(resolve(_m("claude-sonnet-4-5", thinking_budget=8000), "anthropic"))
    mb = messages_body(_req(), "claude-sonnet-4-5", {}, c)
    assert mb["thinking"] == {"type": "enabled", "budget_tokens": 8000} and mb["max_tokens"] == 9024
    assert "temperature" not in mb
    # the suite left the answer open: the model's maximum (64,000 from the map, unless a config set it)
    assert messages_body(_req(None), "claude-sonnet-4-5", {}, c)["max_tokens"] == max(
        max_output_tokens("claude-sonnet-4-5"), 8000 + 4096)
    c45 = shape_for(resolve(_m("claude-haiku-4-5"), "anthropic"))
    both = messages_body(_req(top_p=0.9), "claude-haiku-4-5", {}, c45)
    assert "temperature" in both and "top_p" not in both
    g = shape_for(resolve(_m("gemini/gemini-2.5-pro", thinking_budget=2048), "openai"))
    gb = wire_body(_req(), "gemini-2.5-pro", 1, {}, g)
    assert gb["extra_body"] == {"google": {"thinking_config": {"thinking_budget": 2048}}} and gb["max_tokens"] == 3072
    assert "reasoning_effort" not in gb
    ge = wire_body(_req(), "gemini-2.5-pro", 1, {}, shape_for(resolve(_m("gemini/gemini-2.5-pro"), "openai")))
    # Gemini 2.5 Pro keeps its dynamic thinking (no effort sent), with room for it in the limit
    assert "reasoning_effort" not in ge and "extra_body" not in ge and ge["max_tokens"] == 1024 + 32768
    d = shape_for(resolve(_m("deepseek-reasoner"), "openai"))
    db = wire_body(_req(), "deepseek-reasoner", 1, {}, d)
    assert "temperature" not in db and db["max_tokens"] == 1024 + 16384
    r = shape_for(resolve(_m("gpt-5-codex"), "openai"))
    rb = responses_body(_req(), "gpt-5-codex", {}, r)
    assert rb["max_output_tokens"] == 1024 + 16384 and rb["reasoning"] == {"effort": "medium"}
    assert "temperature" not in rb and rb["input"][0]["content"][0] == {"type": "input_text", "text": "2+2?"}


def test_shaped_models_are_keyed_apart_and_their_departures_recorded():
    o3 = shape_for(resolve(_m("o3"), "openai"))
    assert key_params({}, o3) != key_params({}, shape_for(resolve(_m("o3", reasoning_effort="high"), "openai")))
    plain = shape_for(resolve(_m("gpt-4o"), "openai"))
    assert key_params({"x": 1}, plain) == {"x": 1}  # models sent as before keep their cache entries
    dev = departures("o3", o3)
    assert dev[0] == "o3: temperature not sent (the model takes only its provider's default)"
    assert "answer budget + 16,384 reasoning tokens (max_completion_tokens, capped at 100,000)" in dev[1]
    assert departures("gpt-4o", None) == []


def test_usage_of_each_providers_shape_as_billed():
    c = openai_chat({"choices": [{"message": {"content": "A"}, "finish_reason": "stop"}],
                     "usage": {"prompt_tokens": 100, "completion_tokens": 50, "cost": 0.0123,
                               "prompt_tokens_details": {"cached_tokens": 60},
                               "completion_tokens_details": {"reasoning_tokens": 30}}}, 1)
    assert (c.input_tokens, c.cached_input_tokens, c.output_tokens, c.reasoning_tokens) == (100, 60, 50, 30)
    assert c.reported_cost == 0.0123
    a = anthropic_message({"content": [{"type": "thinking", "thinking": "..."}, {"type": "text", "text": "B"}],
                           "stop_reason": "end_turn",
                           "usage": {"input_tokens": 10, "cache_read_input_tokens": 80,
                                     "cache_creation_input_tokens": 5, "output_tokens": 40}})
    assert (a.texts, a.input_tokens, a.cached_input_tokens, a.cache_write_tokens) == (["B"], 95, 80, 5)
    (u,) = billed(a, a.texts)
    assert u == {"input_tokens": 95, "output_tokens": 40, "cached_input_tokens": 80, "cache_write_tokens": 5,
                 "reasoning_tokens": None}
    two = billed(c, ["A", "AAA"])  # n = 2: input halves, output and reasoning by text length
    assert [x["input_tokens"] for x in two] == [50, 50] and sum(x["reasoning_tokens"] for x in two) == 30


def test_the_providers_published_bodies_parse():
    for p in sorted(BODIES.glob("chat_*.json")):
        body = json.loads(p.read_text())
        c = openai_chat(body, 1)
        assert c.texts[0] == body["choices"][0]["message"]["content"] and c.input_tokens == body["usage"]["prompt_tokens"]
        assert c.reasoning_tokens == body["usage"]["completion_tokens_details"]["reasoning_tokens"]
    r = parse_responses((BODIES / "responses_reasoning.json").read_bytes())
    assert r.texts[0] and r.finish_reasons == ["stop"]
    assert (r.input_tokens, r.output_tokens, r.reasoning_tokens, r.cached_input_tokens) == (81, 1035, 832, 0)
    t = parse_responses((BODIES / "responses_text_input.json").read_bytes())
    assert t.texts[0].startswith("In a peaceful grove") or t.texts[0]


def test_an_incomplete_response_is_reasoning_exhausted_for_a_reasoning_model_only():
    body = {"status": "incomplete", "incomplete_details": {"reason": "max_output_tokens"},
            "output": [{"type": "reasoning", "summary": []}],
            "usage": {"input_tokens": 10, "output_tokens": 500, "output_tokens_details": {"reasoning_tokens": 500}}}
    c = parse_responses(orjson.dumps(body))
    assert c.texts == [None] and c.finish_reasons == ["length"] and c.reasoning_tokens == 500
    assert exhausted(None, "length", True) and exhausted("  ", "max_tokens", True)
    assert not exhausted(None, "length", False) and not exhausted("A", "length", True)
    assert not exhausted("", "stop", True)


def test_costs_by_hand():
    p = Prices(2.0, 8.0, 0.5, 2.5, "config")
    # 1000 input of which 600 cached and 100 written, 300 output (reasoning included)
    assert p.cost(1000, 300, 600, 100) == pytest.approx((300 * 2.0 + 600 * 0.5 + 100 * 2.5 + 300 * 8.0) / 1e6)
    assert Prices(2.0, 8.0).cost(1000, 300, 600) == pytest.approx((1000 * 2.0 + 300 * 8.0) / 1e6)  # cache as input
    assert Prices(None, 8.0).cost(1000, 300) is None and p.cost(None, 300) is None
    assert resolve_prices(_m("gpt-4o", price_in=1.0, price_out=2.0)).source == "config"
    g = resolve_prices(_m("gpt-5"))
    assert g.source.startswith("genai-prices") and (g.price_in, g.price_out, g.cache_read) == (1.25, 10.0, 0.125)
    unknown = resolve_prices(_m("my-own-model-7b"))
    assert unknown.source == "unknown" and unknown.cost(10, 10) is None
    half = resolve_prices(_m("my-own-model-7b", price_in=1.0))
    assert half.price_out is None and half.cost(10, 10) is None  # never 0


def test_an_image_over_the_providers_size_limit_is_refused_before_sending(tmp_path: Path):
    big = tmp_path / "big.png"
    big.write_bytes(b"\x89PNG" + b"\0" * (6 * 2**20))
    req = Request(suite="t", item="7", messages=[user("look", big)])
    with pytest.raises(ValueError, match=r"6\.0 MB is over Anthropic's 5 MB per-image limit"):
        messages_body(req, "claude-sonnet-4-5", {})
    assert wire_body(req, "gpt-4o", 1, {})["messages"][0]["content"][1]["type"] == "image_url"  # 20 MB for OpenAI


def test_an_empty_system_message_is_not_sent_to_anthropic():
    """JEEBench sends its authors' empty system message; Anthropic refuses empty text, and no `system`
    is what an empty one means."""
    from core.types import Decoding, Message, Request

    msgs = [Message(role="system", content=""), Message(role="user", content="q")]
    req = Request(suite="t", item="i", messages=msgs, decoding=Decoding(max_tokens=16))
    assert "system" not in messages_body(req, "claude-sonnet-4-5", {})
    req2 = req.model_copy(update={"messages": [Message(role="system", content="be brief"), msgs[1]]})
    assert messages_body(req2, "claude-sonnet-4-5", {})["system"] == "be brief"
