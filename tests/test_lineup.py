"""examples/lineup-2026.toml, 45 current models, run offline against the provider-contract mock: every
family's rules hold (0 x 400), every row is accounted for (ok, or reasoning_exhausted where a reasoning
model spent its budget thinking), and every cost equals the hand computation from the billed usage."""

from __future__ import annotations

import os
import re
import tomllib
from collections import Counter
from pathlib import Path

import orjson
import pytest
from genai_prices import Usage, calc_price

from cli.main import main
from tests.helpers import REPO, run_args
from tests.mock_contract import REASONING_TOKENS, ContractServer, reasons

LINEUP = REPO / "examples" / "lineup-2026.toml"
KEYS = ["OPENAI_API_KEY", "ANTHROPIC_API_KEY", "GEMINI_API_KEY", "DEEPSEEK_API_KEY", "XAI_API_KEY"]


def _mock_reasons(model_id: str, thinking: bool, body: dict) -> bool:
    """Whether the mock answered as a reasoning model (and exhausts on `[[exhaust]]`): the provider's
    own rule applied to the body it was sent (two configured models sharing an id send the same
    reasoning fields, but Claude's plain and thinking configurations: by the config)."""
    if model_id.rsplit("/", 1)[-1].startswith("claude"):
        return thinking
    return reasons(model_id, body)


@pytest.fixture
def contract():
    srv = ContractServer().start()
    yield srv
    srv.stop()


