"""JEEBench §4.2 (cot-tools) through litellm (providers.litellm: providers that are not OpenAI-compatible),
against the real local OpenAI mock (tests/mock_openai.py) on litellm's `openai/` route with api_base = the
mock (real HTTP on 127.0.0.1): the calculator goes out as `tools`, the calls come back on the rows, and the
run writes the rows the direct OpenAI provider writes; on litellm's `anthropic/` route (against the local
Messages mock, MessagesServer) the chains are those of our own Anthropic provider."""

from __future__ import annotations

import json
import os
from pathlib import Path
from typing import Any

import pytest

from cli.main import main
from suites.jeebench.tools import CALCULATOR, ROUNDS
from tests.mock_openai import MessagesServer, MockServer

os.environ.setdefault("LITELLM_LOCAL_MODEL_COST_MAP", "True")

MODELS = ["gpt-4-0613", "tool-bad-args", "tool-never", "tool-always", "tool-signed"]
SAME = ("text", "tool_calls", "finish_reason", "usage", "cost_usd", "error")


@pytest.fixture
def srv():
    s = MockServer().start()
    yield s
    s.stop()


def _run(tmp: Path, base: str, name: str, kind: str, route: str = "openai/",
         models: list[str] = MODELS) -> dict[tuple, dict[str, Any]]:
    text = f'[[endpoints]]\nname = "e"\nkind = "{kind}"\nbase_url = "{base}"\napi_key_env = "MOCK_LITE_KEY"\n'
    for m in models:
        model = route + m if kind == "litellm" else m
        text += f'[[models]]\nname = "{m}"\nendpoint = "e"\nmodel = "{model}"\nprice_in = 1.0\nprice_out = 2.0\n'
    (cfg := tmp / f"{name}.toml").write_text(text)
    out = tmp / name
    args = ["run", "jeebench", "--variant", "cot-tools", "--models", ",".join(models), "--config", str(cfg),
            "--out", str(out), "--limit", "2", "--no-live", "--no-score", "--no-cache"]  # fmt: skip
    assert main(args) == 0
    rows = [json.loads(x) for x in (out / "results.jsonl").read_text().splitlines() if x.strip()]
    by = {(r["model"], r["item"], r["sample"], r["pass"]): {k: r.get(k) for k in SAME} for r in rows}
    assert len(by) == len(rows)  # one final row per (model, item, sample, pass)
    return by


def test_cot_tools_through_litellm_gives_the_direct_rows(tmp_path: Path, srv: MockServer,
                                                         monkeypatch: pytest.MonkeyPatch):
    monkeypatch.setenv("MOCK_LITE_KEY", "lite-key")
    direct = _run(tmp_path, srv.base_url, "direct", "openai")
    calls = srv.total
    lite = _run(tmp_path, srv.base_url, "lite", "litellm")
    assert srv.total == 2 * calls and srv.keys["lite-key"] == 2 * calls
    body = srv.last_body["gpt-4-0613"]
    assert body["tools"] == CALCULATOR  # sent as the suite offers them
    assert body["messages"][-1] == {"role": "tool", "content": "20.5", "tool_call_id": "call_1"}
    assert lite == direct
    assert {k[3] for k in lite if k[0] == "tool-always"} == {"answer", *(f"tool{i}" for i in range(1, ROUNDS + 1))}
    answer = next(r for k, r in lite.items() if k[0] == "gpt-4-0613" and k[3] == "answer")
    assert answer["tool_calls"] == [{"id": "call_1", "type": "function",
                                     "function": {"name": "add", "arguments": '{"a": 12.5, "b": 8}'}}]
    assert not [r for r in lite.values() if r["error"]]


def test_cot_tools_through_litellm_to_anthropic_runs_our_anthropic_chains(tmp_path: Path,
                                                                          monkeypatch: pytest.MonkeyPatch):
    """litellm translates the tools and the tool_use blocks itself: its finish reasons are OpenAI's and its
    calls carry an `index`, the chains and their answers are ours."""
    monkeypatch.setenv("MOCK_LITE_KEY", "lite-key")
    models = ["claude-tools", "tool-bad-args", "tool-never", "tool-always"]
    srv = MessagesServer().start()
    try:
        base = srv.base_url.removesuffix("/v1")
        direct = _run(tmp_path, base, "direct", "anthropic", models=models)
        lite = _run(tmp_path, base, "lite", "litellm", "anthropic/", models)
        assert srv.last_body["tool-always"]["tools"][0]["input_schema"] == CALCULATOR[0]["function"]["parameters"]
    finally:
        srv.stop()
    assert lite.keys() == direct.keys()
    for k, r in lite.items():
        d = direct[k]
        assert (r["text"], r["error"]) == (d["text"], d["error"]), k
        assert [c["function"] for c in r["tool_calls"] or []] == [c["function"] for c in d["tool_calls"] or []], k
    assert not [r for r in lite.values() if r["error"]]
