"""Long calls stream (issue 27, part 5), against real local servers on 127.0.0.1 (tests.mock_sse turns
each mock's answer into the provider's server-sent events and injects stream faults):
- which calls stream: Anthropic's SDK rule (max_tokens > 21,333; > 8,192 for Opus 4/4.1), an endpoint's
  `stream_above_tokens`, OpenAI calls by their maximum output;
- a streamed answer is the non-streamed one: texts, finish reasons and usage (cache, reasoning) equal;
- the timeout of a streamed call is an idle one: an answer slower than `timeout_s` in total arrives;
- a stream cut mid-answer (stall, dropped connection, error event) is one error row, finish_reason
  "partial", with the usage reported before the cut, logged and counted, never re-sent; a failure
  before any output is retried.
"""

from __future__ import annotations

import asyncio
import logging
from pathlib import Path

import orjson
import pytest

from cli.main import main
from core.types import Completion, Request, user
from providers.anthropic import AnthropicProvider
from providers.base import ProviderError
from providers.openai import OpenAIProvider
from providers.stream import LONG_OUTPUT_TOKENS, anthropic_streams
from runner.config import ConfigError, load_config
from runner.pool import build_models, close_models
from tests.helpers import fake_key, rows, run_args
from tests.mock_batch import MockBatchServer
from tests.mock_contract import ContractServer
from tests.mock_sse import message_events

LONG = "Explain, step by step and in detail, how you reach the answer to this question. " * 6


@pytest.fixture
def contract():
    srv = ContractServer().start()
    yield srv
    srv.stop()


@pytest.fixture
def mock():
    srv = MockBatchServer(delay_s=0.0, timeout_hang_s=3.0).start()
    yield srv
    srv.stop()


def _req(prompt: str, max_tokens: int | None = None, temperature: float | None = 0.0) -> Request:
    return Request(suite="s", item="i", messages=[user(prompt)],
                   decoding={"max_tokens": max_tokens, "temperature": temperature})


def _call(provider, req: Request, model: str, n: int = 1, params: dict | None = None) -> Completion:
    async def go() -> Completion:
        try:
            return await provider.complete(req, model, n, 0, None, params or {})
        finally:
            await provider.close()

    return asyncio.run(go())


def test_which_anthropic_calls_stream_follows_the_sdk():
    """anthropic-sdk-python `_calculate_nonstreaming_timeout`: 3600 * max_tokens / 128,000 > 600 s refuses;
    `MODEL_NONSTREAMING_TOKENS`: 8,192 for Claude Opus 4 and 4.1."""
    assert LONG_OUTPUT_TOKENS == 600 * 128_000 // 3600
    assert not anthropic_streams(21_333, "claude-sonnet-4-5")
    assert anthropic_streams(21_334, "claude-sonnet-4-5")
    assert anthropic_streams(64_000, "claude-haiku-4-5")
    for opus in ("claude-opus-4-1-20250805", "claude-opus-4-20250514", "claude-opus-4-0", "anthropic.claude-opus-4-1"):
        assert anthropic_streams(8_193, opus) and not anthropic_streams(8_192, opus)
    assert not anthropic_streams(8_193, "claude-opus-4-5")  # not in the SDK's table
    assert anthropic_streams(1_001, "claude-sonnet-4-5", above=1_000)  # an endpoint may lower the bar
    assert anthropic_streams(30_000, "claude-sonnet-4-5", above=100_000)  # ... never raise it


def test_messages_stream_is_the_unstreamed_answer(contract: ContractServer):
    """Same call, streamed (64,000 > the SDK's limit) and not (16,000): the same texts, stop reasons and
    usage, thinking blocks and cache reads/writes included; an exhausted budget stays exhausted."""
    base = contract.base_url.removesuffix("/v1")
    thinking = {"thinking": {"type": "enabled", "budget_tokens": 4096}}
    for prompt, params, temp in ((LONG, {}, 0.0), (LONG, thinking, None), (LONG + "[[exhaust]]", thinking, None)):
        streamed = _call(AnthropicProvider(base), _req(prompt, 64_000, temp), "claude-sonnet-4-5", params=params)
        whole = _call(AnthropicProvider(base), _req(prompt, 16_000, temp), "claude-sonnet-4-5", params=params)
        assert streamed == whole
        assert whole.input_tokens and whole.cached_input_tokens and whole.cache_write_tokens  # the usage is there
    assert streamed.texts == [None] and streamed.finish_reasons == ["max_tokens"]
    assert contract.sse.streamed["claude-sonnet-4-5"] == 3 and contract.status[200] == 6
    # Opus 4.1: the SDK's 8,192 limit
    _call(AnthropicProvider(base), _req(LONG, 16_000), "claude-opus-4-1")
    assert contract.sse.streamed["claude-opus-4-1"] == 1


