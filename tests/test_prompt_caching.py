"""Prompt caching by the runner (#29): the breakpoints sent, the cache-aware fan-out order as a caching
mock following Anthropic's rules logs it (tests/mock_caching.py), and the billed usage; the switch off;
OpenAI's prompt_cache_key; suites' shared prefixes."""

from __future__ import annotations

import asyncio
import json
import os
from pathlib import Path
from typing import Any

import aiohttp
import orjson
import pytest

from cache.key import cache_key
from core.types import ImagePart, Message, Request, Row, user
from providers.anthropic import messages_body
from providers.cache_marks import EPHEMERAL, prefix_key
from providers.openai import OpenAIProvider
from runner.calls.fanout import Fanout
from runner.config import load_config
from runner.pool import build_models, close_models
from suites.base import RunSpec
from tests import caching_run
from tests.helpers import cli
from tests.mock_caching import CachingMock
from tests.mock_openai import MockServer

LONG = "Given data, reason about each quantity in turn. " * 250  # ~3,000 tokens
PNG = b"\x89PNG\r\n\x1a\n" + b"\0" * 64


def marks(body: dict[str, Any]) -> list[tuple[str, int, int]]:
    out = [("system", -1, i) for i, b in enumerate(body["system"]) if "cache_control" in b] if isinstance(
        body.get("system"), list) else []
    for mi, m in enumerate(body["messages"]):
        if isinstance(m["content"], list):
            out += [("messages", mi, bi) for bi, b in enumerate(m["content"]) if "cache_control" in b]
    return out


def text_seen(body: dict[str, Any]) -> list[str]:
    """The text the model reads, block by block (a string content is one text block)."""
    sys_ = body.get("system")
    out = [sys_] if isinstance(sys_, str) else [b["text"] for b in sys_ or []]
    for m in body["messages"]:
        c = m["content"]
        out += [c] if isinstance(c, str) else [b.get("text") or b["source"]["data"] for b in c]
    return out


def req(text: str = LONG, n: int = 1, **kw: Any) -> Request:
    return Request(suite="t", item=kw.pop("item", "i"), messages=kw.pop("messages", [user(text)]),
                   decoding={"temperature": 0.5, "n": n, "max_tokens": 64}, **kw)


# --- the breakpoints ----------------------------------------------------------------------------


def test_breakpoints_where_the_prompt_is_resent_and_nowhere_else() -> None:
    one = messages_body(req(), "claude-sonnet-4-5", {}, cache=True)
    assert marks(one) == [] and one["messages"][0]["content"] == LONG  # sent once: no write to pay
    sc = messages_body(req(n=8), "claude-sonnet-4-5", {}, cache=True)
    assert sc["messages"][0]["content"] == [{"type": "text", "text": LONG, "cache_control": EPHEMERAL}]
    assert text_seen(sc) == text_seen(one)  # the same input: a string is one text block
    resent = messages_body(req(resent=True), "claude-sonnet-4-5", {}, cache=True)
    assert marks(resent) == [("messages", 0, 0)]
    assert marks(messages_body(req(n=8), "claude-sonnet-4-5", {})) == []  # batch bodies, the switch off


def test_prefix_breakpoint_on_an_image_system_text_and_at_most_four() -> None:
    img = [user(ImagePart(data=PNG), "Which panel?")]
    body = messages_body(req(messages=img, prefix=(0, 0), n=8), "claude-sonnet-4-5", {}, cache=True)
    assert marks(body) == [("messages", 0, 0), ("messages", 0, 1)]  # the shared image, the whole prompt
    sys_msgs = [Message(role="system", content=LONG), user("Question 7?")]
    body = messages_body(req(messages=sys_msgs, prefix=(0, 0)), "claude-sonnet-4-5", {}, cache=True)
    assert body["system"] == [{"type": "text", "text": LONG, "cache_control": EPHEMERAL}] and marks(body) == [
        ("system", -1, 0)]
    theirs = {"system": [{"type": "text", "text": f"rule {i}", "cache_control": EPHEMERAL} for i in range(3)]}
    body = messages_body(req(messages=img, prefix=(0, 0), n=8), "claude-sonnet-4-5", theirs, cache=True)
    assert len(marks(body)) == 4  # a model's params bring 3: one of ours fits


