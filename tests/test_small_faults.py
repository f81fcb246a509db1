"""Issue 31.12, against the mock server on 127.0.0.1: a 200 carrying an error JSON shows the server's
message; a server sending 50,000 choices for n=1 is recorded as the one asked, billed for all the
tokens it reported, with a warning saying so; `score` names an unreadable mid-file line; a timed-out
row records how long it waited; a gold answer that is none of the choices is refused naming the dataset row."""

from __future__ import annotations

from pathlib import Path

import orjson
import pytest

from tests.helpers import cli, rows, run_args, write_config, write_dataset
from tests.mock_openai import MockServer


def _dataset(path: Path, prompts: list[str]) -> Path:
    path.write_bytes(b"".join(
        orjson.dumps({"id": f"q{i}", "prompt": p, "choices": list("wxyz"), "answer": "A"}) + b"\n"
        for i, p in enumerate(prompts)))
    return path


@pytest.fixture
def srv():
    s = MockServer(timeout_hang_s=4.0).start()
    yield s
    s.stop()


def test_odd_200s_and_timeouts_are_recorded_truthfully(tmp_path: Path, srv: MockServer):
    cfg = write_config(tmp_path / "c.toml", srv.base_url, ["ok-a"],
                       extra_endpoint="max_attempts = 2\nretry_initial_s = 0.01\ntimeout_s = 1\n")
    data = _dataset(tmp_path / "d.jsonl", ["Flood [[fault:choices_flood]]", "Err [[fault:error_200*]]",
                                           "Hang [[fault:hang*]]", "Plain"])
    r = cli(*run_args(data, "ok-a", cfg, tmp_path / "run"))
    assert r.returncode == 3, r.stderr
    got = {x["item"]: x for x in rows(tmp_path / "run")}
    plain = got["q3"]
    assert got["q0"]["error"] is None and got["q0"]["text"]
    outs = plain["usage"]["output_tokens"]
    assert got["q0"]["usage"]["output_tokens"] == 50_000 * outs  # #39: billed as the server reported it
    assert got["q0"]["cost_usd"] > 1000 * plain["cost_usd"]
    log = (tmp_path / "run" / "log.txt").read_text()
    assert "sent 50000 choices for n=1" in log and "share" not in log
    assert f"the row bills all {50_000 * outs:,} output tokens it reported" in log
    assert "model overloaded, try later" in got["q1"]["error"] and "no choices" not in got["q1"]["error"]
    assert "timed out" in got["q2"]["error"] and got["q2"]["latency_s"] >= 0.9  # timeout_s = 1, not 0


def test_score_names_an_unreadable_mid_file_line(tmp_path: Path):
    data = write_dataset(tmp_path / "d.jsonl", 6)
    out = tmp_path / "run"
    assert cli(*run_args(data, "sim/strong", None, out)).returncode == 0
    lines = (out / "results.jsonl").read_bytes().splitlines(keepends=True)
    lines[2] = b'{"model": "sim/strong", "item": "q2", "sam\xff\n'
    (out / "results.jsonl").write_bytes(b"".join(lines))
    r = cli("score", str(out))
    assert r.returncode == 2 and "Traceback" not in r.stderr, r.stderr
    assert f"{out / 'results.jsonl'}:3: unreadable line" in r.stderr
    assert len((out / "results.jsonl").read_bytes().splitlines()) == 6  # nothing removed behind the user's back


@pytest.mark.parametrize("gold", ["E", "banana", 7])
def test_a_gold_answer_that_is_none_of_the_choices_is_refused(tmp_path: Path, gold):
    data = tmp_path / "d.jsonl"
    good = {"id": "ok", "prompt": "Which?", "choices": ["apple", "pear", "plum", "fig"], "answer": "pear"}
    data.write_bytes(orjson.dumps(good) + b"\n" + orjson.dumps({**good, "id": "q9", "answer": gold}) + b"\n")
    r = cli(*run_args(data, "sim/strong", None, tmp_path / "run"))
    assert r.returncode == 2 and "Traceback" not in r.stderr, r.stderr
    assert f"{data}:2: item 'q9'" in r.stderr and "none of its 4 choices" in r.stderr
    assert not (tmp_path / "run" / "results.jsonl").exists()


def test_a_200_carrying_vllms_error_object_says_what_the_server_sent():
    """#39: vLLM's ErrorResponse (`{"object": "error", "message", "type", "code"}`, vllm/entrypoints/openai
    protocol.py) in a 200 read as "no choices"; its words are what the row must carry."""
    from providers.base import ProviderError
    from providers.parse import openai_chat

    body = {"object": "error", "message": "The model `gpt-x` does not exist.", "type": "NotFoundError", "code": 404}
    try:
        openai_chat(body, 1)
    except ProviderError as e:
        assert "does not exist" in str(e) and "(404)" in str(e) and "no choices" not in str(e)
    else:
        raise AssertionError("a 200 carrying an error parsed as an answer")