def test_chat_stream_is_the_unstreamed_answer(contract: ContractServer):
    """OpenAI chat: usage asked for with stream_options.include_usage; n choices, cached and reasoning
    tokens, an exhausted reasoning budget: all as the non-streamed call gives them."""
    cases = [("gpt-4o", 3, {}, 0.0), ("o3", 1, {"max_completion_tokens": 4000}, None),
             ("o3", 1, {"max_completion_tokens": 4000}, None)]
    for i, (model, n, params, temp) in enumerate(cases):
        prompt = LONG + ("[[exhaust]]" if i == 2 else "")
        req = _req(prompt, 4000 if not params else None, temp)
        streamed = _call(OpenAIProvider(contract.base_url, stream_above_tokens=1000), req, model, n, params)
        whole = _call(OpenAIProvider(contract.base_url), req, model, n, params)
        assert streamed == whole and len(whole.texts) == n
    assert whole.texts == [""] and whole.finish_reasons == ["length"] and whole.reasoning_tokens
    assert sum(contract.sse.streamed.values()) == 3 and contract.status[200] == 6
    assert contract.sse.stream_options == [{"include_usage": True}] * 3


def test_responses_stream_is_the_unstreamed_answer(contract: ContractServer, tmp_path: Path):
    """A Responses-only model (o3-pro): the streamed answer is the one `response.completed` (or
    `.incomplete`) carries, parsed as the non-streamed one; max_output_tokens 2,048 + 16,384 reasoning
    headroom streams only where the endpoint's stream_above_tokens is below it."""
    cfg = tmp_path / "c.toml"
    cfg.write_text("".join(
        f'[[endpoints]]\nname = "{e}"\nkind = "openai"\nbase_url = "{contract.base_url}"\n{extra}'
        f'[[models]]\nname = "{e}"\nendpoint = "{e}"\nmodel = "o3-pro"\n'
        for e, extra in (("whole", ""), ("streams", "stream_above_tokens = 4096\n"))))
    models = build_models(load_config(cfg), ["whole", "streams"])

    async def go() -> list[list[Completion]]:
        try:
            return [[await models[name].lanes[0].provider.complete(
                _req(prompt, 2048), "o3-pro", 1, 0, None, models[name].cfg.params, models[name].shape)
                for name in ("streams", "whole")] for prompt in (LONG, LONG + "[[exhaust]]")]
        finally:
            await close_models(models)

    for streamed, whole in asyncio.run(go()):
        assert streamed == whole and whole.output_tokens and whole.reasoning_tokens
    assert whole.finish_reasons == ["length"] and whole.texts == [None]
    assert contract.sse.streamed == {"o3-pro": 2} and contract.status[200] == 4


@pytest.mark.parametrize("kind", ["openai", "anthropic"])
def test_an_unstreamed_timeout_is_sent_again_streamed(mock: MockBatchServer, caplog, kind: str):
    """A short call that got no answer within its total timeout: it is said at once and sent again as a
    stream (idle timeout), as are the model's later calls: never the same total timeout six times."""
    model = "ok-a" if kind == "openai" else "claude-sonnet-4-5"
    p = (OpenAIProvider(mock.base_url, timeout_s=0.5) if kind == "openai"
         else AnthropicProvider(mock.base_url.removesuffix("/v1"), timeout_s=0.5))
    mock.timeout_hang_s = 2.0

    async def go() -> list[Completion | Exception]:
        out: list[Completion | Exception] = []
        try:
            for prompt in ("Q [[fault:hang*1]]", "Q [[fault:hang*1]]", "Q2"):
                try:
                    out.append(await p.complete(_req(prompt, 1000), model, 1, 0, None, {}))
                except ProviderError as e:
                    out.append(e)
        finally:
            await p.close()
        return out

    with caplog.at_level(logging.WARNING, logger="evalsweep"):
        first, again, later = asyncio.run(go())
    assert isinstance(first, ProviderError) and first.retryable
    assert isinstance(again, Completion) and again.texts[0] and isinstance(later, Completion)
    assert mock.sse.streamed == {model: 2} and p.long == {model}
    said = [r.getMessage() for r in caplog.records if "no answer in 0.5 s" in r.getMessage()]
    assert len(said) == 1 and model in said[0] and "streamed" in said[0]


def test_chat_without_a_limit_streams_by_the_model_maximum(contract: ContractServer):
    """No max_tokens in the body: the model's maximum in litellm's map decides (o3: 100,000 > 21,333)."""
    p = OpenAIProvider(contract.base_url)
    assert p.model_max("o3") and p.model_max("o3") > LONG_OUTPUT_TOKENS
    _call(p, _req(LONG, None, None), "o3")
    _call(OpenAIProvider(contract.base_url), _req(LONG, None), "a-model-no-map-knows")
    assert contract.sse.streamed == {"o3": 1}


