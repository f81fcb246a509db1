"""The first call gates the fan-out (issue #27 part 2), against the mock OpenAI server on 127.0.0.1:
a model's calls wait for its first answer, then go at full width; a model the provider refuses outright
(404 `model_not_found`, 401/403 for it) is stopped within 3 requests with one error naming it, its id
and the provider's words, its other calls become `model_refused` rows without being sent, and the
other models finish. The pre-flight warns about an id the endpoint's `GET /models` does not list."""

from __future__ import annotations

import asyncio
from collections import Counter
from pathlib import Path

import orjson
import pytest

from cli.main import main
from providers.base import error_for_status
from tests.helpers import rows, run_args, write_config, write_dataset
from tests.mock_openai import MockServer


@pytest.fixture
def mock():
    srv = MockServer().start()
    yield srv
    srv.stop()


def _config(path: Path, base_url: str, models: dict[str, str], extra: str = "") -> Path:
    """Models by name -> provider id (names and ids differ, so the error must name both)."""
    text = f'[[endpoints]]\nname = "mock"\nkind = "openai"\nbase_url = "{base_url}"\n{extra}\n'
    for name, mid in models.items():
        text += f'[[models]]\nname = "{name}"\nendpoint = "mock"\nmodel = "{mid}"\nprice_in = 1.0\nprice_out = 2.0\n'
    path.write_text(text)
    return path


WIDE = "max_concurrency = 8\nrpm = 600000\ntpm = 1000000000\n"
"""8 calls at once, and limits set, so the lane sends no probe call of its own (runner.lanes): only the
gate holds calls back."""


def _arrivals(mock: MockServer, model: str) -> list[tuple[int, int]]:
    """(requests of `model` already answered, its requests in flight) as each of its requests arrived."""
    return [(done, flying) for m, done, flying in mock.seen_on_arrival if m == model]


def test_a_model_that_does_not_exist_is_sent_once_and_the_sweep_goes_on(tmp_path: Path, mock: MockServer, capfd):
    """Before the gate, all 30 calls of an unknown id were sent (max_concurrency 16): now one is."""
    cfg = _config(tmp_path / "c.toml", mock.base_url, {"future": "missing-gpt-9", "ok-a": "ok-a"},
                  WIDE.replace("= 8", "= 16"))
    data = write_dataset(tmp_path / "d.jsonl", 30)
    out = tmp_path / "run"
    assert main(run_args(data, "future,ok-a", cfg, out)) == 3  # finished, some rows are errors
    assert mock.per_model["missing-gpt-9"] <= 3 and mock.per_model["ok-a"] == 30
    rs = rows(out)
    bad = [r for r in rs if r["model"] == "future"]
    assert len(bad) == 30 and len({r["item"] for r in bad}) == 30  # one final row per planned call
    assert Counter(r["error_kind"] for r in bad) == {"model_refused": 30}
    assert sum(r["attempts"] for r in bad) == mock.per_model["missing-gpt-9"]  # the rest were not sent
    assert all(r["error"] is None for r in rs if r["model"] == "ok-a")
    words = "The model `missing-gpt-9` does not exist or you do not have access to it."
    man = orjson.loads((out / "manifest.json").read_bytes())
    assert man["status"] == "complete_with_errors"
    why = man["refused_models"]["future"]
    assert "'future'" in why and "'missing-gpt-9'" in why and "HTTP 404" in why and words in why, why
    assert set(man["refused_models"]) == {"future"}
    assert man["counts"]["future"]["errors"] == 30 and man["counts"]["ok-a"]["errors"] == 0
    # said once, not once per row: the log and the terminal carry the one error
    log = (out / "log.txt").read_text()
    assert log.count(words) == 1, log
    assert "Refused by the provider (fix the id or key first): future." in capfd.readouterr().err


