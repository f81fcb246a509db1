"""JEEBench §4.2: the tool-call bodies real providers send (tests/data/provider_bodies/tools_*, each with its
source), replayed by a local server on 127.0.0.1 and carried round trip by the providers and the suite's
chain step (tools.next_round): the calls read, run, and sent back with their results as the provider takes
them. OpenAI: the spec's example and a recorded stream of two parallel calls; the follow-up validated
against OpenAI's published request schema. Anthropic: recorded exchanges (unstreamed, streamed), our
follow-up equal to the one the SDK sent and Anthropic answered. Ollama's object `arguments`: run, and sent
back as the JSON string the spec requires."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import orjson
import pytest
from aiohttp import web

from core.types import Completion, Message, Request
from providers.anthropic import AnthropicProvider
from providers.openai import OpenAIProvider
from suites.jeebench.tools import next_round, run_call
from tests.helpers import complete_once
from tests.test_openai_schema import _validator
from tests.threaded import Threaded

BODIES = Path(__file__).parent / "data" / "provider_bodies"


def _json(name: str) -> dict[str, Any]:
    return json.loads((BODIES / name).read_text())


class Replay(Threaded):
    """Answers each POST with the next recorded answer (JSON, or SSE bytes as text/event-stream) and keeps
    the bodies it was sent."""

    def __init__(self) -> None:
        self.answers: list[dict[str, Any] | bytes] = []
        self.bodies: list[dict[str, Any]] = []

    def app(self) -> web.Application:
        app = web.Application()
        app.router.add_post("/v1/chat/completions", self.handle)
        app.router.add_post("/v1/messages", self.handle)
        return app

    async def handle(self, request: web.Request) -> web.Response:
        self.bodies.append(orjson.loads(await request.read()))
        answer = self.answers.pop(0)
        if isinstance(answer, bytes):
            return web.Response(body=answer, content_type="text/event-stream")
        return web.json_response(answer)

    @property
    def base_url(self) -> str:
        return f"http://127.0.0.1:{self.port}/v1"


@pytest.fixture
def replay():
    s = Replay().start()
    yield s
    s.stop()


_complete = complete_once


def _row(comp: Completion) -> dict[str, Any]:
    """The answer row a completion makes (runner.calls.call: a turn that only called tools has text '')."""
    return {"pass": "answer", "sample": 0, "text": comp.texts[0] or "", "tool_calls": comp.tool_calls[0]}


def _as_openai_tools(tools: list[dict[str, Any]]) -> list[dict[str, Any]]:
    """Anthropic tools (name, description, input_schema) as the suites spell them (OpenAI functions)."""
    return [{"type": "function", "function": {"name": t["name"], "description": t["description"],
                                              "parameters": t["input_schema"]}} for t in tools]


def _without_caller(messages: list[dict[str, Any]]) -> list[dict[str, Any]]:
    """The SDK sends the response's blocks back whole, `caller` included (a field the API sets on its answer)."""
    return [{**m, "content": [{k: v for k, v in b.items() if k != "caller"} for b in m["content"]]}
            if isinstance(m["content"], list) else m for m in messages]


def test_every_tools_body_names_its_source():
    sources = _json("tools_sources.json")
    assert set(sources) == {p.name for p in BODIES.glob("tools_*") if p.name != "tools_sources.json"}
    assert all(s.startswith("https://github.com/") for s in sources.values())
    for name in sources:
        if name.endswith(".json"):
            assert _json(name)["source"] == sources[name]