def test_a_server_ignoring_stream_is_parsed_whole(contract: ContractServer):
    """A gateway that answers JSON to a streamed request: the body is parsed as the non-streamed one."""
    contract.sse.enabled = False
    comp = _call(AnthropicProvider(contract.base_url.removesuffix("/v1")), _req(LONG, 64_000), "claude-sonnet-4-5")
    assert comp.texts[0] and comp.finish_reasons == ["end_turn"] and comp.output_tokens
    assert contract.bodies["claude-sonnet-4-5"]["stream"] is True


def test_streamed_timeout_is_an_idle_one(mock: MockBatchServer):
    """Every event 0.2 s apart: the whole answer takes longer than timeout_s = 1 s, yet arrives, because a
    streamed call's timeout counts from the last byte."""
    mock.sse.gap_s = 0.2
    base = mock.base_url.removesuffix("/v1")
    frames = len(message_events({"content": [{"type": "text", "text": "a" * 40}], "usage": {}}))
    assert frames * mock.sse.gap_s > 1.0  # the premise: longer in total than the timeout
    comp = _call(AnthropicProvider(base, timeout_s=1.0), _req("Q [[stream:slow]]", 64_000), "claude-sonnet-4-5")
    assert comp.texts[0] and comp.texts[0].endswith(".") and comp.finish_reasons == ["end_turn"]
    comp = _call(OpenAIProvider(mock.base_url, timeout_s=1.0, stream_above_tokens=0), _req("Q [[stream:slow]]", 50), "ok-a")
    assert comp.texts[0] and comp.finish_reasons == ["stop"]
    assert mock.total == 2


def test_partial_choices_keep_the_finished_ones(mock: MockBatchServer):
    """n = 3, the connection dropped halfway: the choice that finished keeps its answer, the others are
    partial; one request, counted and logged."""
    p = OpenAIProvider(mock.base_url, stream_above_tokens=0)
    comp = _call(p, _req("Q [[stream:cut]]", 50), "ok-a", n=3)
    assert comp.finish_reasons == ["stop", "partial", "partial"]
    assert comp.texts[0] and comp.texts[1:] == [None, None]
    assert comp.input_tokens is None  # the usage chunk comes last: nothing was reported before the cut
    assert p.partials == {"ok-a": 1} and mock.total == 1


def test_sse_reader_reads_the_format():
    """Events split anywhere across chunks, CRLF line ends, comments, multi-line data, a last event
    without its blank line (dropped, as the SSE spec says)."""
    from providers.stream import sse_events

    wire = b": keep-alive\r\nevent: a\r\ndata: {\"x\":\r\ndata: 1}\r\n\r\ndata: [DONE]\n\nevent: b\ndata: lost"

    async def chunks():
        for i in range(0, len(wire), 3):
            yield wire[i : i + 3]

    async def go():
        return [e async for e in sse_events(chunks())]

    assert asyncio.run(go()) == [("a", b'{"x":\n1}'), ("message", b"[DONE]")]


def test_visible_reasoning_counts_as_output():
    """A DeepSeek-style stream cut while it reasons (`reasoning_content` deltas, no answer text yet) was
    generating billed output: a partial answer, not a failure to retry."""
    from collections import Counter

    from providers.stream import ChatStream, StreamCut, finished

    asm = ChatStream(1)
    for delta in ({"role": "assistant", "content": ""}, {"reasoning_content": "First, 2+2"}):
        asm.feed("message", orjson.dumps({"choices": [{"index": 0, "delta": delta, "finish_reason": None}]}))
    seen: Counter[str] = Counter()
    comp = finished(asm, StreamCut("connection dropped mid-stream"), "deepseek-reasoner", seen, {})
    assert comp.finish_reasons == ["partial"] and seen == {"deepseek-reasoner": 1}
    with pytest.raises(StreamCut):  # the same cut before any output: retried
        finished(ChatStream(1), StreamCut("connection dropped mid-stream"), "deepseek-reasoner", seen, {})


def test_a_stream_ending_without_its_final_event_is_partial(mock: MockBatchServer):
    base = mock.base_url.removesuffix("/v1")
    p = AnthropicProvider(base)
    comp = _call(p, _req(LONG + "[[stream:eof]]", 64_000), "claude-sonnet-4-5")
    assert comp.texts == [None] and comp.finish_reasons == ["partial"] and comp.input_tokens
    assert p.partials == {"claude-sonnet-4-5": 1} and mock.total == 1 and mock.sse.cut == {"eof": 1}