def test_401_for_one_model_stops_it_and_names_no_key(tmp_path: Path, mock: MockServer):
    cfg = write_config(tmp_path / "c.toml", mock.base_url, ["auth-401", "ok-b"],
                       extra_endpoint=WIDE)
    data = write_dataset(tmp_path / "d.jsonl", 12)
    out = tmp_path / "run"
    assert main(run_args(data, "auth-401,ok-b", cfg, out)) == 3
    assert mock.per_model["auth-401"] == 1 and mock.per_model["ok-b"] == 12
    man = orjson.loads((out / "manifest.json").read_bytes())
    assert "authentication/permission refused" in man["refused_models"]["auth-401"]


def test_calls_wait_for_the_first_answer_then_fan_out(tmp_path: Path, mock: MockServer):
    mock.latency_s = 0.3  # answers take a while: calls that do not wait for one overlap
    cfg = write_config(tmp_path / "c.toml", mock.base_url, ["ok-a"], extra_endpoint=WIDE)
    data = write_dataset(tmp_path / "d.jsonl", 24)
    assert main(run_args(data, "ok-a", cfg, tmp_path / "run")) == 0
    seen = _arrivals(mock, "ok-a")
    assert len(seen) == 24
    assert seen[0] == (0, 1) and all(done >= 1 for done, _ in seen[1:])  # only the first went unanswered
    assert max(flying for _, flying in seen) > 1  # then at full width


def test_a_probe_that_fails_for_its_own_reason_hands_on_its_turn(tmp_path: Path, mock: MockServer):
    """A 400 that does not refuse the model (an unrecognised field) is that call's error row; the next
    call probes. Until one answers, the model's calls go one at a time. The same unreadable words on a
    second item stop the model (#36): its other calls are not sent."""
    mock.latency_s = 0.3  # answers take a while: calls that do not wait for one overlap
    cfg = write_config(tmp_path / "c.toml", mock.base_url, ["bad-400"], extra_endpoint=WIDE)
    data = write_dataset(tmp_path / "d.jsonl", 6)
    out = tmp_path / "run"
    assert main(run_args(data, "bad-400", cfg, out)) == 3
    assert mock.per_model["bad-400"] == 2
    assert [flying for _, flying in _arrivals(mock, "bad-400")] == [1] * 2
    assert Counter(r["error_kind"] for r in rows(out)) == {"fatal": 1, "model_refused": 5}
    assert "bad-400" in orjson.loads((out / "manifest.json").read_bytes())["refused_models"]


@pytest.mark.parametrize("before", ["cache", "resume"])
def test_an_answer_from_before_opens_the_gate(tmp_path: Path, before: str):
    """A cached answer of the model, or a success row of the run being resumed, shows it answers: its
    new calls go at once, at full width, without waiting for a first answer in this run. (One server for
    both runs: a cached answer is served only for the server that made it.)"""
    srv = MockServer(latency_s=0.3).start()
    try:
        cfg = write_config(tmp_path / "c.toml", srv.base_url, ["ok-a"], extra_endpoint=WIDE)
        data = write_dataset(tmp_path / "d.jsonl", 12)
        if before == "cache":  # another run answered the first 4 prompts: their answers are in the cache
            assert main(run_args(data, "ok-a", cfg, tmp_path / "r0", "--limit", "4")) == 0
            out, second = tmp_path / "r1", []
        else:  # this run answered its first 4 items before it stopped
            out, second = tmp_path / "r0", ["--no-cache"]
            assert main(run_args(data, "ok-a", cfg, out, "--no-cache", "--limit", "4")) == 0
        first, answered = len(srv.seen_on_arrival), srv.finished["ok-a"]  # the second run's calls from here
        assert main(run_args(data, "ok-a", cfg, out, *second)) == 0
    finally:
        srv.stop()
    seen = [(done - answered, flying) for m, done, flying in srv.seen_on_arrival[first:] if m == "ok-a"]
    assert len(seen) == 8 and len(rows(out)) == 12
    assert sum(done == 0 for done, _ in seen) > 1  # more than one call went before any answer here


