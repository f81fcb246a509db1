"""The rules of the models we know (issue #27, audit provider_rules.md): each case is a request a real
provider refused, a default it keeps, or a usage shape it bills, with the doc in providers/efforts.py,
providers/capabilities.py and providers/parse.py; and the contract mock refusing the bodies we used to
send, with the providers' published error bodies."""

from __future__ import annotations

import logging

import orjson
import pytest
import requests

from core.types import Decoding, Request, user
from providers.anthropic import messages_body
from providers.base import wire_body
from providers.capabilities import problems, resolve
from providers.parse import openai_chat
from providers.responses import responses_completion
from providers.shape import departures, shape_for
from runner.config import ModelCfg
from tests.mock_contract import ContractServer


def _m(model: str, **kw: object) -> ModelCfg:
    return ModelCfg(name=kw.pop("name", model), model=model, **kw)  # type: ignore[arg-type]


def _body(model: str, base_url: str | None = None, **kw: object) -> dict:
    p = resolve(_m(model, **kw), "openai", base_url)
    req = Request(suite="t", item="1", messages=[user("2+2?")], decoding=Decoding(temperature=0.0, max_tokens=1000))
    return wire_body(req, model, 1, {}, shape_for(p))


def test_openai_efforts_per_model():
    pro = resolve(_m("gpt-5-pro"), "openai")
    assert (pro.effort, pro.efforts, pro.api) == ("high", ("high",), "responses")  # map says minimal: wrong
    (msg,) = problems(resolve(_m("gpt-5-pro", reasoning_effort="medium"), "openai"), "p")
    assert "reasoning_effort = 'medium' is refused by gpt-5-pro: it takes high" in msg
    g51 = resolve(_m("gpt-5.1"), "openai")  # default none: no effort sent, no reasoning, no headroom
    assert (g51.effort, g51.thinks, g51.reasoning_budget, g51.default_effort) == (None, False, 0, "none")
    assert "reasoning_effort" not in _body("gpt-5.1") and _body("gpt-5.1")["max_completion_tokens"] == 1000
    budget_only = resolve(_m("gpt-5.1", thinking_budget=8192), "openai")
    assert (budget_only.effort, budget_only.thinks, budget_only.reasoning_budget) == ("medium", True, 8192)
    assert _body("gpt-5.1", thinking_budget=2000)["reasoning_effort"] == "low"
    dev = departures("g", shape_for(budget_only))
    assert any("reasons (medium)" in d and "+ 8,192 reasoning tokens" in d for d in dev)
    for model in ("gpt-5.1", "gpt-5-codex", "gpt-5.1-codex", "o3"):
        (msg,) = problems(resolve(_m(model, reasoning_effort="minimal"), "openai"), "m")
        assert f"'minimal' is refused by {model}" in msg, msg
    assert problems(resolve(_m("gpt-5-mini", reasoning_effort="minimal"), "openai"), "m") == []
    assert resolve(_m("gpt-5.1", reasoning_effort="none"), "openai").effort == "none"
    assert _body("gpt-5.1", reasoning_effort="none")["reasoning_effort"] == "none"
    assert problems(resolve(_m("gpt-5.2", reasoning_effort="xhigh"), "openai"), "m") == []
    assert _body("gpt-5.2", reasoning_effort="xhigh")["max_completion_tokens"] == 1000 + 65536
    assert problems(resolve(_m("gpt-5", reasoning_effort="xhigh"), "openai"), "m")
    assert problems(resolve(_m("o3", reasoning_effort="none"), "openai"), "m")


def test_gpt_5_chat_is_a_chat_model():
    p = resolve(_m("gpt-5-chat-latest"), "openai")
    assert (p.family, p.reasoning, p.thinks, p.effort) == ("openai", False, False, None)
    b = _body("gpt-5-chat-latest")
    assert "reasoning_effort" not in b and b["temperature"] == 0.0 and b["max_completion_tokens"] == 1000


