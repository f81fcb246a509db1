"""JEEBench §4.2 (cot-tools) on a model served only by OpenAI's Responses API (gpt-5-pro), against the mock's
live `/v1/responses` (tests/mock_batch.py `tool_response`, which refuses what OpenAI refuses: chat-shaped tools,
items sent back with their ids under `store: false`). Before: `providers/responses.py` sent no `tools`, so the
model ran plain CoT under the cot-tools label, without the calculator, and nothing said so."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from cli.main import main
from tests.mock_batch import MockBatchServer
from tests.test_batch_eligibility import _responses_config


@pytest.fixture
def mock():
    srv = MockBatchServer(delay_s=0.05).start()
    yield srv
    srv.stop()


def test_a_responses_only_model_gets_the_calculator_and_its_calls_go_round(tmp_path: Path, mock: MockBatchServer):
    cfg = _responses_config(tmp_path / "c.toml", mock.base_url)
    out = tmp_path / "run"
    args = ["run", "jeebench", "--variant", "cot-tools", "--models", "pro", "--config", str(cfg), "--out", str(out),
            "--limit", "2", "--no-live", "--no-score", "--no-cache"]
    assert main(args) == 0
    rows = [json.loads(x) for x in (out / "results.jsonl").read_text().splitlines() if x.strip()]
    by = {(r["item"], r["pass"]): r for r in rows}
    items = {r["item"] for r in rows}
    assert len(items) == 2 and len(by) == len(rows) == 4  # per question: the call, then the answer
    for item in items:
        call, answer = by[(item, "answer")], by[(item, "tool1")]
        assert call["error"] is None and call["tool_calls"][0]["function"] == {
            "name": "add", "arguments": '{"a": 12.5, "b": 8}'}
        assert answer["error"] is None and answer["text"] == "The answer is 20.5."  # our calculator's result
    body = mock.last_body["gpt-5-pro"]
    assert {t["name"] for t in body["tools"]} == {"add", "subtract", "multiply", "divide"}
    sent = [i for i in body["input"] if i.get("type") in ("function_call", "function_call_output")]
    assert [i["type"] for i in sent] == ["function_call", "function_call_output"]
    assert all(i["call_id"] == "call_1" and "id" not in i for i in sent)