def test_declared_prefix_and_resent_change_no_cache_key() -> None:
    r = req(n=8)
    assert cache_key(r, "m") == cache_key(r.model_copy(update={"prefix": (0, 0), "resent": True}), "m")


# --- the mock applies Anthropic's rules ---------------------------------------------------------


async def _post(base: str, body: dict[str, Any]) -> tuple[int, dict[str, Any]]:
    async with aiohttp.ClientSession() as s, s.post(base + "/v1/messages", json=body) as r:
        return r.status, await r.json()


def test_mock_rules_readable_after_the_answer_minimum_lifetime_four_marks() -> None:
    mock = CachingMock(latency_s=0.05).start()
    try:
        body = messages_body(req(n=8), "claude-sonnet-4-5", {}, cache=True)

        async def go() -> list[dict[str, Any]]:
            together = await asyncio.gather(_post(mock.base_url, body), _post(mock.base_url, body))
            after = await _post(mock.base_url, body)
            return [u for _, u in [*together, after]]

        a, b, c = [x["usage"] for x in asyncio.run(go())]
        assert a["cache_creation_input_tokens"] == b["cache_creation_input_tokens"] > 0  # sent together: two writes
        assert c["cache_read_input_tokens"] == a["cache_creation_input_tokens"] and c["input_tokens"] == 0
        mock.advance(301)  # 5 minutes from its last use: gone
        (_, d), = [asyncio.run(_post(mock.base_url, body))]
        assert d["usage"]["cache_creation_input_tokens"] > 0 and d["usage"]["cache_read_input_tokens"] == 0
        short = messages_body(req("short prompt", n=8), "claude-sonnet-4-5", {}, cache=True)
        _, e = asyncio.run(_post(mock.base_url, short))
        assert e["usage"]["cache_creation_input_tokens"] == 0  # under 1,024 tokens: not cached, not charged
        five = {**body, "system": [{"type": "text", "text": f"s{i}", "cache_control": EPHEMERAL} for i in range(4)]}
        status, err = asyncio.run(_post(mock.base_url, five))
        assert status == 400 and "maximum of 4" in err["error"]["message"]
    finally:
        mock.stop()


# --- the fan-out order, the billed usage, through the scheduler ----------------------------------


def _by_prompt(mock: CachingMock) -> dict[str, list[Any]]:
    out: dict[str, list[Any]] = {}
    for c in mock.calls:
        out.setdefault(c.prompt, []).append(c)
    return out


@pytest.mark.parametrize("stream", [False, True])
def test_sc8_first_sample_first_then_seven_reads(tmp_path: Path, stream: bool) -> None:
    mock = CachingMock(latency_s=0.1, hold_streams=stream).start()
    try:
        reqs = [req(f"Problem {k}. " + LONG, n=8, item=f"p{k}") for k in range(6)]
        if stream:  # calls over this output limit stream
            reqs = [r.model_copy(update={"decoding": r.decoding.model_copy(update={"max_tokens": 30000})})
                    for r in reqs]
        rows = caching_run.run(reqs, mock.base_url, tmp_path, concurrency=64)
    finally:
        mock.stop()
    assert sorted((r["item"], r["sample"]) for r in rows) == [(f"p{k}", s) for k in range(6) for s in range(8)]
    assert all(r["error"] is None for r in rows)
    for calls in _by_prompt(mock).values():
        first, *rest = sorted(calls, key=lambda c: c.arrived)
        assert len(rest) == 7 and all(c.stream == stream for c in calls)
        assert all(c.arrived >= first.began for c in rest)  # siblings only once the writer's answer began
        if stream:  # ...which for a stream is its first bytes, not its end
            assert all(c.arrived < first.ended for c in rest)
        assert first.usage["cache_creation_input_tokens"] > 0
        assert all(c.usage["cache_read_input_tokens"] == first.usage["cache_creation_input_tokens"] for c in rest)
        assert all(c.breakpoints == [("messages", 0, 0)] for c in calls)
    assert mock.billed()["ratio"] <= 0.30
    ours = sum(r["usage"]["cached_input_tokens"] for r in rows), sum(r["usage"]["cache_write_tokens"] for r in rows)
    assert ours == (mock.billed()["read"], mock.billed()["written"])  # the rows bill what the provider did


