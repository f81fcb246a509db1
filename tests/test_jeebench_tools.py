"""JEEBench §4.2 (function calling): `tools` go out and `tool_calls` come back on the OpenAI Chat
Completions wire, and the cot-tools variant runs its calculator chain end to end, against the real local
mock server (tests/mock_openai.py)."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from cache.key import cache_key
from cli.main import main
from core.types import Completion, Message, Request
from providers.openai import OpenAIProvider
from suites.jeebench.tools import ROUNDS, run_call
from tests.helpers import complete_once, write_config
from tests.mock_openai import MockServer
from tests.test_openai_schema import _validator

CALC = [
    {
        "type": "function",
        "function": {
            "name": "multiply",
            "description": "a * b",
            "parameters": {
                "type": "object",
                "properties": {"a": {"type": "number"}, "b": {"type": "number"}},
                "required": ["a", "b"],
            },
        },
    }
]
ASK = [Message(role="user", content="What is 12.5 times 8?")]


@pytest.fixture(scope="module")
def srv():
    s = MockServer().start()
    yield s
    s.stop()


def _call(srv: MockServer, req: Request, model: str = "gpt-4-0613") -> Completion:
    return complete_once(OpenAIProvider(srv.base_url), req, model)


def test_tools_sent_and_tool_calls_read_back(srv: MockServer):
    req = Request(suite="t", item="1", messages=ASK, tools=CALC)
    got = _call(srv, req)
    body = srv.last_body["gpt-4-0613"]
    assert body["tools"] == CALC
    assert not sorted(_validator().iter_errors(body), key=str)
    assert got.texts == [None] and got.finish_reasons == ["tool_calls"]
    assert got.tool_calls[0] is not None
    (call,) = got.tool_calls[0]
    assert call["function"] == {"name": "multiply", "arguments": '{"a": 12.5, "b": 8}'}
    # the follow-up: the assistant's call and the tool's result go back as OpenAI wire turns
    follow = [
        *ASK,
        Message(role="assistant", content="", tool_calls=got.tool_calls[0]),
        Message(role="tool", content="100", tool_call_id=call["id"]),
    ]
    again = _call(srv, Request(suite="t", item="1", messages=follow, tools=CALC))
    body = srv.last_body["gpt-4-0613"]
    assert body["messages"][1]["tool_calls"] == got.tool_calls[0]
    assert body["messages"][2] == {"role": "tool", "content": "100", "tool_call_id": "call_1"}
    assert not sorted(_validator().iter_errors(body), key=str)
    assert again.texts == ["The answer is 100."] and again.finish_reasons == ["stop"]


def test_no_tools_no_field_and_keys_differ(srv: MockServer):
    plain = Request(suite="t", item="1", messages=ASK)
    got = _call(srv, plain)
    assert "tools" not in srv.last_body["gpt-4-0613"]
    assert got.tool_calls == []
    assert cache_key(plain, "m") != cache_key(plain.model_copy(update={"tools": CALC}), "m")
    step = [*ASK, Message(role="tool", content="100", tool_call_id="call_1")]
    other = [*ASK, Message(role="tool", content="100", tool_call_id="call_2")]
    assert cache_key(Request(suite="t", item="1", messages=step), "m") != cache_key(
        Request(suite="t", item="1", messages=other), "m"
    )


def _rows(path: Path) -> list[dict]:
    return [json.loads(line) for line in path.read_text().splitlines() if line.strip()]


def test_cot_tools_chain_end_to_end(tmp_path: Path, srv: MockServer):
    """gpt-4-0613 calls multiply and then answers; tool-bad-args sends arguments that are not JSON (the
    error goes back as the tool's result: a clear row, no crash); tool-never answers without a call;
    tool-always calls until the round limit ends its chain (no answer: scored 0, not a failed call)."""
    models = ["gpt-4-0613", "tool-bad-args", "tool-never", "tool-always"]
    cfg = write_config(tmp_path / "c.toml", srv.base_url, models)
    out = tmp_path / "run"
    args = ["run", "jeebench", "--variant", "cot-tools", "--models", ",".join(models), "--config", str(cfg),
            "--out", str(out), "--limit", "2", "--no-live"]  # fmt: skip
    assert main(args) == 0
    rows = _rows(out / "results.jsonl")
    keys = [(r["model"], r["item"], r["sample"], r["pass"]) for r in rows]
    assert len(keys) == len(set(keys))  # one final row per (model, item, sample, pass)
    assert not [r for r in rows if r.get("error")]
    by = {(r["model"], r["pass"]): r for r in rows}
    # the round trip: a call, then the result sent back as a `tool` message, then the final answer
    call = by[("gpt-4-0613", "answer")]
    assert call["tool_calls"][0]["function"]["name"] == "add" and call["finish_reason"] == "tool_calls"
    assert by[("gpt-4-0613", "tool1")]["text"] == "The answer is 20.5."
    # malformed arguments: the chain goes on, the model is told why, nothing fails
    assert run_call(by[("tool-bad-args", "answer")]["tool_calls"][0])[1] is False
    assert by[("tool-bad-args", "tool1")]["text"].startswith("The answer is error: the arguments are not JSON")
    # a model that never calls: its answer pass is its only row
    assert {p for m, p in by if m == "tool-never"} == {"answer"}
    assert sum(m == "gpt-4-0613" for m, _, _, _ in keys) == 4  # 2 items x (answer, tool1)
    assert main(["score", str(out)]) == 0
    scores = json.loads((out / "scores.json").read_text())
    got = {m: s["tools"] for m, s in scores["models"].items()}
    assert got == {"gpt-4-0613": {"calls": 2, "malformed": 0, "at_limit": 0},
                   "tool-bad-args": {"calls": 2, "malformed": 2, "at_limit": 0},
                   "tool-never": {"calls": 0, "malformed": 0, "at_limit": 0},
                   "tool-always": {"calls": 2 * (ROUNDS + 1), "malformed": 0, "at_limit": 2}}  # fmt: skip
    assert {p for m, p in by if m == "tool-always"} == {"answer", *(f"tool{k}" for k in range(1, ROUNDS + 1))}
    limited = [r for r in _rows(out / "scored.jsonl") if r["model"] == "tool-always"]
    assert [(r["extracted"], r["score"]) for r in limited] == [(None, 0.0), (None, 0.0)]
    for s in scores["models"].values():  # the mock's answers read as no answer: unread, never a failed call
        assert s["failed"] == {"questions": 0, "samples": 0} and s["n"] == 2
    table = scores["tables"][0]
    paper = {r[0]: r for r in table["rows"] if str(r[0]).startswith("paper:")}
    assert paper["paper: gpt-4-0613 CoT + calculator (§4.2)"][-4:-1] == [0.274, 0.0, None]
    assert paper["paper: gpt-4-0613 CoT (§4.2)"][-4:-1] == [0.303, 0.029, None]
    assert any("calculator functions and round limit" in d for d in scores["protocol"]["deviations"])


def test_round_limit_and_bad_calls_are_answers_not_crashes():
    assert run_call({"function": {"name": "multiply", "arguments": '{"a": 1.5, "b": 4}'}}) == ("6.0", True)
    assert run_call({"function": {"name": "sqrt", "arguments": '{"a": 4}'}})[1] is False
    assert run_call({"function": {"name": "add", "arguments": '{"a": "__import__", "b": 1}'}})[1] is False
    assert run_call({"function": {"name": "divide", "arguments": '{"a": 1, "b": 0}'}}) == ("error: division by zero", True)
    # arguments as an object, no id: what Ollama's, Gemini's and some vLLM tool parsers send on OpenAI-compatible
    # endpoints (https://docs.rs/agent-block-testkit/0.34.1/agent_block_testkit/shapes/openai/, "broken-but-observed")
    assert run_call({"function": {"name": "add", "arguments": {"a": 2, "b": 3}}}) == ("5.0", True)
    assert run_call("nonsense")[1] is False
    assert ROUNDS >= 1
