"""Exact accounting under faults, against the fault-injecting mock server on 127.0.0.1.

Every planned (model, item, sample) ends with exactly one final row; a malformed 200 is never cached
or written as a success; exit code and manifest say the truth; keys never leak, however echoed.
"""

from __future__ import annotations

import os
import re
from collections import Counter
from pathlib import Path

import orjson
import pytest

from cli.main import main
from providers.anthropic import parse_message
from providers.base import ProviderError, scrub
from providers.openai import parse_chat
from runner.results import final_rows
from suites.jsonl import prompt_of
from tests.helpers import cli, rows, run_args, write_config
from tests.mock_openai import MALFORMED, MockServer, answer_text, chat_completion, malformed

BROKEN = [k for k in MALFORMED if k != "usage_str"]
"""The malformed 200s that must be retried (counts sent as digit strings are normalised instead)."""
FAST = "retry_initial_s = 0.01\nretry_max_s = 0.05\nmax_attempts = 4\ntimeout_s = 2\n"


@pytest.fixture
def mock():
    srv = MockServer(timeout_hang_s=3.0, retry_after=0.05).start()
    yield srv
    srv.stop()


def _dataset(path: Path, prompts: list[str]) -> Path:
    with path.open("wb") as f:
        for i, p in enumerate(prompts):
            f.write(orjson.dumps({"id": f"q{i}", "prompt": p, "choices": list("wxyz"), "answer": "A"}))
            f.write(b"\n")
    return path


def _sent(prompt: str) -> str:
    """The prompt text the server sees for a dataset line (choices appended)."""
    return prompt_of({"prompt": prompt, "choices": list("wxyz")})


# --- parse: any body becomes a well-typed completion or a retryable error --------------------------


@pytest.mark.parametrize("kind", BROKEN)
def test_malformed_openai_bodies_are_retryable_errors(kind: str):
    body = malformed(kind, chat_completion("m", "p", 1))
    with pytest.raises(ProviderError) as e:
        parse_chat(orjson.dumps(body))
    assert e.value.retryable and "malformed" in str(e.value)


@pytest.mark.parametrize(
    "raw",
    [
        b"",
        b"null",
        b"[]",
        b'"text"',
        b"{}",
        b'{"choices": {}}',
        b'{"choices": []}',
        b'{"choices": [null]}',
        b'{"choices": [{"message": {"content": "x"}, "finish_reason": 3}]}',
        b'{"choices": [{"message": {"content": [1]}}]}',
        b'{"choices": [{"message": null}]}',
        b'{"choices": [{"message": {"content": "ok", "role": "assistant"}, "fin',
    ],
)
def test_garbage_openai_bodies_are_retryable_errors(raw: bytes):
    with pytest.raises(ProviderError) as e:
        parse_chat(raw)
    assert e.value.retryable


def test_well_typed_completion_from_odd_but_valid_bodies():
    body = malformed("usage_str", chat_completion("m", "p", 2))
    c = parse_chat(orjson.dumps(body), 2)
    assert c.input_tokens == 1 and c.output_tokens == 24 and all(isinstance(t, str) for t in c.texts)
    body = {
        "choices": [
            {
                "message": {"content": [{"type": "text", "text": "a"}, {"type": "text", "text": "b"}]},
                "finish_reason": "stop",
            }
        ],
        "usage": {"prompt_tokens": True, "completion_tokens": -1},
    }
    c = parse_chat(orjson.dumps(body))
    assert c.texts == ["ab"] and c.input_tokens is None and c.output_tokens is None
    # an empty answer cut by length is the model's answer (an error row later), not a retry
    c = parse_chat(b'{"choices": [{"message": {"content": null}, "finish_reason": "length"}]}')
    assert c.texts == [None] and c.finish_reasons == ["length"]