def test_switch_off_sends_no_breakpoint_and_pays_full_input(tmp_path: Path) -> None:
    mock = CachingMock(latency_s=0.05).start()
    try:
        rows = caching_run.run([req(n=8)], mock.base_url, tmp_path, caching=False)
    finally:
        mock.stop()
    assert len(rows) == 8 and all(c.breakpoints == [] for c in mock.calls)
    assert mock.billed()["ratio"] == 1.0


def test_shared_image_prefix_first_question_first_then_reads(tmp_path: Path) -> None:
    """MARVEL's questions on one puzzle image: the first goes, the others once it has answered."""
    mock = CachingMock(latency_s=0.05).start()
    img = ImagePart(data=PNG)
    reqs = [req(messages=[user(img, f"Question {q}?")], prefix=(0, 0), item=f"1/{q}") for q in range(5)]
    try:
        rows = caching_run.run(reqs, mock.base_url, tmp_path)
    finally:
        mock.stop()
    assert len(rows) == 5 and all(r["error"] is None for r in rows)
    first, *rest = sorted(mock.calls, key=lambda c: c.arrived)
    assert all(c.arrived >= first.began for c in rest)
    assert all(c.usage["cache_read_input_tokens"] == 1600 for c in rest)  # the image, read


def test_followers_lend_their_window_slot_to_the_next_groups_leader(tmp_path: Path) -> None:
    """Two slots in the scheduler's window: puzzle A's four followers wait for A's first question
    without holding it, so puzzle B's first question goes while A's is unanswered (the mock holds every
    answer until 2 requests have arrived: without the lending, B would arrive only after A's answer)."""
    mock = CachingMock(latency_s=0.01, hold_until=2).start()
    reqs = [req(messages=[user(ImagePart(data=PNG + p.encode()), f"Question {q}?")], prefix=(0, 0), item=f"{p}/{q}")
            for p in "AB" for q in range(5)]
    try:
        rows = caching_run.run(reqs, mock.base_url, tmp_path, window=2, answered_before=True)
    finally:
        mock.stop()
    assert len(rows) == 10 and all(r["error"] is None for r in rows)
    a0, b0 = mock.calls[:2]
    assert (a0.prompt, b0.prompt) == ("Question 0?", "Question 0?") and b0.arrived <= a0.began


def test_critique_pass_reads_the_first_pass_prompt(tmp_path: Path) -> None:
    def critique(r: Request, row: Row, spec: RunSpec) -> list[Request]:
        if r.pass_ != "answer":
            return []
        msgs = [*r.messages, Message(role="assistant", content=row["text"]), user("Find any problems.")]
        return [r.model_copy(update={"pass_": "critique", "messages": msgs, "resent": False, "prefix": (0, 0)})]

    mock = CachingMock(latency_s=0.05).start()
    try:
        rows = caching_run.run([req(resent=True)], mock.base_url, tmp_path, follow_up=critique)
    finally:
        mock.stop()
    assert sorted(r["pass"] for r in rows) == ["answer", "critique"]
    answer, crit = mock.calls
    assert crit.usage["cache_read_input_tokens"] == answer.usage["cache_creation_input_tokens"] > 0


def test_a_leader_without_an_answer_hands_the_lead_on(tmp_path: Path) -> None:
    """Three requests sharing a prefix: the first call fails, so the second leads, alone, and only once
    it has answered does the third go."""
    cfg = load_config(caching_run.config(tmp_path, "http://127.0.0.1:9"))
    models = build_models(cfg, ["claude"])
    m = models["claude"]
    order: list[str] = []

    async def go() -> None:
        def send_for(r: Request):  # noqa: ANN202
            async def send(g: list[int]) -> list[Row]:
                order.append(f"start {r.item}")
                await asyncio.sleep(0.01)
                order.append(f"end {r.item}")
                return [{"error": "boom" if r.item == "a" else None, "sample": g[0]}]
            return send

        fan = Fanout()
        reqs = [req(messages=[Message(role="system", content=LONG), user(f"Q {x}")], prefix=(0, 0), item=x)
                for x in "abc"]
        await asyncio.gather(*(fan.send(r, m, [[0]], send_for(r)) for r in reqs))
        await close_models(models)

    asyncio.run(go())
    assert order[:4] == ["start a", "end a", "start b", "end b"] and order[4:] == ["start c", "end c"]