def test_gemini_keeps_its_defaults():
    g3 = resolve(_m("gemini-3-pro-preview"), "openai")
    assert g3.thinks and g3.effort is None and g3.efforts == ("low", "high") and g3.temperature_caution
    b = _body("gemini-3-pro-preview")
    assert "reasoning_effort" not in b and b["temperature"] == 0.0 and b["max_tokens"] == 1000 + 32768
    assert _body("gemini-3-pro-preview", reasoning_effort="medium")["reasoning_effort"] == "high"  # nearest
    assert _body("gemini-3-pro-preview", reasoning_effort="minimal")["reasoning_effort"] == "low"
    assert problems(resolve(_m("gemini-3-pro-preview", reasoning_effort="none"), "openai"), "g")
    assert problems(resolve(_m("gemini-2.5-pro", reasoning_effort="none"), "openai"), "g")  # cannot switch off
    lite = resolve(_m("gemini-2.5-flash-lite"), "openai")
    assert lite.reasoning and not lite.thinks and _body("gemini-2.5-flash-lite") == {
        "model": "gemini-2.5-flash-lite", "messages": [{"role": "user", "content": "2+2?"}],
        "temperature": 0.0, "max_tokens": 1000}
    assert resolve(_m("gemini-2.5-flash-lite", reasoning_effort="low"), "openai").thinks
    assert _body("gemini-2.5-flash", reasoning_effort="none")["reasoning_effort"] == "none"
    assert resolve(_m("gemini-2.0-flash"), "openai").temperature_caution is None


def test_opus_4_1_takes_temperature_or_top_p():
    s = shape_for(resolve(_m("claude-opus-4-1-20250805"), "anthropic"))
    req = Request(suite="t", item="1", messages=[user("hi")], decoding=Decoding(temperature=0.5, top_p=0.9, max_tokens=9))
    b = messages_body(req, "claude-opus-4-1-20250805", {}, s)
    assert b["temperature"] == 0.5 and "top_p" not in b
    assert "Opus 4.1" in departures("o", s)[-1]
    assert not resolve(_m("claude-opus-4-20250514"), "anthropic").exclusive_sampling


def test_openrouter_gets_its_reasoning_object():
    url = "https://openrouter.ai/api/v1"
    b = _body("openai/o3", url, reasoning_effort="high")
    assert b["reasoning"] == {"effort": "high"} and "reasoning_effort" not in b and b["max_tokens"] == 1000 + 32768
    c = _body("anthropic/claude-sonnet-4.5", url, thinking_budget=4096)
    assert c["reasoning"] == {"max_tokens": 4096} and "thinking" not in c and "temperature" not in c
    assert "reasoning" not in _body("anthropic/claude-sonnet-4.5", url)  # Claude thinks only when asked
    assert _body("openai/o3", "https://api.openai.com/v1")["reasoning_effort"] == "medium"


def test_hybrid_thinking_open_models():
    q = resolve(_m("Qwen/Qwen3-235B-A22B"), "openai")
    assert q.thinks and q.reasoning_form == "qwen3" and _body("Qwen/Qwen3-8B")["max_tokens"] == 1000 + 16384
    off = _body("Qwen/Qwen3-8B", reasoning_effort="none")
    assert off["chat_template_kwargs"] == {"enable_thinking": False} and off["max_tokens"] == 1000
    assert not resolve(_m("Qwen/Qwen3-235B-A22B-Instruct-2507"), "openai").reasoning
    t = resolve(_m("Qwen/Qwen3-235B-A22B-Thinking-2507"), "openai")
    assert t.thinks and t.reasoning_form is None
    assert resolve(_m("mistralai/Magistral-Small-2509"), "openai").thinks
    assert not resolve(_m("meta-llama/Llama-3.3-70B-Instruct"), "openai").reasoning
    # no effort field, but the config still sizes the room for its reasoning; it cannot be switched off
    assert _body("deepseek-reasoner", reasoning_effort="high")["max_tokens"] == 1000 + 32768
    assert "always reasons" in problems(resolve(_m("deepseek-reasoner", reasoning_effort="none"), "openai"), "d")[0]


def _chat(usage: dict, model: str = "m") -> dict:
    return {"model": model, "choices": [{"message": {"content": "A"}, "finish_reason": "stop"}], "usage": usage}


