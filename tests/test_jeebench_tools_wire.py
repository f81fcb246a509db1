"""JEEBench §4.2 function calling on more wires than the unstreamed OpenAI chat one, against real local
servers on 127.0.0.1 (tests/mock_openai.py, whose answers tests/mock_sse.py streams):
- a streamed chat answer's `tool_calls` deltas are assembled into the unstreamed body's `tool_calls`, so a
  streamed cot-tools run writes the rows an unstreamed one does;
- Anthropic's Messages API (kind = "anthropic"): the calculator goes as Anthropic `tools`, `tool_use`
  blocks come back as the row's OpenAI-shaped `tool_calls` and results go back as `tool_result` blocks,
  unstreamed and streamed (input_json_delta) alike."""

from __future__ import annotations

import asyncio
import json
from pathlib import Path
from typing import Any

import pytest

from cli.main import main
from core.types import Completion, Message, Request
from providers.anthropic import AnthropicProvider
from suites.jeebench.tools import CALCULATOR, ROUNDS
from tests.helpers import complete_once, write_config
from tests.mock_openai import SIGNATURE, THINKING_SIGNATURE, MessagesServer, MockServer

MODELS = ["gpt-4-0613", "tool-bad-args", "tool-never", "tool-always"]
SAME = ("text", "tool_calls", "finish_reason", "usage", "cost_usd", "error")
"""What a row says about its answer (not when or how fast it came)."""


@pytest.fixture
def srv():
    s = MockServer().start()
    yield s
    s.stop()


@pytest.fixture
def claude():
    s = MessagesServer().start()
    yield s
    s.stop()


def _rows(path: Path) -> list[dict[str, Any]]:
    return [json.loads(line) for line in path.read_text().splitlines() if line.strip()]


def _run(tmp_path: Path, base_url: str, name: str, extra_endpoint: str = "", models: list[str] = MODELS,
         kind: str = "openai", extra_model: str = "") -> dict[tuple, dict[str, Any]]:
    cfg = write_config(tmp_path / f"{name}.toml", base_url, models, extra_endpoint=extra_endpoint,
                       extra_model=extra_model)
    cfg.write_text(cfg.read_text().replace('kind = "openai"', f'kind = "{kind}"'))
    out = tmp_path / name
    args = ["run", "jeebench", "--variant", "cot-tools", "--models", ",".join(models), "--config", str(cfg),
            "--out", str(out), "--limit", "2", "--no-live", "--no-score", "--no-cache"]  # fmt: skip
    assert main(args) == 0
    rows = _rows(out / "results.jsonl")
    by = {(r["model"], r["item"], r["sample"], r["pass"]): {k: r.get(k) for k in SAME} for r in rows}
    assert len(by) == len(rows)  # one final row per (model, item, sample, pass)
    return by


def test_streamed_cot_tools_run_gives_the_unstreamed_rows(tmp_path: Path, srv: MockServer):
    whole = _run(tmp_path, srv.base_url, "whole")
    assert sum(srv.sse.streamed.values()) == 0
    streamed = _run(tmp_path, srv.base_url, "streamed", "stream_above_tokens = 0\n")
    assert sum(srv.sse.streamed.values()) == len(streamed)  # every call of the second run streamed
    assert streamed == whole
    call = next(r for k, r in streamed.items() if k[0] == "gpt-4-0613" and k[3] == "answer")
    assert call["tool_calls"] == [{"id": "call_1", "type": "function",
                                   "function": {"name": "add", "arguments": '{"a": 12.5, "b": 8}'}}]
    assert not [r for r in streamed.values() if r["error"]]


ASK = [Message(role="system", content=""), Message(role="user", content="What is 12.5 times 8?")]


def _claude(srv: MessagesServer, req: Request, model: str = "claude-tools", stream_above: int | None = None
            ) -> Completion:
    return complete_once(AnthropicProvider(srv.base_url.removesuffix("/v1"), stream_above_tokens=stream_above), req,
                         model)