@pytest.mark.parametrize("streamed", [False, True])
def test_openai_spec_example_round_trip(replay: Replay, streamed: bool):
    """The spec's 'Functions' example: its call read (content null, finish_reason tool_calls), run, and sent
    back (the assistant turn with the call as it came, then the tool's result under its id). Streamed: the
    same answer as chat.completion.chunk events (tests.mock_sse.chat_events, the spec's delta shape)."""
    from tests.mock_sse import chat_events

    ex = _json("tools_openai_chat.json")
    body = ex["body"]
    replay.answers.append(b"".join(chat_events(body, False)) if streamed else body)
    req = Request(suite="t", item="1", messages=[Message(**m) for m in ex["request"]["messages"]],
                  tools=ex["request"]["tools"], decoding={"max_tokens": 100})
    prov = OpenAIProvider(replay.base_url, stream_above_tokens=0 if streamed else None)
    got = _complete(prov, req, ex["request"]["model"])
    assert replay.bodies[-1].get("stream") is (True if streamed else None)
    assert replay.bodies[-1]["tools"] == ex["request"]["tools"]
    assert got.finish_reasons == ["tool_calls"] and got.texts[0] in (None, "")
    assert got.tool_calls == [body["choices"][0]["message"]["tool_calls"]]
    (follow,) = next_round(req, _row(got))
    replay.answers.append({**body, "choices": [{"index": 0, "message": {"role": "assistant", "content": "Sunny."},
                                                "finish_reason": "stop"}]})
    _complete(OpenAIProvider(replay.base_url), follow, ex["request"]["model"])
    sent = replay.bodies[-1]
    assert not sorted(_validator().iter_errors(sent), key=str)
    assert sent["messages"][1]["tool_calls"] == body["choices"][0]["message"]["tool_calls"]
    assert sent["messages"][2] == {"role": "tool", "tool_call_id": "call_abc123",
                                   "content": "error: no function named 'get_current_weather'; the functions are "
                                              "add, subtract, multiply, divide"}


def test_openai_recorded_parallel_stream_round_trip(replay: Replay):
    """gpt-4o's recorded stream of two parallel calls, arguments in fragments: assembled as openai-python
    assembles it (its snapshot of the final completion), both calls run, both results sent back in order."""
    replay.answers.append((BODIES / "tools_openai_chat_stream_parallel.sse").read_bytes())
    req = Request(suite="t", item="1", messages=[Message(role="user", content="What's the weather like in Edinburgh?"),
                                                 Message(role="user", content="What's the price of AAPL?")],
                  decoding={"max_tokens": 100})
    got = _complete(OpenAIProvider(replay.base_url, stream_above_tokens=0), req, "gpt-4o-2024-08-06")
    assert replay.bodies[-1]["stream"] is True
    assert got.finish_reasons == ["tool_calls"] and got.texts == [None]
    assert got.tool_calls == [[
        {"id": "call_JMW1whyEaYG438VE1OIflxA2", "type": "function",
         "function": {"name": "GetWeatherArgs", "arguments": '{"city": "Edinburgh", "country": "GB", "units": "c"}'}},
        {"id": "call_DNYTawLBoN8fj3KN6qU9N1Ou", "type": "function",
         "function": {"name": "get_stock_price", "arguments": '{"ticker": "AAPL", "exchange": "NASDAQ"}'}},
    ]]  # fmt: skip
    assert [run_call(c)[1] for c in got.tool_calls[0]] == [False, False]  # not our calculator's: answered, counted
    (follow,) = next_round(req, _row(got))
    replay.answers.append(orjson.loads((BODIES / "chat_default.json").read_bytes()))
    _complete(OpenAIProvider(replay.base_url), follow, "gpt-4o-2024-08-06")
    sent = replay.bodies[-1]
    assert not sorted(_validator().iter_errors(sent), key=str)
    assert sent["messages"][2]["tool_calls"] == got.tool_calls[0]
    assert [(m["role"], m["tool_call_id"]) for m in sent["messages"][3:]] == [
        ("tool", "call_JMW1whyEaYG438VE1OIflxA2"), ("tool", "call_DNYTawLBoN8fj3KN6qU9N1Ou")]


@pytest.mark.parametrize("streamed", [False, True])
def test_ollama_object_arguments_run_and_go_back_as_a_json_string(replay: Replay, streamed: bool):
    """Ollama's documented call (arguments an object, no id, no type) on an OpenAI-compatible endpoint: run
    as it came, and sent back in the spec's shape (an id, type function, arguments a JSON string), which a
    strict server takes; the tool's result answers that id."""
    from tests.mock_sse import chat_events

    msg = _json("tools_ollama_object_arguments.json")["message"]
    body = {"id": "chatcmpl-ollama", "object": "chat.completion", "model": "llama3.2",
            "choices": [{"index": 0, "message": msg, "finish_reason": "tool_calls"}],
            "usage": {"prompt_tokens": 122, "completion_tokens": 33, "total_tokens": 155}}
    replay.answers.append(b"".join(chat_events(body, True)) if streamed else body)
    tools = _json("tools_openai_chat.json")["request"]["tools"]
    req = Request(suite="t", item="1", messages=[Message(role="user", content="What is the weather today in Paris?")],
                  tools=tools, decoding={"max_tokens": 100})
    got = _complete(OpenAIProvider(replay.base_url, stream_above_tokens=0 if streamed else None), req, "llama3.2")
    (call,) = got.tool_calls[0]
    assert call["function"] == msg["tool_calls"][0]["function"]  # kept as it came
    (follow,) = next_round(req, _row(got))
    replay.answers.append(orjson.loads((BODIES / "chat_default.json").read_bytes()))
    _complete(OpenAIProvider(replay.base_url), follow, "llama3.2")
    sent = replay.bodies[-1]
    assert not sorted(_validator().iter_errors(sent), key=str)
    assert sent["messages"][1]["tool_calls"] == [
        {"id": "call_0", "type": "function",
         "function": {"name": "get_current_weather", "arguments": '{"format":"celsius","location":"Paris, FR"}'}}]
    assert sent["messages"][2]["tool_call_id"] == "call_0"