def _config(path: Path, base: str, stream_above: int, idle: float) -> Path:
    common = (f"stream_above_tokens = {stream_above}\nidle_timeout_s = {idle}\ntimeout_s = 30\n"
              'api_key_env = "MOCK_STREAM_KEY"\nretry_initial_s = 0.01\nretry_max_s = 0.05\n')
    path.write_text(
        f'[[endpoints]]\nname = "claude"\nkind = "anthropic"\nbase_url = "{base.removesuffix("/v1")}"\n{common}'
        f'[[endpoints]]\nname = "oai"\nkind = "openai"\nbase_url = "{base}"\n{common}'
        '[[models]]\nname = "claude"\nendpoint = "claude"\nmodel = "claude-sonnet-4-5"\n'
        '[[models]]\nname = "chat"\nendpoint = "oai"\nmodel = "ok-chat"\nprice_in = 1.0\nprice_out = 2.0\n'
    )
    return path


FAULTS = ("plain", "[[stream:stall]]", "[[stream:cut]]", "[[stream:error]]", "[[stream:error_first*1]]",
          "[[stream:hang*1]]")


def test_sweep_rows_for_cut_streams(tmp_path: Path, mock: MockBatchServer, monkeypatch, caplog):
    """Through `evalsweep run`: every planned call ends with exactly one row; a stream cut after output is
    one error row (finish_reason partial, the input usage billed for Claude), sent once and logged; one
    cut before any output, or no answer at all within the idle timeout, is retried and answered."""
    key = fake_key("streamtest")
    monkeypatch.setenv("MOCK_STREAM_KEY", key)
    mock.sse.stall_s = 3.0
    data = tmp_path / "d.jsonl"
    data.write_bytes(b"".join(
        orjson.dumps({"id": f"q{i}", "prompt": f"{LONG} Question {i} {f}", "choices": ["w", "x", "y", "z"],
                      "answer": "A"}) + b"\n" for i, f in enumerate(FAULTS)))
    cfg = _config(tmp_path / "c.toml", mock.base_url, 1000, 0.5)  # jsonl asks max_tokens 1024: streamed
    with caplog.at_level(logging.WARNING, logger="evalsweep"):
        code = main(run_args(data, "claude,chat", cfg, str(tmp_path / "run")))
    out = rows(tmp_path / "run")
    assert code == 3  # some rows are errors
    assert sorted((r["model"], r["item"]) for r in out) == sorted(
        (m, f"q{i}") for m in ("claude", "chat") for i in range(len(FAULTS)))
    by = {(r["model"], FAULTS[int(r["item"][1:])]): r for r in out}
    for model in ("claude", "chat"):
        mid = "ok-chat" if model == "chat" else "claude-sonnet-4-5"
        for f in FAULTS[1:4]:
            r = by[(model, f)]
            assert r["error"] and r["finish_reason"] == "partial" and r["attempts"] == 1, r
        for f in ("plain", "[[stream:error_first*1]]", "[[stream:hang*1]]"):
            r = by[(model, f)]
            assert r["error"] is None and r["text"] and r["attempts"] == (1 if f == "plain" else 2), r
        assert mock.sse.streamed[mid] == len(FAULTS) + 2  # two re-sent: nothing had been answered
        claude_cut = by[("claude", "[[stream:cut]]")]
    assert claude_cut["usage"]["input_tokens"] > 0 and claude_cut["cost_usd"] > 0  # message_start's input
    assert by[("chat", "[[stream:cut]]")]["usage"]["input_tokens"] is None  # OpenAI reports usage last
    for f in FAULTS[1:4]:  # the cut ones were sent once per model: never re-sent
        assert sum(n for p, n in mock.prompts.items() if f in p) == 2, f
    said = [r.getMessage() for r in caplog.records if "cut mid-stream" in r.getMessage()]
    assert len(said) == 6 and any("claude-sonnet-4-5" in s for s in said) and any("ok-chat" in s for s in said)
    text = (tmp_path / "run" / "results.jsonl").read_text() + "\n".join(r.getMessage() for r in caplog.records)
    assert key not in text


def test_config_keys(tmp_path: Path):
    cfg = tmp_path / "c.toml"
    base = '[[endpoints]]\nname = "e"\nkind = "anthropic"\n'
    cfg.write_text(base + "stream_above_tokens = 4096\nidle_timeout_s = 90\n")
    ep = load_config(cfg).endpoints[0]
    assert (ep.stream_above_tokens, ep.idle_timeout_s, ep.timeout_s) == (4096, 90.0, 600.0)
    for bad in ("stream_above_tokens = -1", "idle_timeout_s = 0"):
        cfg.write_text(base + bad + "\n")
        with pytest.raises(ConfigError, match=bad.split()[0]):
            load_config(cfg)