@pytest.mark.parametrize(
    "body",
    [
        None,
        [],
        {"content": "x"},
        {"content": [1]},
        {"content": [{"type": "text", "text": 5}]},
        {"content": [], "stop_reason": "end_turn"},
        {"content": [{"type": "text", "text": "a"}], "stop_reason": 7},
    ],
)
def test_malformed_anthropic_messages(body):
    with pytest.raises(ProviderError) as e:
        parse_message(body)
    assert e.value.retryable


def test_anthropic_usage_normalised():
    c = parse_message(
        {
            "content": [{"type": "text", "text": "hi"}],
            "stop_reason": "end_turn",
            "usage": {"input_tokens": "7", "output_tokens": 2.0},
        }
    )
    assert c.texts == ["hi"] and c.input_tokens == 7 and c.output_tokens == 2


# --- end to end: faults once are retried; faults forever end in an error row, never a success ------

ONCE = ["429", "500", "reset", "hang", "truncated", *MALFORMED, "big", "bad_utf8"]


def test_every_fault_once_is_retried_into_a_success(tmp_path: Path, mock: MockServer):
    cfg = write_config(tmp_path / "c.toml", mock.base_url, ["ok-a"], extra_endpoint=FAST)
    prompts = [f"Question {i} [[fault:{k}]]" for i, k in enumerate(ONCE)]
    data = _dataset(tmp_path / "d.jsonl", prompts)
    code = main(run_args(data, "ok-a", cfg, tmp_path / "run"))
    got = rows(tmp_path / "run")
    assert code == 0, [r["error"] for r in got if r["error"]]
    assert len(got) == len(ONCE)
    for r, p in zip(sorted(got, key=lambda r: int(r["item"][1:])), prompts, strict=True):
        valid = "big" in p or "usage_str" in p  # odd but well-formed: accepted as is
        assert r["error"] is None and r["attempts"] == (1 if valid else 2), r
        assert isinstance(r["text"], str) and isinstance(r["usage"]["input_tokens"], int)
        if "big" in p:
            assert len(r["text"]) > 5 << 20
        else:
            assert r["text"] == answer_text("ok-a", _sent(p), 0)
    man = orjson.loads((tmp_path / "run" / "manifest.json").read_bytes())
    assert man["status"] == "complete"


def test_faults_forever_end_in_error_rows_never_cached(tmp_path: Path, mock: MockServer):
    kinds = ["500", "truncated", *BROKEN]
    cfg = write_config(tmp_path / "c.toml", mock.base_url, ["ok-a"], extra_endpoint=FAST)
    prompts = [f"Question {i} [[fault:{k}*]]" for i, k in enumerate(kinds)] + ["Question ok"]
    data = _dataset(tmp_path / "d.jsonl", prompts)
    code = main(run_args(data, "ok-a", cfg, tmp_path / "run"))
    assert code == 3
    final = list(final_rows(tmp_path / "run" / "results.jsonl"))
    assert len(final) == len(prompts)
    errs = [r for r in final if r["error"]]
    assert len(errs) == len(kinds)
    for r in errs:
        assert r["error_kind"] == "transient" and r["attempts"] == 4 and r["text"] is None
    assert mock.total == 4 * len(kinds) + 1
    man = orjson.loads((tmp_path / "run" / "manifest.json").read_bytes())
    assert man["status"] == "complete_with_errors"
    # Nothing malformed was cached: a rerun asks the server again for every failed item (only).
    before = mock.total
    code = main(run_args(data, "ok-a", cfg, tmp_path / "run"))
    assert code == 3 and mock.total - before == 4 * len(kinds)
    assert main(["score", str(tmp_path / "run")]) == 0