@pytest.mark.parametrize("name", ["tools_anthropic_exchange.json", "tools_anthropic_stream_exchange.json"])
def test_anthropic_recorded_exchange_round_trip(replay: Replay, name: str):
    """Claude's recorded answer read into the row's tool_calls; the follow-up our chain step builds from that
    row (the call's result as the SDK sent it) is the request the SDK sent and Anthropic answered: the
    tools, the assistant turn (text, tool_use with its input object) and the user turn of tool_result."""
    first, second = _json(name)["exchange"][:2]
    streamed = isinstance(first["response"], str)
    replay.answers.append(first["response"].encode() if streamed else first["response"])
    req = Request(suite="t", item="1", messages=[Message(**m) for m in first["request"]["messages"]],
                  tools=_as_openai_tools(first["request"]["tools"]), decoding={"max_tokens": first["request"]["max_tokens"]})
    prov = AnthropicProvider(replay.base_url.removesuffix("/v1"), stream_above_tokens=0 if streamed else None)
    got = _complete(prov, req, first["request"]["model"])
    sent = replay.bodies[-1]
    assert sent["tools"] == first["request"]["tools"] and sent["messages"] == first["request"]["messages"]
    assert sent.get("stream") is (True if streamed else None)
    assert got.finish_reasons == ["tool_use"]
    (use,) = [b for b in second["request"]["messages"][1]["content"] if b["type"] == "tool_use"]
    (call,) = got.tool_calls[0]
    assert call["id"] == use["id"] and call["function"]["name"] == use["name"]
    assert json.loads(call["function"]["arguments"]) == use["input"]
    result = second["request"]["messages"][2]["content"][0]
    (step,) = next_round(req, _row(got))  # the chain step; its result (our calculator's) swapped for the SDK's
    assert step.messages[-1].tool_call_id == call["id"]
    follow = step.model_copy(update={"messages": [*step.messages[:-1], step.messages[-1].model_copy(
        update={"content": result["content"], "is_error": result.get("is_error", False)})]})  # (ours: an error)
    replay.answers.append(second["response"].encode() if streamed else second["response"])
    again = _complete(AnthropicProvider(replay.base_url.removesuffix("/v1"), stream_above_tokens=0 if streamed else None),
                      follow, first["request"]["model"])
    assert _without_caller(replay.bodies[-1]["messages"]) == _without_caller(second["request"]["messages"])
    assert again.texts[0] and again.finish_reasons[0] in ("end_turn", "tool_use")


def test_anthropic_sdk_stream_fixture_text_and_tool_use(replay: Replay):
    """The SDK's streaming fixture: a text block, then a tool_use whose input comes in input_json_delta pieces
    (the file ends without the blank line that closes a server's last event: added here)."""
    replay.answers.append((BODIES / "tools_anthropic_stream_text_and_tool_use.sse").read_bytes() + b"\n\n")
    req = Request(suite="t", item="1", messages=[Message(role="user", content="What is the weather in Paris?")],
                  tools=_as_openai_tools([{"name": "get_weather", "description": "The weather in a city.",
                                           "input_schema": {"type": "object", "properties": {"location": {"type": "string"}}}}]),
                  decoding={"max_tokens": 1024})  # fmt: skip
    got = _complete(AnthropicProvider(replay.base_url.removesuffix("/v1"), stream_above_tokens=0), req, "claude-sonnet-4-20250514")
    assert got.texts == ["I'll check the current weather in Paris for you."] and got.finish_reasons == ["tool_use"]
    assert got.tool_calls == [[{"id": "toolu_01NRLabsLyVHZPKxbKvkfSMn", "type": "function",
                                "function": {"name": "get_weather", "arguments": '{"location": "Paris"}'}}]]
    assert (got.input_tokens, got.output_tokens) == (377, 65)


