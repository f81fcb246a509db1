"""JEEBench §4.2 (cot-tools) in batch mode against the mock batch servers on 127.0.0.1 (tests/mock_batch.py,
OpenAI's Batch API and Anthropic's Message Batches): a batch answer's `tool_calls` reach the row and the cache
as a live answer's do, so each tool round goes out as the next batch and the run writes the live run's rows
at the batch price. (Before: a tool-only answer became an error row, and a Claude answer of text plus calls
kept the text alone: read as the final answer, an unread, scored wrong.)"""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import pytest

from cli.main import main
from suites.jeebench.tools import ROUNDS
from tests.helpers import write_config
from tests.mock_batch import MockBatchServer
from tests.mock_openai import THINKING_SIGNATURE
from tests.test_batch import API, FAST, anthropic_config

SAME = ("text", "tool_calls", "finish_reason", "usage", "error")
"""What a row says about its answer (not when, how fast, or at which price)."""


@pytest.fixture
def mock():
    srv = MockBatchServer(delay_s=0.05).start()
    yield srv
    srv.stop()


def _config(tmp: Path, name: str, kind: str, base: str, models: list[str], extra: str) -> Path:
    if kind == "openai":
        return write_config(tmp / f"{name}.toml", base + "/v1", models, extra_endpoint=extra)
    return anthropic_config(tmp / f"{name}.toml", base, models, extra)


def _run(tmp: Path, cfg: Path, models: list[str], name: str, *extra: str) -> dict[tuple, dict[str, Any]]:
    out = tmp / name
    args = ["run", "jeebench", "--variant", "cot-tools", "--models", ",".join(models), "--config", str(cfg),
            "--out", str(out), "--limit", "2", "--no-live", "--no-score", *extra]  # fmt: skip
    assert main(args) == 0
    rows = [json.loads(x) for x in (out / "results.jsonl").read_text().splitlines() if x.strip()]
    by = {(r["model"], r["item"], r["sample"], r["pass"]): r for r in rows}
    assert len(by) == len(rows)  # one final row per (model, item, sample, pass)
    return by


@pytest.mark.parametrize("kind", ["openai", "anthropic"])
def test_cot_tools_in_batches_gives_the_live_rows(tmp_path: Path, mock: MockBatchServer, kind: str):
    first = "gpt-4-0613" if kind == "openai" else "claude-tools"
    models = [first, "tool-bad-args", "tool-never", "tool-always"]
    base = f"http://127.0.0.1:{mock.port}"
    live = _run(tmp_path, _config(tmp_path, "live", kind, base, models, FAST), models, "live", "--no-cache")
    assert not mock.batches
    calls = mock.total
    cfg = _config(tmp_path, "batch", kind, base, models, FAST + API + "batch = true\n")
    cache = str(tmp_path / "cache")
    got = _run(tmp_path, cfg, models, "batch", "--batch", "on", "--cache-dir", cache)
    assert mock.total == calls  # not one live call: every round went in a batch
    assert got.keys() == live.keys()
    for k, r in got.items():
        assert {f: r.get(f) for f in SAME} == {f: live[k].get(f) for f in SAME}, k
        assert r["batch_id"] in mock.batches and r["cost_usd"] == pytest.approx(0.5 * live[k]["cost_usd"])
    # each round of a model its own batch: the answer pass, then tool1.. (tool-always's chains: to tool8)
    rounds = {(k[0], k[3]) for k in got}
    assert len(mock.batches) == len(rounds) == len({r["batch_id"] for r in got.values()})
    assert all(len({(k[0], k[3]) for k, r in got.items() if r["batch_id"] == b}) == 1 for b in mock.batches)
    assert {k[3] for k in got if k[0] == "tool-always"} == {"answer", *(f"tool{i}" for i in range(1, ROUNDS + 1))}
    called = got[(first, next(k[1] for k in got if k[0] == first), 0, "answer")]
    assert called["tool_calls"][0]["function"] == {"name": "add", "arguments": '{"a": 12.5, "b": 8}'}
    assert called["text"] == ("" if kind == "openai" else "I'll use the calculator.")
    assert not [r for r in got.values() if r["error"]]
    # the cache holds the calls too: the same run again sends nothing and writes the same rows
    n_batches = len(mock.batches)
    again = _run(tmp_path, cfg, models, "again", "--batch", "on", "--cache-dir", cache)
    assert len(mock.batches) == n_batches and mock.total == calls
    assert {k: {f: r.get(f) for f in SAME} for k, r in again.items()} == {
        k: {f: r.get(f) for f in SAME} for k, r in got.items()}