def test_a_refusal_after_the_gate_opened_still_stops_the_model(tmp_path: Path, mock: MockServer):
    """The first item answers, every later prompt gets 404 model_not_found (the model withdrawn mid-run):
    the first refusal stops the model; only calls already in flight were sent."""
    mock.latency_s = 0.05
    cfg = write_config(tmp_path / "c.toml", mock.base_url, ["ok-a"], extra_endpoint=WIDE.replace("= 8", "= 2"))
    data = tmp_path / "d.jsonl"
    data.write_bytes(b"".join(
        orjson.dumps({"id": f"q{i}", "prompt": f"Q{i} which?" + ("" if i == 0 else " [[fault:404*]]"),
                      "choices": ["w", "x", "y", "z"], "answer": "A"}) + b"\n"
        for i in range(20)
    ))
    out = tmp_path / "run"
    assert main(run_args(data, "ok-a", cfg, out)) == 3
    assert mock.per_model["ok-a"] <= 3  # q0, then at most the two calls in flight when the refusal came
    kinds = Counter(r.get("error_kind") for r in rows(out))
    assert kinds[None] == 1 and kinds["model_refused"] == 19


# --- what refuses a model: the providers' own bodies (OpenAI's words as quoted in Shopify/roast#13) --------------------------------------------------

OPENAI_404 = ('{"error": {"message": "The model `gpt-9` does not exist or you do not have access to it.", '
              '"type": "invalid_request_error", "param": null, "code": "model_not_found"}}')
ANTHROPIC_404 = '{"type": "error", "error": {"type": "not_found_error", "message": "model: claude-opus-9"}}'
"""Anthropic's error shape and `not_found_error` type (platform.claude.com/docs/en/api/errors)."""
ANTHROPIC_403 = ('{"type": "error", "error": {"type": "permission_error", '
                 '"message": "Your API key does not have permission to use the specified resource."}}')
GOOGLE_404 = ('[{"error": {"code": 404, "message": "models/gemini-9-pro is not found for API version v1beta, or '
              'is not supported for generateContent.", "status": "NOT_FOUND"}}]')
"""Google's words and shape (`code`, `message`, `status`: continuedev/continue#9939), sent as a list as in
google-gemini/gemini-cli#13553."""
GATEWAY_400 = ('{"error": {"message": "The model `gpt-9` does not exist", "type": "invalid_request_error", '
               '"code": "model_not_found"}}')
"""Gateways that answer an unknown id with a 400 keep OpenAI's `code`."""


@pytest.mark.parametrize(
    ("status", "body", "words"),
    [
        (404, OPENAI_404, "The model `gpt-9` does not exist or you do not have access to it."),
        (404, ANTHROPIC_404, "model: claude-opus-9"),
        (404, GOOGLE_404, "models/gemini-9-pro is not found for API version v1beta"),
        (404, "<html>Not Found</html>", "<html>Not Found</html>"),  # a wrong path: nothing will answer
        (400, GATEWAY_400, "The model `gpt-9` does not exist"),
        (401, '{"error": {"message": "Incorrect API key provided: sk-ab***yz"}}', "authentication"),
        (403, ANTHROPIC_403, "authentication/permission refused"),
    ],
)
def test_what_refuses_the_model(status: int, body: str, words: str):
    e = error_for_status(status, body)
    assert e.refuses_model and e.kind == "model_refused" and not e.retryable
    assert words in str(e) and "sk-ab" not in str(e)


@pytest.mark.parametrize(
    ("status", "body"),
    [
        (400, '{"error": {"message": "Unsupported parameter: \'max_tokens\'", "code": "unsupported_parameter"}}'),
        (429, '{"error": {"code": "insufficient_quota", "message": "You exceeded your current quota"}}'),
        (500, '{"error": {"message": "internal error"}}'),
        (400, '{"error": {"message": "blocked", "code": "content_policy_violation"}}'),
    ],
)
def test_what_does_not(status: int, body: str):
    assert not error_for_status(status, body).refuses_model