def test_storm_accounting_is_exact(tmp_path: Path, mock: MockServer):
    """A seeded storm over 2 models x 60 items: one final row per identity, the mock's count of
    requests equals the attempts the rows report, and every success holds the server's true answer."""
    mock.faults = {"429": 0.3, "500": 0.1, "reset": 0.03, "truncated": 0.03, "garbage": 0.02}
    mock.seed = 7
    models = ["ok-a", "ok-b"]
    cfg = write_config(tmp_path / "c.toml", mock.base_url, models, extra_endpoint=FAST)
    prompts = [f"Storm question {i}" for i in range(60)]
    data = _dataset(tmp_path / "d.jsonl", prompts)
    code = main(run_args(data, ",".join(models), cfg, tmp_path / "run"))
    final = list(final_rows(tmp_path / "run" / "results.jsonl"))
    ids = Counter((r["model"], r["item"]) for r in final)
    assert len(ids) == 120 and set(ids.values()) == {1}
    all_rows = rows(tmp_path / "run")
    assert len(all_rows) == 120  # one row per call, no duplicates
    for m in models:
        assert sum(r["attempts"] for r in all_rows if r["model"] == m) == mock.per_model[m]
    ok = [r for r in final if r["error"] is None]
    for r in ok:
        assert r["text"] == answer_text(r["model"], _sent(prompts[int(r["item"][1:])]), 0)
    n_err = len(final) - len(ok)
    assert code == (3 if n_err else 0)
    assert len(ok) == sum(mock.answered.values())


# --- secrets: scrubbed before any truncation, in every output --------------------------------------


def test_scrub_handles_cut_keys():
    key = "sk-" + "Ab9_" * 100
    assert key not in scrub(f"x {key} y", key)
    cut = f"{'x' * 280} Bearer {key}"[:300]
    assert key[:20] not in scrub(cut, key)
    assert scrub("nothing here", key) == "nothing here"


def test_key_echo_longer_than_the_snippet_never_leaks(tmp_path: Path, mock: MockServer):
    key = "sk-live-" + "".join(f"{i:03d}Zq" for i in range(80))  # 408 chars: longer than any snippet
    cfg = write_config(
        tmp_path / "c.toml", mock.base_url, ["ok-a"], key_env="TRUST_TEST_KEY", extra_endpoint=FAST
    )
    prompts = ["Echo [[fault:echo_error*]]", "Echo ok [[fault:echo_success]]", "Plain"]
    data = _dataset(tmp_path / "d.jsonl", prompts)
    env = {**os.environ, "TRUST_TEST_KEY": key, "PYTHONPATH": str(Path(__file__).resolve().parents[1])}
    p = cli(*run_args(data, "ok-a", cfg, tmp_path / "run"), env=env)
    assert p.returncode == 3, p.stderr
    assert mock.keys[key] >= 3  # the server did receive (and echo) the key
    texts = {
        "stderr": p.stderr + p.stdout,
        **{f.name: f.read_text(errors="replace") for f in (tmp_path / "run").iterdir() if f.is_file()},
    }
    fragments = {key[i : i + 12] for i in range(0, len(key) - 12, 6)}
    for name, text in texts.items():
        leaked = [f for f in fragments if f in text]
        assert not leaked, (name, leaked[:3])
    got = {r["item"]: r for r in rows(tmp_path / "run")}
    assert "[redacted]" in got["q1"]["text"] and got["q1"]["error"] is None
    assert "[redacted]" in (got["q0"]["error"] or "")
    cache_dir = Path(os.environ["EVALSWEEP_CACHE_DIR"])
    for f in cache_dir.rglob("*"):
        if f.is_file():
            data = f.read_bytes()
            assert not any(fr.encode() in data for fr in fragments), f


def test_prompt_over_tpm_is_an_error_row_at_once(tmp_path: Path, mock: MockServer):
    cfg = write_config(tmp_path / "c.toml", mock.base_url, ["ok-a"], extra_endpoint=FAST + "tpm = 2000\n")
    data = _dataset(tmp_path / "d.jsonl", ["word " * 8000, "short"])
    code = main(run_args(data, "ok-a", cfg, tmp_path / "run"))
    assert code == 3
    got = {r["item"]: r for r in rows(tmp_path / "run")}
    assert re.search(r"prompt needs ~\d+ tokens, endpoint tpm is 2000", got["q0"]["error"])
    assert got["q1"]["error"] is None and mock.total == 1