@pytest.mark.parametrize("stream_above", [None, 0])
def test_anthropic_tools_sent_tool_use_read_results_sent_back(claude: MessagesServer, stream_above: int | None):
    req = Request(suite="t", item="1", messages=ASK, tools=CALCULATOR, decoding={"max_tokens": 1000})
    got = _claude(claude, req, stream_above=stream_above)
    body = claude.last_body["claude-tools"]
    assert body.get("stream") is (True if stream_above == 0 else None)
    assert body["tools"][0] == {
        "name": "add", "description": "A basic calculator: returns a + b.",
        "input_schema": {"type": "object", "properties": {"a": {"type": "number"}, "b": {"type": "number"}},
                         "required": ["a", "b"]}}  # fmt: skip
    assert [t["name"] for t in body["tools"]] == ["add", "subtract", "multiply", "divide"]
    assert got.texts == ["I'll use the calculator."] and got.finish_reasons == ["tool_use"]
    (call,) = got.tool_calls[0]
    assert call == {"id": "toolu_01", "type": "function", "function": {"name": "add", "arguments": '{"a": 12.5, "b": 8}'}}
    follow = [*ASK, Message(role="assistant", content=got.texts[0], tool_calls=got.tool_calls[0]),
              Message(role="tool", content="20.5", tool_call_id=call["id"])]
    again = _claude(claude, req.model_copy(update={"messages": follow}), stream_above=stream_above)
    sent = claude.last_body["claude-tools"]["messages"]
    assert sent[1:] == [
        {"role": "assistant", "content": [{"type": "text", "text": "I'll use the calculator."},
                                          {"type": "tool_use", "id": "toolu_01", "name": "add",
                                           "input": {"a": 12.5, "b": 8}}]},
        {"role": "user", "content": [{"type": "tool_result", "tool_use_id": "toolu_01", "content": "20.5"}]},
    ]  # fmt: skip
    assert again.texts == ["The answer is 20.5."] and again.finish_reasons == ["end_turn"]
    assert again.tool_calls == []


def test_parallel_results_go_back_in_one_user_turn(claude: MessagesServer):
    """Two calls in one turn: both tool_use blocks in the assistant turn, both results in the one user turn
    after it (Anthropic refuses a tool_use whose result is not in the next message)."""
    calls = [{"id": f"toolu_{k}", "type": "function", "function": {"name": "add", "arguments": f'{{"a": {k}, "b": 1}}'}}
             for k in (1, 2)]  # fmt: skip
    follow = [*ASK, Message(role="assistant", content="", tool_calls=calls),
              Message(role="tool", content="2.0", tool_call_id="toolu_1"),
              Message(role="tool", content="3.0", tool_call_id="toolu_2")]
    _claude(claude, Request(suite="t", item="1", messages=follow, tools=CALCULATOR, decoding={"max_tokens": 1000}))
    sent = claude.last_body["claude-tools"]["messages"]
    assert [m["role"] for m in sent] == ["user", "assistant", "user"]
    assert [b["type"] for b in sent[1]["content"]] == ["tool_use", "tool_use"]  # no empty text block
    assert sent[2]["content"] == [{"type": "tool_result", "tool_use_id": "toolu_1", "content": "2.0"},
                                  {"type": "tool_result", "tool_use_id": "toolu_2", "content": "3.0"}]


CLAUDES = ["claude-tools", "tool-bad-args", "tool-never", "tool-always"]


def test_cot_tools_on_anthropic_unstreamed_and_streamed(tmp_path: Path, claude: MessagesServer):
    """The cot-tools chain on kind = "anthropic": the call, its result, the answer; a call missing an
    argument answered with its error (counted malformed, never a failed row); a model that never calls;
    one that calls until the round limit. Streamed (stream_above_tokens = 0), the same rows."""
    whole = _run(tmp_path, claude.base_url.removesuffix("/v1"), "whole", models=CLAUDES, kind="anthropic")
    assert not claude.sse.streamed
    assert not [r for r in whole.values() if r["error"]]
    by = {(m, p): r for (m, _, _, p), r in whole.items()}
    call = by[("claude-tools", "answer")]
    assert call["finish_reason"] == "tool_use" and call["text"] == "I'll use the calculator."
    assert call["tool_calls"][0]["function"] == {"name": "add", "arguments": '{"a": 12.5, "b": 8}'}
    assert by[("claude-tools", "tool1")]["text"] == "The answer is 20.5."
    assert by[("tool-bad-args", "tool1")]["text"].startswith("The answer is error: add needs two numbers")
    assert {p for m, p in by if m == "tool-never"} == {"answer"}
    assert {p for m, p in by if m == "tool-always"} == {"answer", *(f"tool{k}" for k in range(1, ROUNDS + 1))}
    assert claude.per_model["claude-tools"] == 4  # 2 items x (answer, tool1)
    streamed = _run(tmp_path, claude.base_url.removesuffix("/v1"), "streamed", "stream_above_tokens = 0\n",
                    models=CLAUDES, kind="anthropic")
    assert sum(claude.sse.streamed.values()) == len(streamed)
    assert streamed == whole


