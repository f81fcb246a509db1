"""JEEBench §4.2 function calling on more wires than the unstreamed OpenAI chat one, against real local
servers on 127.0.0.1 (tests/mock_openai.py, whose answers tests/mock_sse.py streams): a streamed chat
answer's `tool_calls` deltas are assembled into the unstreamed body's `tool_calls`, so a streamed
cot-tools run writes the rows an unstreamed one does."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import pytest

from cli.main import main
from tests.helpers import write_config
from tests.mock_openai import MockServer

MODELS = ["gpt-4-0613", "tool-bad-args", "tool-never", "tool-always"]
SAME = ("text", "tool_calls", "finish_reason", "usage", "cost_usd", "error")
"""What a row says about its answer (not when or how fast it came)."""


@pytest.fixture
def srv():
    s = MockServer().start()
    yield s
    s.stop()


def _rows(path: Path) -> list[dict[str, Any]]:
    return [json.loads(line) for line in path.read_text().splitlines() if line.strip()]


def _run(tmp_path: Path, base_url: str, name: str, extra_endpoint: str = "", models: list[str] = MODELS
         ) -> dict[tuple, dict[str, Any]]:
    cfg = write_config(tmp_path / f"{name}.toml", base_url, models, extra_endpoint=extra_endpoint)
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