@pytest.mark.parametrize("kind", ["openai", "anthropic"])
def test_a_tool_error_goes_to_anthropic_flagged_is_error(tmp_path: Path, mock: MockBatchServer, kind: str):
    """A result that is the calculator's error (tool-bad-args: a call without `b`, or arguments not JSON) goes
    back as a `tool_result` with `is_error: true` on Anthropic's API (https://docs.anthropic.com/en/docs/
    agents-and-tools/tool-use/implement-tool-use#handling-results-from-client-tools); a good result without it,
    and OpenAI's `role: tool` message has no such field."""
    first = "gpt-4-0613" if kind == "openai" else "claude-tools"
    models = [first, "tool-bad-args"]
    cfg = _config(tmp_path, "c", kind, f"http://127.0.0.1:{mock.port}", models, FAST + API + "batch = true\n")
    _run(tmp_path, cfg, models, "run", "--batch", "on", "--no-cache")
    sent: dict[str, list[dict[str, Any]]] = {}
    for b in mock.batches.values():
        for _, body in b["reqs"]:
            last = body["messages"][-1]
            if kind == "openai" and last["role"] == "tool":
                sent[body["model"]] = [last]
            elif kind == "anthropic" and isinstance(last["content"], list):
                sent[body["model"]] = [x for x in last["content"] if x.get("type") == "tool_result"]
    assert set(sent) == set(models)
    (bad,), (good,) = sent["tool-bad-args"], sent[first]
    assert bad["content"].startswith("error: ") and good["content"] == "20.5"
    if kind == "anthropic":
        assert bad["is_error"] is True and "is_error" not in good
    else:
        assert "is_error" not in bad and "is_error" not in good
    said = json.loads((tmp_path / "run" / "manifest.json").read_text())["protocol"]["deviations"]
    assert any("as function tools (OpenAI's `tools`; Anthropic's `tool_use`)" in d for d in said)


def test_claude_thinking_blocks_go_back_in_the_next_batch(tmp_path: Path, mock: MockBatchServer):
    """With extended thinking on, the thinking block of a batched turn that called tools (carried on the row's
    first call) starts the assistant turn its next round sends, in the next batch, as Anthropic requires."""
    models = ["claude-sonnet-4-5"]  # (a model that thinks: thinking_budget is sent)
    base = f"http://127.0.0.1:{mock.port}"
    cfg = anthropic_config(tmp_path / "c.toml", base, models, FAST + "batch = true\n")
    cfg.write_text(cfg.read_text() + "thinking_budget = 1024\n")
    got = _run(tmp_path, cfg, models, "run", "--batch", "on", "--no-cache")
    assert {k[3] for k in got} == {"answer", "tool1"} and not [r for r in got.values() if r["error"]]
    rounds = [body for b in mock.batches.values() for _, body in b["reqs"] if len(body["messages"]) > 1]
    assert len(rounds) == 2 and all(b["thinking"] == {"type": "enabled", "budget_tokens": 1024} for b in rounds)
    for body in rounds:
        turn = body["messages"][-2]["content"]
        assert [b["type"] for b in turn] == ["thinking", "text", "tool_use"]
        assert turn[0]["signature"] == THINKING_SIGNATURE