def test_usage_as_each_provider_bills_it(caplog: pytest.LogCaptureFixture):
    # xAI: reasoning outside completion_tokens, inside total_tokens, billed as output; no warning
    with caplog.at_level(logging.WARNING, logger="evalsweep"):
        x = openai_chat(_chat({"prompt_tokens": 10, "completion_tokens": 5, "total_tokens": 115,
                               "completion_tokens_details": {"reasoning_tokens": 100},
                               "cost_in_usd_ticks": 12_500_000}, "grok-4-0709"), 1)
    assert (x.output_tokens, x.reasoning_tokens, x.reported_cost) == (105, 100, 0.00125) and not caplog.records
    d = openai_chat(_chat({"prompt_tokens": 100, "completion_tokens": 5, "total_tokens": 105,
                           "prompt_cache_hit_tokens": 60, "prompt_cache_miss_tokens": 40}), 1)
    assert (d.cached_input_tokens, d.output_tokens) == (60, 5)
    o = openai_chat(_chat({"prompt_tokens": 100, "completion_tokens": 5,
                           "prompt_tokens_details": {"cached_tokens": 10, "cache_write_tokens": 30}}), 1)
    assert (o.cached_input_tokens, o.cache_write_tokens) == (10, 30)
    # a total that does not add up: the surplus billed as output, one warning naming the model
    uneven = {"prompt_tokens": 10, "completion_tokens": 5, "total_tokens": 40}
    with caplog.at_level(logging.WARNING, logger="evalsweep"):
        u = openai_chat(_chat(uneven, "gemini-2.5-pro-x"), 1)
        openai_chat(_chat(uneven, "gemini-2.5-pro-x"), 1)
    assert u.output_tokens == 30
    (rec,) = [r for r in caplog.records if "does not add up" in r.getMessage()]
    assert "model gemini-2.5-pro-x" in rec.getMessage() and "25 tokens beyond are billed as output" in rec.getMessage()
    short = openai_chat(_chat({"prompt_tokens": 10, "completion_tokens": 5, "total_tokens": 12}, "short-m"), 1)
    assert short.output_tokens == 5  # fewer than the parts: billed as its parts
    r = responses_completion({"model": "gpt-5-pro", "status": "completed", "output": [
        {"type": "message", "content": [{"type": "output_text", "text": "B"}]}],
        "usage": {"input_tokens": 7, "output_tokens": 20, "total_tokens": 27,
                  "output_tokens_details": {"reasoning_tokens": 12}}})
    assert (r.output_tokens, r.reasoning_tokens) == (20, 12)


@pytest.fixture
def contract():
    srv = ContractServer().start()
    yield srv
    srv.stop()


def test_the_mock_refuses_what_we_used_to_send(contract: ContractServer):
    """The bodies the audit found refused on every call, sent to the contract mock: each gets the
    provider's 400 (so tests/test_lineup.py would have caught them)."""
    root = f"http://127.0.0.1:{contract.port}/v1"
    msgs = [{"role": "user", "content": "hi"}]

    def post(path: str, body: dict) -> requests.Response:
        return requests.post(f"{root}/{path}", data=orjson.dumps(body), timeout=10,
                             headers={"content-type": "application/json", "x-api-key": "k"})

    r = post("responses", {"model": "gpt-5-pro", "input": msgs, "reasoning": {"effort": "medium"}})
    assert r.status_code == 400 and r.json()["error"] == {
        "message": "Unsupported value: 'medium' is not supported with the 'gpt-5-pro' model. "
                   "Supported values are: 'high'.",
        "type": "invalid_request_error", "param": "reasoning.effort", "code": "unsupported_value"}
    r = post("chat/completions", {"model": "gpt-5-chat-latest", "messages": msgs, "reasoning_effort": "medium"})
    assert r.status_code == 400 and r.json()["error"]["code"] == "unsupported_parameter"
    r = post("chat/completions", {"model": "gemini-3-pro-preview", "messages": msgs, "reasoning_effort": "medium"})
    assert r.status_code == 400
    assert r.json()[0]["error"]["message"] == "Thinking level MEDIUM is not supported for this model."
    r = post("chat/completions", {"model": "gpt-5.1", "messages": msgs, "reasoning_effort": "minimal"})
    assert r.json()["error"]["message"].endswith("Supported values are: 'none', 'low', 'medium', and 'high'.")
    r = post("messages", {"model": "claude-opus-4-1-20250805", "messages": msgs, "max_tokens": 9,
                          "temperature": 0.5, "top_p": 0.9})
    assert r.status_code == 400 and "cannot both be specified" in r.json()["error"]["message"]
    r = post("chat/completions", {"model": "gemini-3-pro-preview", "messages": msgs, "reasoning_effort": "high"})
    assert r.status_code == 200
    assert contract.status[400] == 5