@pytest.mark.parametrize("extra", ["", "stream_above_tokens = 0\n"])
def test_a_calls_own_fields_go_back_with_it(tmp_path: Path, srv: MockServer, extra: str):
    """Gemini 3 on its OpenAI-compatible endpoint signs each call (`extra_content.google.thought_signature`)
    and refuses, with a 400, a next turn that sends the call back without it: the chain sends each call
    back with every field it came with, unstreamed and streamed (the signature in the call's first delta)."""
    got = _run(tmp_path, srv.base_url, "signed", extra, models=["tool-signed"])
    assert not [r for r in got.values() if r["error"]]
    by = {k[3]: r for k, r in got.items()}
    assert by["answer"]["tool_calls"][0]["extra_content"] == {"google": {"thought_signature": SIGNATURE}}
    assert by["tool1"]["text"] == "The answer is 20.5." and set(by) == {"answer", "tool1"}
    turn = srv.last_body["tool-signed"]["messages"][-2]
    assert turn["tool_calls"][0]["extra_content"] == {"google": {"thought_signature": SIGNATURE}}


@pytest.mark.parametrize("extra", ["", "stream_above_tokens = 0\n"])
def test_claude_thinking_blocks_go_back_before_its_tool_use(tmp_path: Path, claude: MessagesServer, extra: str):
    """With extended thinking on, Claude's turn that called tools starts with a thinking block, and Anthropic
    refuses a next turn whose assistant turn does not start with it, unmodified: the chain sends it back
    (carried on the row's first call), unstreamed and streamed (thinking_delta, signature_delta)."""
    model = "claude-sonnet-4-5"
    got = _run(tmp_path, claude.base_url.removesuffix("/v1"), "thinks", extra, models=[model], kind="anthropic",
               extra_model="thinking_budget = 1024\n")
    sent = claude.last_body[model]
    assert sent["thinking"] == {"type": "enabled", "budget_tokens": 1024}
    assert not [r for r in got.values() if r["error"]]
    by = {k[3]: r for k, r in got.items()}
    assert by["tool1"]["text"] == "The answer is 20.5." and set(by) == {"answer", "tool1"}
    assert [b["type"] for b in sent["messages"][-2]["content"]] == ["thinking", "text", "tool_use"]
    assert sent["messages"][-2]["content"][0]["signature"] == THINKING_SIGNATURE


@pytest.mark.parametrize("kind", ["openai", "anthropic"])
def test_a_call_cut_mid_stream_is_never_run(claude: MessagesServer, kind: str):
    """A stream dropped in the middle of a call's arguments (tests.mock_sse `[[stream:cut]]`) is a partial
    answer: no call comes out of it to be run (its row is an error row, sent again on a rerun)."""
    from providers.openai import OpenAIProvider

    req = Request(suite="t", item="1", messages=[Message(role="user", content="What is 12.5 times 8? [[stream:cut]]")],
                  tools=CALCULATOR, decoding={"max_tokens": 1000})
    if kind == "openai":
        prov: Any = OpenAIProvider(claude.base_url, stream_above_tokens=0)
    else:
        prov = AnthropicProvider(claude.base_url.removesuffix("/v1"), stream_above_tokens=0)

    async def send() -> Completion:
        try:
            return await prov.complete(req, "claude-tools", 1, 0, "sk-test", {})
        finally:
            await prov.close()

    got = asyncio.run(send())
    assert claude.sse.cut["cut"] == 1 and got.received_chars > 0  # cut after output began
    assert got.finish_reasons == ["partial"] and got.texts == [None]
    assert not [c for c in got.tool_calls if c]