def test_cli_sc8_on_claude_scores_say_seven_eighths_read(tmp_path: Path) -> None:
    """`evalsweep run jsonl:... --samples 8` on a Claude endpoint, end to end: scores.json's prompt_cache."""
    data = tmp_path / "d.jsonl"
    data.write_bytes(b"".join(orjson.dumps({"id": f"q{k}", "prompt": f"Problem {k}. " + LONG, "choices": list("wxyz"),
                                            "answer": "A"}) + b"\n" for k in range(3)))
    mock = CachingMock(latency_s=0.05).start()
    try:
        cfg = caching_run.config(tmp_path, mock.base_url)
        env = {**os.environ, "LITELLM_LOCAL_MODEL_COST_MAP": "True"}
        out = tmp_path / "run"
        done = cli("run", f"jsonl:{data}", "--models", "claude", "--config", str(cfg), "--out", str(out),
                   "--no-live", "--samples", "8", "--temperature", "0.5", env=env)
    finally:
        mock.stop()
    assert done.returncode == 0, done.stderr
    pc = json.loads((out / "scores.json").read_text())["models"]["claude"]["prompt_cache"]
    assert pc["cached_share"] == pytest.approx(7 / 8, abs=0.01) and pc["saved_usd"] > 0
    assert mock.billed()["ratio"] <= 0.30 and len(mock.calls) == 24


# --- OpenAI: prompt_cache_key --------------------------------------------------------------------


def test_openai_prompt_cache_key_per_shared_prefix(tmp_path: Path) -> None:
    server = MockServer().start()
    sys_ = Message(role="system", content=LONG)

    async def body(r: Request, **kw: Any) -> dict[str, Any]:
        p = OpenAIProvider(server.base_url, **kw)
        try:
            await p.complete(r.model_copy(update={"model": "ok-a"}), "ok-a", 1, 0, None, {})
        finally:
            await p.close()
        return server.last_body["ok-a"]

    try:
        a = asyncio.run(body(req(messages=[sys_, user("Q1")], prefix=(0, 0)), prompt_cache_key=True))
        b = asyncio.run(body(req(messages=[sys_, user("Q2")], prefix=(0, 0)), prompt_cache_key=True))
        other = asyncio.run(body(req(messages=[Message(role="system", content="x" + LONG), user("Q1")],
                                     prefix=(0, 0)), prompt_cache_key=True))
        plain = asyncio.run(body(req(messages=[sys_, user("Q1")]), prompt_cache_key=True))
        off = asyncio.run(body(req(messages=[sys_, user("Q1")], prefix=(0, 0)), prompt_cache_key=True,
                               prompt_caching=False))
    finally:
        server.stop()
    assert a["prompt_cache_key"] == b["prompt_cache_key"] == prefix_key(req(messages=[sys_, user("Q9")],
                                                                           prefix=(0, 0)))
    assert other["prompt_cache_key"] != a["prompt_cache_key"]
    assert "prompt_cache_key" not in plain and "prompt_cache_key" not in off


def test_config_switch_and_openai_host(tmp_path: Path) -> None:
    f = tmp_path / "c.toml"
    f.write_text('[[endpoints]]\nname = "o"\nbase_url = "https://api.openai.com/v1"\n[[endpoints]]\nname = "v"\n'
                 'base_url = "http://127.0.0.1:9/v1"\nprompt_caching = false\n[[models]]\nname = "a"\nendpoint = "o"\n'
                 '[[models]]\nname = "b"\nendpoint = "v"\n')
    models = build_models(load_config(f), ["a", "b"])
    a, b = models["a"].lanes[0].provider, models["b"].lanes[0].provider
    assert a.cache_key and a.caches_prompts and not b.cache_key and not b.caches_prompts
    asyncio.run(close_models(models))


# --- suites say where their shared prefix ends --------------------------------------------------


def test_marvel_questions_on_one_image_share_it(marvel_data: Path) -> None:
    from suites.marvel import SUITE

    reqs = list(SUITE.build(RunSpec(suite="marvel", options={"data_dir": str(marvel_data / "marvel")}, limit=2)))
    by = {r.item: r.prefix for r in reqs}
    # avr and fine open with the puzzle image, the three coarse questions with its index-free one
    assert by["1/avr"] == by["1/fine"] == by["1/coarse-whole"] == (0, 0)
    assert len({prefix_key(r) for r in reqs if r.item.startswith("1/")}) == 2
