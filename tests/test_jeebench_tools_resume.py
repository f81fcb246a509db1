"""JEEBench §4.2: a cot-tools run killed (SIGKILL, a real process) in the middle of its tool rounds resumes
with the same command and sends only the rounds not answered: every round whose row reached
results.jsonl is read back and its chain goes on from there (no answered round paid twice), and the
run ends with one row per (model, item, sample, pass), the rows of a run never interrupted."""

from __future__ import annotations

import os
import signal
import time
from collections import Counter
from pathlib import Path
from typing import Any

import orjson
import pytest
from aiohttp import web

from core.types import text_of
from suites.base import RunSpec
from suites.jeebench import build
from suites.jeebench.tools import ROUNDS
from tests.helpers import cli, rows, spawn, write_config
from tests.mock_openai import MessagesServer

ITEMS = 6
MODEL = "tool-always"
"""Calls until the round limit: a chain of 1 + ROUNDS calls per item."""


class Rounds(MessagesServer):
    """Records each call's (item prompt, round), chat and Messages alike: the round is the number of
    assistant turns sent."""

    def __init__(self, **kw: Any) -> None:
        super().__init__(**kw)
        self.rounds: list[tuple[str, int]] = []

    async def _record(self, request: web.Request) -> None:
        msgs = orjson.loads(await request.read()).get("messages") or []
        user = next(m["content"] for m in msgs if m.get("role") == "user")
        self.rounds.append((user if isinstance(user, str) else user[0]["text"],
                            sum(m.get("role") == "assistant" for m in msgs)))

    async def handle(self, request: web.Request) -> web.StreamResponse:
        await self._record(request)
        return await super().handle(request)

    async def handle_messages(self, request: web.Request) -> web.Response:
        await self._record(request)
        return await super().handle_messages(request)


@pytest.fixture
def srv():
    s = Rounds(latency_s=0.05).start()
    yield s
    s.stop()


def _env(cache: Path) -> dict[str, str]:
    return {**os.environ, "EVALSWEEP_CACHE_DIR": str(cache), "LITELLM_LOCAL_MODEL_COST_MAP": "True",
            "HF_HUB_OFFLINE": "1"}


def _args(cfg: Path, out: Path) -> list[str]:
    return ["run", "jeebench", "--variant", "cot-tools", "--models", MODEL, "--config", str(cfg), "--out", str(out),
            "--limit", str(ITEMS), "--no-live", "--no-score"]  # fmt: skip


def _round(row: dict[str, Any]) -> int:
    return 0 if row["pass"] == "answer" else int(row["pass"].removeprefix("tool"))


def _mid_chain(out: Path, least: int) -> bool:
    """At least `least` rows in, one chain among them begun with two rounds or more still to go."""
    path = out / "results.jsonl"
    lines = path.read_bytes().splitlines() if path.exists() else []
    if len(lines) < least:
        return False
    per_item: Counter[str] = Counter()
    for line in lines:
        try:
            per_item[orjson.loads(line)["item"]] += 1
        except orjson.JSONDecodeError:  # a line being written
            pass
    return any(0 < c < ROUNDS for c in per_item.values())


def _answers(out: Path) -> dict[tuple, tuple]:
    return {(r["item"], r["sample"], r["pass"]): (r.get("text"), r.get("tool_calls"), r.get("error"))
            for r in rows(out)}


@pytest.mark.parametrize(("kind", "at"), [("openai", 1 / 6), ("openai", 2 / 3), ("anthropic", 1 / 2)])
def test_sigkill_mid_chain_resumes_only_the_rounds_not_answered(tmp_path: Path, srv: Rounds, kind: str, at: float):
    """Killed after `at` of the rows; on Anthropic's Messages API the calls stream (input_json_delta)."""
    base = srv.base_url if kind == "openai" else srv.base_url.removesuffix("/v1")
    extra = "max_concurrency = 2\n" + ("stream_above_tokens = 0\n" if kind == "anthropic" else "")
    cfg = write_config(tmp_path / "c.toml", base, [MODEL], extra_endpoint=extra)
    cfg.write_text(cfg.read_text().replace('kind = "openai"', f'kind = "{kind}"'))
    ref = tmp_path / "ref"
    r = cli(*_args(cfg, ref), env=_env(tmp_path / "cache-ref"))
    assert r.returncode == 0, r.stderr
    planned = ITEMS * (1 + ROUNDS)
    assert len(srv.rounds) == planned == len(rows(ref))
    srv.rounds.clear()

    out, env = tmp_path / "run", _env(tmp_path / "cache")
    proc = spawn(_args(cfg, out), env)
    t0 = time.monotonic()
    while not _mid_chain(out, int(planned * at)):  # killed once a chain has 2+ rounds still to go
        assert proc.poll() is None and time.monotonic() - t0 < 120, proc.stderr.read() if proc.stderr else ""
        time.sleep(0.01)
    proc.send_signal(signal.SIGKILL)
    proc.wait(10)
    got = rows(out)
    answered = {(r["item"], _round(r)) for r in got}
    assert 0 < len(got) < planned
    per_item = Counter(r["item"] for r in got)
    assert any(0 < c < 1 + ROUNDS for c in per_item.values())  # killed in the middle of a chain

    srv.rounds.clear()
    r = cli(*_args(cfg, out), env=env)  # the same command
    assert r.returncode == 0, r.stderr
    item = {text_of(q.messages[-1].content): q.item
            for q in build(RunSpec(suite="jeebench", options={"variant": "cot-tools"}, limit=ITEMS))}
    sent = [(item[u], k) for u, k in srv.rounds]
    final = rows(out)
    # exactly the rounds not answered at the kill, each once (none answered is paid twice); a round
    # answered in the cache but killed before its row was written is read from the cache, not sent
    cached = {(r["item"], _round(r)) for r in final if r.get("cached")}
    assert len(sent) == len(set(sent))
    assert set(sent) | cached == {(i, k) for i in item.values() for k in range(ROUNDS + 1)} - answered
    assert not set(sent) & cached
    keys = [(r["model"], r["item"], r["sample"], r["pass"]) for r in final]
    assert len(keys) == len(set(keys)) == planned  # one row per (model, item, sample, pass)
    assert _answers(out) == _answers(ref)  # the chains of a run never interrupted