def test_the_2026_lineup_runs_clean_against_the_providers_rules(
    tmp_path: Path, contract: ContractServer, monkeypatch: pytest.MonkeyPatch
):
    for k in KEYS:
        monkeypatch.setenv(k, "contract-test-key-0123456789")
    root = f"http://127.0.0.1:{contract.port}"
    text = LINEUP.read_text()
    text = text.replace('"https://api.anthropic.com/v1/messages"', '"MOCK/v1/messages"')
    text = text.replace('"https://api.anthropic.com"', '"MOCK"')  # the native provider adds /v1/messages
    text = re.sub(r'base_url = "(https://|http://localhost)[^"]+"', 'base_url = "MOCK/v1"', text)
    text = text.replace("MOCK", root)
    cfg = tmp_path / "lineup.toml"
    cfg.write_text(text)
    models = tomllib.loads(text)["models"]
    assert len(models) == 45
    data = tmp_path / "d.jsonl"
    items = [("q0", "What is 2+2?"), ("q1", "[[exhaust]] Think long about this."), ("q2", "Pick a letter.")]
    data.write_bytes(b"".join(
        orjson.dumps({"id": i, "prompt": p, "choices": ["w", "x", "y", "z"], "answer": "A"}) + b"\n"
        for i, p in items
    ))
    out = tmp_path / "run"
    code = main(run_args(data, ",".join(m["name"] for m in models), cfg, out))

    assert contract.status[400] == 0, contract.refusals
    rows = [orjson.loads(x) for x in (out / "results.jsonl").read_bytes().splitlines()]
    assert len(rows) == 45 * 3 and len({(r["model"], r["item"]) for r in rows}) == 45 * 3
    man = orjson.loads((out / "manifest.json").read_bytes())
    snap = {m["name"]: m for m in orjson.loads((out / "config.json").read_bytes())["models"]}
    exhausted = 0
    for r in rows:
        m = next(x for x in models if x["name"] == r["model"])
        thinking = "thinking_budget" in m or "reasoning_effort" in m
        sent = contract.bodies.get(m["model"]) or contract.bodies[m["model"].rsplit("/", 1)[-1]]  # litellm strips openai/
        reasons = _mock_reasons(m["model"], thinking, sent)
        u = r["usage"]
        if reasons and r["item"] == "q1":
            assert r["error_kind"] == "reasoning_exhausted" and r["text"] is None, r
            exhausted += 1
        else:
            assert r["error"] is None and r["text"], r
        # the usage the mock billed, parsed whatever its shape (cached half the prompt, 8 written)
        assert u["cached_input_tokens"] == u["input_tokens"] // 2, r
        anthropic = m["endpoint"] in ("anthropic", "litellm-anthropic")
        if m["endpoint"] == "anthropic":
            assert u["cache_write_tokens"] == 8, r
        if not anthropic:
            assert u["reasoning_tokens"] in ((REASONING_TOKENS,) if reasons else (None, 0)), r
        elif m["endpoint"] == "anthropic":  # Anthropic reports no reasoning count (litellm estimates one)
            assert u["reasoning_tokens"] is None, r
        if m["endpoint"] == "xai" and reasons:  # xAI bills reasoning outside completion_tokens as output
            text_tokens = len(r["text"] or "") // 4 + 1 if r["text"] else u["output_tokens"] - REASONING_TOKENS
            assert u["output_tokens"] == text_tokens + REASONING_TOKENS, r
        # the cost by hand, from the config's prices or genai-prices' own calculation
        prices = snap[r["model"]]
        cached, writes = u["cached_input_tokens"] or 0, u["cache_write_tokens"] or 0
        if "price_in" in m:
            read = m.get("price_cache_read", m["price_in"])
            want = ((u["input_tokens"] - cached - writes) * m["price_in"] + cached * read
                    + writes * m["price_in"] + u["output_tokens"] * m["price_out"]) / 1e6
            assert prices["price_source"] == "config"
        elif prices["price_source"].startswith("genai-prices"):
            ref = prices["price_source"].split("/", 1)[1].rstrip(")")
            calc = calc_price(Usage(input_tokens=u["input_tokens"], cache_read_tokens=cached,
                                    cache_write_tokens=writes, output_tokens=u["output_tokens"]), model_ref=ref)
            want = float(calc.total_price)
        elif prices["price_source"] == "litellm map":  # DeepSeek: genai-prices' undated R1-era entry is >2x apart
            assert m["model"].startswith("deepseek") and "genai-prices" in prices["price_other"], prices
            read, write = prices["price_cache_read"], prices["price_cache_write"] or prices["price_in"]
            want = ((u["input_tokens"] - cached - writes) * prices["price_in"] + cached * read + writes * write
                    + u["output_tokens"] * prices["price_out"]) / 1e6
            assert (prices["price_in"], prices["price_out"]) == (0.28, 0.42)  # api-docs.deepseek.com pricing
        else:
            assert prices["price_source"] == "unknown" and r["cost_usd"] is None, (r, prices)
            continue
        assert r["cost_usd"] == pytest.approx(want, rel=1e-9, abs=1e-15), (r["model"], prices)
    assert exhausted >= 20
    assert code == 3  # the exhausted rows are errors, said by the exit code
    assert any("temperature not sent" in d for d in man["protocol"]["deviations"])

    b = contract.bodies
    assert "max_completion_tokens" in b["o1"] and "temperature" not in b["o1"] and "max_tokens" not in b["o1"]
    assert b["o1"]["max_completion_tokens"] == 1024 + 16384 and b["o1"]["reasoning_effort"] == "medium"
    assert b["gpt-5-codex"]["max_output_tokens"] == 1024 + 16384 and "input" in b["gpt-5-codex"]
    t = b["claude-opus-4-1-20250805"]
    assert "thinking" in t or "temperature" in t  # two configured models share the id: either was last
    assert b["gemini-2.5-flash"]["reasoning_effort"] == "low"
    # the three the real providers refused on every call, and the provider defaults kept
    assert b["gpt-5-pro"]["reasoning"] == {"effort": "high"}
    assert "reasoning_effort" not in b["gpt-5-chat-latest"] and b["gpt-5-chat-latest"]["temperature"] == 0
    assert "reasoning_effort" not in b["gemini-3-pro-preview"]
    assert b["gpt-5.1"]["reasoning_effort"] == "medium"  # thinking_budget 8192: the effort that covers it
    assert not {"reasoning_effort", "extra_body"} & set(b["gemini-2.5-flash-lite"])
    g = b["gemini-2.5-pro"]  # two configured models share the id: its dynamic default, or the budget
    assert "reasoning_effort" not in g and ("extra_body" in g or g["max_tokens"] == 1024 + 32768)
    assert b["gpt-4o-2024-08-06"]["max_tokens"] == 1024 and b["gpt-4o-2024-08-06"]["temperature"] == 0
    if os.environ.get("LINEUP_NOTE"):  # the closing note's figures: fields sent per family, rows by kind
        kinds = Counter(r.get("error_kind") or "ok" for r in rows)
        lines = [f"rows: {dict(kinds)}; HTTP statuses: {dict(contract.status)}"]
        lines += [f"{mid}: {sorted(body)}" for mid, body in sorted(b.items())]
        Path(os.environ["LINEUP_NOTE"]).write_text("\n".join(lines) + "\n")
