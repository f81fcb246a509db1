"""JEEBench §4.2 (function calling): `tools` go out and `tool_calls` come back on the OpenAI Chat
Completions wire, against the real local mock server (tests/mock_openai.py)."""

from __future__ import annotations

import asyncio

import pytest

from cache.key import cache_key
from core.types import Completion, Message, Request
from providers.openai import OpenAIProvider
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
    prov = OpenAIProvider(srv.base_url)

    async def send() -> Completion:
        try:
            return await prov.complete(req, model, 1, 0, "sk-test", {})
        finally:
            await prov.close()

    return asyncio.run(send())


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