# --- the pre-flight reads the endpoint's model list ---------------------------------------------------


def test_an_unlisted_id_is_a_warning_naming_the_nearest(tmp_path: Path, mock: MockServer, capfd):
    mock.listed = ["gpt-5-pro", "gpt-5.1", "o3", "models/gemini-2.5-pro", "llama3:latest"]
    models = {"pro": "gpt-5-pr0", "o3": "o3", "gem": "gemini-2.5-pro", "llama": "llama3", "zz": "zzz-qqq"}
    cfg = _config(tmp_path / "c.toml", mock.base_url, models)
    data = write_dataset(tmp_path / "d.jsonl", 2)
    assert main(run_args(data, ",".join(models), cfg, tmp_path / "run", "--dry-run")) == 0
    err = capfd.readouterr().err
    assert "model 'pro': endpoint 'mock' does not list the id 'gpt-5-pr0' (nearest listed: gpt-5-pro" in err, err
    assert "model 'zz': endpoint 'mock' does not list the id 'zzz-qqq' (it lists 5 other models)" in err
    for listed in ("'o3'", "'gem'", "'llama'"):  # as sent, as Google lists it, as Ollama lists it
        assert f"model {listed}:" not in err
    assert mock.total == 0 and mock.models_requests == 1


@pytest.mark.parametrize("listing", ["no route", "empty"])
def test_a_failed_or_empty_listing_is_skipped_in_silence(tmp_path: Path, mock: MockServer, capfd, listing: str):
    if listing == "no route":
        mock.models_status = 404
    cfg = _config(tmp_path / "c.toml", mock.base_url, {"a": "ok-a"})
    data = write_dataset(tmp_path / "d.jsonl", 2)
    assert main(run_args(data, "a", cfg, tmp_path / "run")) == 0
    probe = 1 if listing == "no route" else 0  # a 404 for /models: the calls' path is checked once (preflight)
    assert "does not list" not in capfd.readouterr().err and mock.models_requests == 1 and mock.total == 2 + probe


# --- turns: a cancelled call (Ctrl-C's second stage, a stopped run) never strands the probe's turn -----


def _row(kind: str | None) -> dict:
    return {"error": None if kind is None else "x", "error_kind": kind, "finish_reason": None}


@pytest.mark.parametrize("when", ["waiting", "handed the turn"])
def test_a_cancelled_call_passes_the_turn_on(when: str):
    from runner.calls.gate import Gate

    async def go() -> list[str]:
        gate, sent, tasks = Gate("model 'm'"), [], []
        first_back = asyncio.Event()

        async def probe() -> list[dict]:  # fails for its own reason: the next call is handed the turn
            sent.append("a")
            await first_back.wait()
            if when == "handed the turn":  # b is cancelled after it was handed the turn, before it ran
                asyncio.get_running_loop().call_soon(tasks[0].cancel)
            return [_row("fatal")]

        def call(name: str):
            async def send() -> list[dict]:
                sent.append(name)
                return [_row(None)]
            return send

        t1 = asyncio.create_task(gate.through(probe, lambda why: []))
        await asyncio.sleep(0)
        tasks[:] = [asyncio.create_task(gate.through(call(n), lambda why: [])) for n in "bc"]
        await asyncio.sleep(0)
        assert sent == ["a"]  # b and c wait for a's outcome
        if when == "waiting":
            tasks[0].cancel()
        first_back.set()
        # (a stranded turn would leave c waiting forever: fail instead of hanging)
        await asyncio.wait_for(asyncio.gather(t1, *tasks, return_exceptions=True), 60)
        assert tasks[0].cancelled() and gate.open
        return sent

    assert asyncio.run(go()) == ["a", "c"]