def test_price_sources_apart_by_more_than_2x_the_newer_is_used_and_both_shown(tmp_path, capsys):
    from datetime import date

    from cli.main import main
    from providers.pricing import fresher, resolve_prices

    ds = resolve_prices(_m("deepseek-reasoner"))  # genai-prices' undated R1-era entry vs the current map
    assert (ds.source, ds.price_in, ds.price_out, ds.cache_read) == ("litellm map", 0.28, 0.42, 0.028)
    assert ds.other.startswith("genai-prices (deepseek/deepseek-reasoner): ") and "undated" in ds.other
    g = (1.0, 8.0, 0.1, None, "genai-prices (x/y)", date(2026, 10, 14))
    m = (1.0, 2.0, 0.1, None, "litellm map", None)
    assert fresher(g, m)[0] is g and "dates its price 2026-10-14" in fresher(g, m)[1]  # dated: newer
    assert fresher((*g[:5], None), m)[0] is m  # undated: the map, refreshed with every litellm release
    near = (1.0, 3.9, 0.1, None, "genai-prices (x/y)", None)
    assert fresher(near, m) == (near, None)  # within 2x: genai-prices first, as always
    assert fresher(None, m) == (m, None) and resolve_prices(_m("gpt-5")).other is None
    cfg = tmp_path / "c.toml"
    cfg.write_text('[[endpoints]]\nname = "d"\nkind = "openai"\nbase_url = "https://api.deepseek.com/v1"\n'
                   '[[models]]\nname = "ds"\nendpoint = "d"\nmodel = "deepseek-reasoner"\n')
    assert main(["models", "ds", "--config", str(cfg)]) == 0
    out = capsys.readouterr().out
    assert "0.28" in out and "from litellm map" in out and "other prices    genai-prices (deepseek" in out
    # genai-prices' DeepSeek price depends on the hour (its off-peak discount, 16:30-00:30 UTC): the
    # numbers shown are the ones it gives now, whichever they are
    assert ds.other.split(": ", 1)[1].split(" $/M")[0] in out, (ds.other, out)


def test_gemini_3_at_the_protocols_temperature_0_is_said_before_the_run(tmp_path, caplog):
    from cli.main import main

    cfg = tmp_path / "c.toml"
    cfg.write_text('[[endpoints]]\nname = "g"\nkind = "openai"\nbase_url = "http://127.0.0.1:9/v1"\n'
                   '[[models]]\nname = "g3"\nendpoint = "g"\nmodel = "gemini-3-pro-preview"\n'
                   '[[models]]\nname = "g25"\nendpoint = "g"\nmodel = "gemini-2.5-pro"\n')
    data = tmp_path / "d.jsonl"
    data.write_text('{"id": "1", "prompt": "hi", "choices": ["a", "b"], "answer": "A"}\n')
    args = ["run", f"jsonl:{data}", "--models", "g3,g25", "--config", str(cfg), "--dry-run", "--keep-going"]
    with caplog.at_level(logging.WARNING, logger="evalsweep"):
        main([*args, "--out", str(tmp_path / "r1")])  # the suite's default: greedy, temperature 0
    said = [r.getMessage() for r in caplog.records if "the protocol asks temperature" in r.getMessage()]
    assert len(said) == 1 and said[0].startswith("[jsonl-d] warning: g3: the protocol asks temperature 0;")
    assert "looping" in said[0]
    caplog.clear()
    with caplog.at_level(logging.WARNING, logger="evalsweep"):
        main([*args, "--out", str(tmp_path / "r2"), "--temperature", "1.0"])
    assert not [r for r in caplog.records if "the protocol asks temperature" in r.getMessage()]


def test_the_lineup_bodies_table_is_current():
    """examples/lineup-2026-bodies.md is what examples/lineup_bodies.py makes of today's rules."""
    import subprocess
    import sys

    from tests.helpers import REPO

    # in a fresh interpreter, as `python examples/lineup_bodies.py` makes it: nothing another test loaded
    # into this process (litellm's registered models, cached profiles) may change what it says
    code = ("import importlib.util, sys; s = importlib.util.spec_from_file_location('b', sys.argv[1]); "
            "m = importlib.util.module_from_spec(s); s.loader.exec_module(m); print(m.table(__import__("
            "'pathlib').Path(sys.argv[2])), end='')")
    made = subprocess.run([sys.executable, "-c", code, str(REPO / "examples" / "lineup_bodies.py"),
                           str(REPO / "examples" / "lineup-2026.toml")], cwd=REPO, capture_output=True,
                          text=True, check=True).stdout
    have = (REPO / "examples" / "lineup-2026-bodies.md").read_text()
    assert made in have, [ln for ln in made.splitlines() if ln not in have]
    rows = made.splitlines()[2:]
    assert len(rows) == 45
    pro = next(r for r in rows if r.startswith("| gpt-5-pro |"))
    assert '"reasoning":{"effort":"high"}' in pro and "effort high only" in pro