@pytest.mark.parametrize("split", [False, True])
def test_gemini_stream_without_index_ending_stop_round_trip(replay: Replay, split: bool):
    """Gemini's OpenAI-compatible stream: the measured chunk (a whole call, no index, its thought signature in
    extra_content); split: its arguments over a second indexless delta. The turn ends with finish_reason
    "stop" (both as open-webui/computer#224 reports). The call is read whole with its signature (a call,
    not an empty answer to retry), run, and sent back with the signature."""
    chunk = _json("tools_gemini_stream_chunk.json")["chunk"]
    call = chunk["choices"][0]["delta"]["tool_calls"][0]
    args = call["function"]["arguments"]
    frames = [chunk]
    if split:
        head = {**call, "function": {**call["function"], "arguments": args[:20]}}
        frames = [{**chunk, "choices": [{"delta": {"role": "assistant", "tool_calls": [head]}, "index": 0}]},
                  {**chunk, "choices": [{"delta": {"tool_calls": [{"function": {"arguments": args[20:]}}]}, "index": 0}]}]
    frames.append({**chunk, "choices": [{"delta": {}, "finish_reason": "stop", "index": 0}]})
    replay.answers.append(b"".join(b"data: " + orjson.dumps(f) + b"\n\n" for f in frames) + b"data: [DONE]\n\n")
    req = Request(suite="t", item="1", messages=[Message(role="user", content="Read the stage design skill.")],
                  tools=_json("tools_openai_chat.json")["request"]["tools"], decoding={"max_tokens": 100})
    got = _complete(OpenAIProvider(replay.base_url, stream_above_tokens=0), req, "gemini-3.8-flash")
    assert got.finish_reasons == ["stop"] and got.texts == [None]
    assert got.tool_calls == [[{"id": "call_297140", "type": "function", "function": {"name": "read", "arguments": args},
                                "extra_content": {"google": {"thought_signature": "…"}}}]]
    (follow,) = next_round(req, _row(got))
    replay.answers.append(orjson.loads((BODIES / "chat_default.json").read_bytes()))
    _complete(OpenAIProvider(replay.base_url), follow, "gemini-3.8-flash")
    sent = replay.bodies[-1]
    assert not sorted(_validator().iter_errors(sent), key=str)
    assert sent["messages"][1]["tool_calls"] == got.tool_calls[0]


def test_a_stream_repeating_id_and_name_in_every_chunk(replay: Replay):
    """Fireworks' chunk (a call-level `"name": null` beside the function), then chunks of the arguments that
    repeat id, type and name as Fireworks does (and DeepSeek, Qwen: the id; MiniMax on NIM: the name): one
    call, its id and name once, its arguments joined, nothing null carried."""
    chunk = _json("tools_fireworks_stream_chunk.json")["chunk"]
    call = chunk["choices"][0]["delta"]["tool_calls"][0]
    pieces = ['{"a": 12', '.5, "b"', ': 8}']
    frames = [chunk, *({**chunk, "choices": [{**chunk["choices"][0], "delta": {"tool_calls": [
        {**call, "function": {"name": "debug_tool", "arguments": p}}]}}]} for p in pieces),
        {**chunk, "choices": [{"index": 0, "delta": {}, "finish_reason": "tool_calls"}]}]
    replay.answers.append(b"".join(b"data: " + orjson.dumps(f) + b"\n\n" for f in frames) + b"data: [DONE]\n\n")
    req = Request(suite="t", item="1", messages=[Message(role="user", content="Debug it.")], decoding={"max_tokens": 100})
    got = _complete(OpenAIProvider(replay.base_url, stream_above_tokens=0), req, "accounts/fireworks/models/glm-5p2")
    assert got.tool_calls == [[{"id": "chatcmpl-tool-aa62", "type": "function",
                                "function": {"name": "debug_tool", "arguments": '{"a": 12.5, "b": 8}'}}]]