def test_a_401_for_one_of_several_keys_does_not_refuse_the_model(tmp_path: Path, monkeypatch, capfd):
    """The first key (the one an idle pool picks first) is refused, the second is good: the model is
    not stopped, the good key answers, the bad key's calls are `key_refused` rows."""
    from tests.helpers import fake_key

    srv = MockServer(keys={fake_key("good-2")}, latency_s=0.05).start()
    monkeypatch.setenv("GK_1", fake_key("bad-1"))
    monkeypatch.setenv("GK_2", fake_key("good-2"))
    try:
        cfg = tmp_path / "c.toml"
        cfg.write_text(
            f'[[endpoints]]\nname = "pool"\nkind = "openai"\nbase_url = "{srv.base_url}"\n'
            f'api_key_env = ["GK_1", "GK_2"]\n{WIDE}'
            '[[models]]\nname = "m"\nendpoint = "pool"\nmodel = "ok-m"\nprice_in = 1.0\nprice_out = 2.0\n'
            "max_consecutive_failures = 1000\n"  # (the breaker counts the bad key's failures in a row)
        )
        data = write_dataset(tmp_path / "d.jsonl", 20)
        out = tmp_path / "run"
        assert main(run_args(data, "m", cfg, out, "--keep-going")) == 3  # the pre-flight saw the bad key
    finally:
        srv.stop()
    kinds = Counter(r.get("error_kind") for r in rows(out))
    assert kinds[None] >= 1 and kinds["key_refused"] >= 1 and set(kinds) == {None, "key_refused"}, kinds
    assert "refused_models" not in orjson.loads((out / "manifest.json").read_bytes())
    assert "HTTP 401: the key was refused (key from GK_1)" in capfd.readouterr().err


def test_a_probe_out_for_long_without_a_refusal_opens_the_gate(tmp_path: Path, mock: MockServer, monkeypatch):
    """A reasoning model's first answer may take a minute: its other calls no longer wait for it once
    the probe has been on the wire PROBE_OPEN_S without a verdict (refusals come at once)."""
    import threading

    import runner.calls.gate

    monkeypatch.setattr(runner.calls.gate, "PROBE_OPEN_S", 0.3)
    mock.held = True  # no answer at all until the test says so
    threading.Timer(1.5, lambda: setattr(mock, "held", False)).start()
    cfg = write_config(tmp_path / "c.toml", mock.base_url, ["ok-a"], extra_endpoint=WIDE)
    data = write_dataset(tmp_path / "d.jsonl", 8)
    assert main(run_args(data, "ok-a", cfg, tmp_path / "run")) == 0
    seen = _arrivals(mock, "ok-a")
    assert seen[0] == (0, 1)
    assert max(flying for done, flying in seen if done == 0) == 8  # all out before the first answer
    assert len(rows(tmp_path / "run")) == 8


def test_a_lane_probing_its_limits_does_not_hold_back_each_models_first_call(tmp_path: Path, mock: MockServer):
    """A lane without rpm and tpm sends one call to learn the key's limits from its answer (runner.lanes),
    and each model's first call is its gate's probe. The lane's probe held the other models' probes until
    its answer (or PROBE_MAX_S): a sweep's start on one slot. Each model's probe now goes at once, and
    each model still sends nothing more before its first answer."""
    seen: list[tuple[str, int, int]] = []  # (model, its requests before this one, answers the server sent)

    def latency(model: str, prompt: str, before: int) -> float:
        seen.append((model, before, sum(mock.finished.values())))
        return 0.3

    mock.latency_of = latency
    cfg = write_config(tmp_path / "c.toml", mock.base_url, ["ok-a", "ok-b", "ok-c"],
                       extra_endpoint="max_concurrency = 8\n")  # no rpm, no tpm: the lane probes
    data = write_dataset(tmp_path / "d.jsonl", 6)
    assert main(run_args(data, "ok-a,ok-b,ok-c", cfg, tmp_path / "run")) == 0
    assert len(seen) == 18
    assert [answered for _, before, answered in seen if before == 0] == [0, 0, 0]  # all before any answer
    for model in ("ok-a", "ok-b", "ok-c"):  # the gate: the rest only after the model's first answer
        assert all(done >= 1 for done, _ in _arrivals(mock, model)[1:])
