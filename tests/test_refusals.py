"""Learning a model's rules from its refusals (providers.refusals, runner.calls.learned).

The error bodies are the providers' own words, each cited where it is used: OpenAI's error object
(`{"error": {"message", "type", "param", "code"}}`, https://platform.openai.com/docs/guides/error-codes,
the `Error` schema of openai-openapi), Anthropic's (`{"type": "error", "error": {"type":
"invalid_request_error", "message"}}`, https://docs.anthropic.com/en/api/errors), and the messages as
the providers answered them, quoted in public reports (the issue or repository named on each case).
End to end, models that no map and no family rule of ours knows (tests/mock_contract.py's future
models) run against the contract mock: only reading their refusals makes their rows ok.
"""

from __future__ import annotations

import re
from collections import Counter
from pathlib import Path

import orjson
import pytest

from cli.main import main
from providers.capabilities import resolve
from providers.refusals import Refusal, Sent, adapt, nearest, read
from providers.shape import shape_for
from runner.config import ModelCfg
from tests.helpers import run_args
from tests.mock_contract import (
    FUTURE_CLAUDE,
    FUTURE_NO_N,
    FUTURE_REASONING,
    FUTURE_STUBBORN,
    FUTURE_UNREADABLE,
    ContractServer,
)


def _openai(message: str, param: str | None, code: str | None) -> str:
    return orjson.dumps(
        {"error": {"message": message, "type": "invalid_request_error", "param": param, "code": code}}
    ).decode()


def _anthropic(message: str) -> str:
    return orjson.dumps({"type": "error", "error": {"type": "invalid_request_error", "message": message}}).decode()


# (status, body, the refusals it names). Each body is a provider's published answer (source in the comment).
CASES = [
    # OpenAI o-series/gpt-5 on max_tokens: the full body as returned, quoted in a public report
    # ("provider returned HTTP 400: { "error": { ... "param": "max_tokens", "code": "unsupported_parameter" } }")
    (400, _openai("Unsupported parameter: 'max_tokens' is not supported with this model. Use "
                  "'max_completion_tokens' instead.", "max_tokens", "unsupported_parameter"),
     [("max_tokens", "rename", "max_completion_tokens", ())]),
    # gpt-5 on temperature 0 (body with param/code as OpenAI sends it, quoted in many clients' tests, e.g.
    # the AistudioKeywordClassifier test and GEMBA's notes found by code search)
    (400, _openai("Unsupported value: 'temperature' does not support 0.0 with this model. Only the default "
                  "(1) value is supported.", "temperature", "unsupported_value"),
     [("temperature", "drop", None, ())]),
    # o3-mini on temperature ("'temperature' is not supported with this model", same reports)
    (400, _openai("Unsupported parameter: 'temperature' is not supported with this model.", "temperature",
                  "unsupported_parameter"), [("temperature", "drop", None, ())]),
    # reasoning_effort values (Kilo-Org/cloud#3807: the body without param/code, as Moonshot's
    # OpenAI-compatible endpoint copies OpenAI's words)
    (400, orjson.dumps({"error": {"message": "Unsupported value: 'reasoning_effort' does not support 'none' "
                                  "with this model. Supported values are: 'minimal', 'low', 'medium', and "
                                  "'high'.", "type": "invalid_request_error"}}).decode(),
     [("reasoning_effort", "value", None, ("minimal", "low", "medium", "high"))]),
    # gpt-5-pro (anomalyco/opencode#3474, models.dev#331: "Supported values are: 'high'.")
    (400, _openai("Unsupported value: 'medium' is not supported with the 'gpt-5-pro' model. Supported "
                  "values are: 'high'.", "reasoning.effort", "unsupported_value"),
     [("reasoning.effort", "value", None, ("high",))]),
    # gpt-5-chat-latest on the Responses API (Laisky/one-api#120)
    (400, _openai("Unsupported parameter: 'reasoning.effort' is not supported with this model.",
                  "reasoning.effort", "unsupported_parameter"), [("reasoning.effort", "drop", None, ())]),
    # gpt-4o given reasoning_effort (generative-computing/mellea#270)
    (400, _openai("Unrecognized request argument supplied: reasoning_effort", None, None),
     [("reasoning_effort", "drop", None, ())]),
    # Anthropic, Claude 4.5 / Opus 4.1 (infiniflow/ragflow#11815, aws-samples/bedrock-chat#979)
    (400, _anthropic("`temperature` and `top_p` cannot both be specified for this model. Please use only one."),
     [("top_p", "drop", None, ())]),
    # Anthropic with thinking (danny-avila/LibreChat#6023)
    (400, _anthropic("`top_k` must be unset when thinking is enabled. Please consult our documentation at "
                     "https://docs.anthropic.com/en/docs/build-with-claude/extended-thinking#important-"
                     "considerations-when-using-extended-thinking"), [("top_k", "drop", None, ())]),
    # Anthropic, a field the model no longer takes (claude-opus-4-7's temperature, quoted in a gateway's test)
    (400, _anthropic("temperature: Extra inputs are not permitted"), [("temperature", "drop", None, ())]),
    # Gemini's OpenAI-compatible endpoint (a Cursor user's report of gemini-3-pro, found by code search)
    (400, orjson.dumps([{"error": {"code": 400, "message": "Invalid JSON payload received. Unknown name "
                                   "\"top_k\": Cannot find field.", "status": "INVALID_ARGUMENT"}}]).decode(),
     [("top_k", "drop", None, ())]),
    # Gemini 3 Pro (discuss.ai.google.dev/t/112648): a level refused, none named
    (400, orjson.dumps({"error": {"code": 400, "message": "Thinking level MEDIUM is not supported for this "
                                  "model", "status": "INVALID_ARGUMENT"}}).decode(),
     [("reasoning_effort", "value", None, ())]),
    # xAI (its two forms, quoted in client tests found by code search): camelCase names
    (400, orjson.dumps({"code": "Client specified an invalid argument",
                        "error": "Argument not supported on this model: presencePenalty"}).decode(),
     [("presence_penalty", "drop", None, ())]),
    (400, orjson.dumps({"error": "Model grok-4-1-fast does not support parameter reasoningEffort."}).decode(),
     [("reasoning_effort", "drop", None, ())]),
    # DeepSeek (lollipopkit/flutter_gpt_box#213)
    (400, _openai("deepseek-reasoner does not support the parameter `presence_penalty`", None,
                  "invalid_request_error"), [("presence_penalty", "drop", None, ())]),
    # SGLang/vLLM validation of our body (router-for-me/CLIProxyAPI#1572)
    (400, orjson.dumps({"object": "error", "message": "1 validation error:\n  {'type': 'literal_error', 'loc': "
                        "('body', 'reasoning_effort'), 'msg': \"Input should be 'low', 'medium' or 'high'\", "
                        "'input': 'xhigh', 'ctx': {'expected': \"'low', 'medium' or 'high'\"}}",
                        "type": "Bad Request", "param": None, "code": 400}).decode(),
     [("reasoning_effort", "value", None, ("low", "medium", "high"))]),
    # llama.cpp server on n > 1 (tools/server/utils.hpp: "Only one completion choice is allowed")
    (400, orjson.dumps({"error": {"code": 400, "message": "Only one completion choice is allowed",
                                  "type": "invalid_request_error"}}).decode(), [("n", "split", None, ())]),
]


@pytest.mark.parametrize("status,body,want", CASES)
def test_a_providers_refusal_names_what_the_model_takes(status: int, body: str, want: list) -> None:
    got = [(r.field, r.action, r.to, r.values) for r in read(status, body)]
    assert got == want


@pytest.mark.parametrize("status,body", [
    # The provider names no field it refuses: never a change (each stays an error row)
    (400, _openai("The request could not be processed.", None, "invalid_request")),
    (400, _anthropic("max_tokens: 70000 > 64000, which is the maximum allowed number of output tokens for "
                     "claude-sonnet-4-5")),  # a limit over the model's maximum: never dropped
    (404, _openai("The model `o9-previw` does not exist or you do not have access to it.", None,
                  "model_not_found")),
    (400, _openai("Unsupported parameter: 'messages'.", "messages", "unsupported_parameter")),  # ours to keep
    (401, _openai("Unsupported parameter: 'top_p'", "top_p", "unsupported_parameter")),  # not a refusal status
    (400, None),
])
def test_what_names_nothing_we_can_change_is_no_refusal(status: int, body: str | None) -> None:
    assert read(status, body) == []


def test_litellms_unsupported_params_error_is_read_through_our_litellm_provider() -> None:
    """litellm refuses before sending (litellm/utils.py, 1.110.2: "{provider} does not support parameters:
    [...], for model=..."): the exception, mapped as our provider maps it, names the fields."""
    import litellm

    from providers.litellm import _map_error

    e = litellm.UnsupportedParamsError(
        message="anthropic does not support parameters: ['seed', 'top_k'], for model=claude-x. To drop these, "
        "set `litellm.drop_params=True` or for proxy:\n\n`litellm_settings:\n drop_params: true`\n",
        model="claude-x", llm_provider="anthropic",
    )
    err = _map_error(litellm, e, None)
    assert [(r.field, r.action) for r in read(err.status, err.body)] == [("seed", "drop"), ("top_k", "drop")]


def test_the_nearest_supported_value() -> None:
    assert nearest("medium", ("high",)) == "high"
    assert nearest("medium", ("low", "high")) == "high"  # a tie: the model keeps reasoning
    assert nearest("minimal", ("low", "medium", "high")) == "low"
    assert nearest("xhigh", ("low", "medium", "high")) == "high"
    assert nearest(0.0, ("1",)) == "1"
    assert nearest("medium", ()) is None


def _sent(model: str, kind: str = "openai", **kw: object) -> tuple[Sent, object]:
    cfg = ModelCfg(name=model, model=model, **kw)
    p = resolve(cfg, kind)
    s = shape_for(p)
    return Sent(None if s.trivial else s, dict(cfg.params), False), p


def test_adapting_changes_only_what_the_refusal_names_and_never_twice() -> None:
    sent, p = _sent("o9-preview", params={"reasoning_effort": "medium", "top_k": 3})
    s1, said = adapt(sent, Refusal("max_tokens", "rename", to="max_completion_tokens"), p)  # type: ignore[misc]
    assert s1.shape.limit_field == "max_completion_tokens" and said == "max_tokens sent as max_completion_tokens"
    s2, _ = adapt(s1, Refusal("reasoning_effort", "value", values=("high",)), p)  # type: ignore[misc]
    assert s2.params == {"reasoning_effort": "high", "top_k": 3}
    assert adapt(s2, Refusal("reasoning_effort", "value", values=("high",)), p) is None  # already the nearest
    s3, _ = adapt(s2, Refusal("temperature", "drop"), p)  # type: ignore[misc]
    assert "temperature" in s3.shape.drop
    assert adapt(s3, Refusal("temperature", "drop"), p) is None  # the same refusal after adapting: final
    assert adapt(s3, Refusal("presence_penalty", "drop"), p) is None  # a field we never send
    s4, _ = adapt(s3, Refusal("n", "split"), p)  # type: ignore[misc]
    assert s4.split_n and adapt(s4, Refusal("n", "split"), p) is None
    # a field the profile sends: an effort on the Responses API (o3-pro is sent its default, medium; the
    # refusal's words are gpt-5-pro's, which our rules now send `high` from the start)
    sent, p = _sent("o3-pro")
    got, said = adapt(sent, read(400, CASES[4][1])[0], p)  # type: ignore[misc]
    assert got.shape.fields["reasoning"] == {"effort": "high"} and said == "reasoning.effort 'high' instead of 'medium'"



def test_a_value_nested_in_the_configs_params_is_moved_to_the_nearest_listed() -> None:
    """params = {reasoning = {effort = "minimal"}} refused with gpt-5.1's words (opencode#4451): the nested
    value becomes the nearest listed one (it was looked for in the profile's fields only: the model stopped)."""
    sent, p = _sent("new-model", params={"reasoning": {"effort": "minimal"}, "top_k": 3})
    body = ('{"error": {"message": "Unsupported value: \'minimal\' is not supported with the \'gpt-5.1\' model. '
            'Supported values are: \'none\', \'low\', \'medium\', and \'high\'.", "param": "***.effort", '
            '"code": "unsupported_value"}}')
    (r,) = read(400, body, {"model": "m", "reasoning": {"effort": "minimal"}, "top_k": 3})
    got, said = adapt(sent, r, p)  # type: ignore[misc]
    assert got.params == {"reasoning": {"effort": "low"}, "top_k": 3} and said == "reasoning.effort 'low' instead of 'minimal'"


# --- end to end: models no map knows, against the contract mock ------------------------------------------

KEYS = ("OPENAI_API_KEY", "ANTHROPIC_API_KEY")


@pytest.fixture
def contract():
    srv = ContractServer().start()
    yield srv
    srv.stop()


def _config(tmp_path: Path, port: int, concurrency: int = 1) -> Path:
    root = f"http://127.0.0.1:{port}"
    cfg = tmp_path / "future.toml"
    cfg.write_text(f"""
[[endpoints]]
name = "openai"
kind = "openai"
base_url = "{root}/v1"
api_key_env = "OPENAI_API_KEY"
max_concurrency = {concurrency}

[[endpoints]]
name = "anthropic"
kind = "anthropic"
base_url = "{root}"
api_key_env = "ANTHROPIC_API_KEY"
max_concurrency = {concurrency}

[[models]]
name = "{FUTURE_REASONING}"
endpoint = "openai"
params = {{ reasoning_effort = "medium" }}

[[models]]
name = "{FUTURE_NO_N}"
endpoint = "openai"

[[models]]
name = "{FUTURE_CLAUDE}"
endpoint = "anthropic"
params = {{ top_p = 0.9, top_k = 40 }}

[[models]]
name = "{FUTURE_STUBBORN}"
endpoint = "openai"
params = {{ top_p = 0.5 }}

[[models]]
name = "{FUTURE_UNREADABLE}"
endpoint = "openai"
""")
    return cfg


def _data(path: Path, first: int, n: int) -> Path:
    path.write_bytes(b"".join(
        orjson.dumps({"id": f"q{i}", "prompt": f"What is {i} + 2?", "choices": ["w", "x", "y", "z"],
                      "answer": "A"}) + b"\n" for i in range(first, first + n)
    ))
    return path


def _rows(out: Path) -> list[dict]:
    return [orjson.loads(x) for x in (out / "results.jsonl").read_bytes().splitlines()]


FUTURE = f"{FUTURE_REASONING},{FUTURE_NO_N},{FUTURE_CLAUDE}"


def test_models_no_map_knows_learn_from_their_refusals_and_the_next_run_starts_learned(
    tmp_path: Path, contract: ContractServer, monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]
) -> None:
    for k in KEYS:
        monkeypatch.setenv(k, "contract-test-key-0123456789")
    cfg = _config(tmp_path, contract.port)
    out = tmp_path / "run1"
    code = main(run_args(_data(tmp_path / "a.jsonl", 0, 10), FUTURE, cfg, out, "--samples", "3"))

    assert code == 0
    rows = _rows(out)
    assert Counter(r["model"] for r in rows if r["error"] is None) == {FUTURE_REASONING: 30, FUTURE_NO_N: 30,
                                                                      FUTURE_CLAUDE: 30}
    assert len(rows) == 90  # a refused call never became a row: each sample has exactly one, ok
    # one request per thing learned (one call in flight per endpoint): 3 + 1 + 2
    assert sorted(contract.refusals) == sorted([
        (FUTURE_REASONING, "future max_tokens"), (FUTURE_REASONING, "future temperature"),
        (FUTURE_REASONING, "future effort"), (FUTURE_NO_N, "future n"),
        (FUTURE_CLAUDE, "future temperature+top_p"), (FUTURE_CLAUDE, "future top_k")])
    man = orjson.loads((out / "manifest.json").read_bytes())
    assert man["learned"][FUTURE_REASONING] == {
        "changes": ["max_tokens sent as max_completion_tokens", "temperature not sent (its provider's default)",
                    "reasoning_effort 'high' instead of 'medium'"], "requests_refused": 3}
    assert man["learned"][FUTURE_NO_N]["changes"] == ["n > 1 sent as separate calls"]
    assert man["learned"][FUTURE_CLAUDE]["changes"] == ["top_p not sent (its provider's default)",
                                                        "top_k not sent (its provider's default)"]
    learned_devs = [d for d in man["protocol"]["deviations"] if "learned from the provider's refusal on" in d]
    assert len(learned_devs) == 6 and learned_devs == [d for d in man["model_deviations"] if d in learned_devs]
    assert any(d.startswith(f"{FUTURE_REASONING}: reasoning_effort 'high' instead of 'medium' (learned from the "
                            "provider's refusal on ") and "Supported values are: 'high'." in d for d in learned_devs)
    log = (out / "log.txt").read_text()  # said at once, in the provider's words
    assert f"{FUTURE_REASONING} ({FUTURE_REASONING}): refused by the provider (Unsupported parameter: " in log

    assert main(["score", str(out)]) == 0  # scores.json carries them (and the report reads them from there)
    scores = orjson.loads((out / "scores.json").read_bytes())
    assert all(d in scores["protocol"]["deviations"] for d in learned_devs)
    assert scores["protocol"]["protocol"] == "custom"

    # `evalsweep models NAME` shows what was learned and where it came from
    capsys.readouterr()
    assert main(["models", FUTURE_REASONING, "--config", str(cfg)]) == 0
    shown = capsys.readouterr().out
    assert re.search(r"learned\s+reasoning_effort 'high' instead of 'medium'\s+learned from the provider's "
                     r"refusal on \d{4}-\d\d-\d\d", shown), shown

    # the dry run says what the next run will say
    capsys.readouterr()
    data2 = _data(tmp_path / "b.jsonl", 10, 5)
    assert main(run_args(data2, FUTURE, cfg, tmp_path / "run2", "--samples", "3", "--dry-run")) == 0
    assert "request shaping, 3 models: learned 3" in "".join(capsys.readouterr())  # counted; words: models NAME

    # the next run (new items, the same cache directory): the learned shape from its first call
    contract.status.clear()
    contract.refusals.clear()
    out2 = tmp_path / "run2"
    code = main(run_args(data2, FUTURE, cfg, out2, "--samples", "3"))
    assert code == 0 and contract.refusals == [] and contract.status[400] == 0
    assert sum(r["error"] is None for r in _rows(out2)) == 45
    body = contract.bodies[FUTURE_REASONING]
    assert body["max_completion_tokens"] == 1024 and body["reasoning_effort"] == "high"
    assert "max_tokens" not in body and "temperature" not in body
    assert "top_p" not in contract.bodies[FUTURE_CLAUDE] and "top_k" not in contract.bodies[FUTURE_CLAUDE]
    assert "n" not in contract.bodies[FUTURE_NO_N]
    said = capsys.readouterr().err  # said before the first call (counted), every word in deviations.txt
    assert "request shaping, 3 models:" in said and "learned 3" in said, said
    assert "o9-preview: max_tokens sent as max_completion_tokens (learned" in (out2 / "deviations.txt").read_text()
    man2 = orjson.loads((out2 / "manifest.json").read_bytes())
    assert all(d in man2["model_deviations"] for d in learned_devs)
    assert {m: v["requests_refused"] for m, v in man2["learned"].items()} == {
        FUTURE_REASONING: 0, FUTURE_NO_N: 0, FUTURE_CLAUDE: 0}


def test_many_calls_in_flight_all_end_ok_and_each_refused_one_is_counted(
    tmp_path: Path, contract: ContractServer, monkeypatch: pytest.MonkeyPatch
) -> None:
    """64 calls at once get the same refusal before the first one taught the model: each is sent again in
    the new shape (none is a row), learned once."""
    for k in KEYS:
        monkeypatch.setenv(k, "contract-test-key-0123456789")
    out = tmp_path / "run"
    code = main(run_args(_data(tmp_path / "a.jsonl", 0, 40), FUTURE, _config(tmp_path, contract.port, 64), out,
                         "--samples", "2"))
    assert code == 0
    rows = _rows(out)
    assert len(rows) == 240 and all(r["error"] is None for r in rows)
    man = orjson.loads((out / "manifest.json").read_bytes())
    assert sum(v["requests_refused"] for v in man["learned"].values()) == contract.status[400]
    assert len(man["learned"][FUTURE_REASONING]["changes"]) == 3  # learned once, however many were refused


def test_an_unrecognised_400_stays_an_error_row_and_the_same_refusal_after_adapting_is_final(
    tmp_path: Path, contract: ContractServer, monkeypatch: pytest.MonkeyPatch
) -> None:
    for k in KEYS:
        monkeypatch.setenv(k, "contract-test-key-0123456789")
    out = tmp_path / "run"
    code = main(run_args(_data(tmp_path / "a.jsonl", 0, 4), f"{FUTURE_UNREADABLE},{FUTURE_STUBBORN}",
                         _config(tmp_path, contract.port), out))
    assert code == 3
    rows = _rows(out)
    assert len(rows) == 8 and all(r["error"] is not None for r in rows)
    odd = [r for r in rows if r["model"] == FUTURE_UNREADABLE]
    # a 400 no rule reads, the same words on a second item: the model is stopped with the provider's words
    # (#36: it used to be sent for every item until the circuit breaker opened)
    assert all("The request could not be processed." in r["error"] for r in odd)
    assert Counter(r["error_kind"] for r in odd) == {"fatal": 1, "model_refused": 3}
    # the same refusal after adapting: nothing can fix the model, which is stopped (runner.calls.gate), its
    # other calls error rows of that kind, never sent
    assert all(r["error_kind"] == "model_refused" for r in rows if r["model"] == FUTURE_STUBBORN)
    refused = Counter(m for m, _ in contract.refusals)
    assert refused[FUTURE_UNREADABLE] == 2  # two items with the same words: stopped, the rest never sent
    assert refused[FUTURE_STUBBORN] == 2  # top_p dropped once; refused again for it: stopped within 3 requests
    assert FUTURE_STUBBORN in orjson.loads((out / "manifest.json").read_bytes())["refused_models"]
    man = orjson.loads((out / "manifest.json").read_bytes())
    assert FUTURE_UNREADABLE not in man.get("learned", {})
    assert man["learned"][FUTURE_STUBBORN]["changes"] == ["top_p not sent (its provider's default)"]


def test_a_dropped_field_leaves_the_body_wherever_it_came_from() -> None:
    """gpt-5's effort from its profile and from the config's params alike: both go, or the same refusal
    would come back."""
    sent, p = _sent("gpt-5", params={"reasoning_effort": "medium"})
    assert sent.shape.fields == {"reasoning_effort": "medium"}  # type: ignore[union-attr]
    got, said = adapt(sent, Refusal("reasoning_effort", "drop"), p)  # type: ignore[misc]
    assert "reasoning_effort" not in got.params and "reasoning_effort" not in got.shape.fields
    assert said == "reasoning_effort not sent (its provider's default)"
    assert adapt(got, Refusal("reasoning_effort", "drop"), p) is None


def test_a_refused_n_costs_at_most_two_requests_whatever_is_queued(
    tmp_path: Path, contract: ContractServer, monkeypatch: pytest.MonkeyPatch
) -> None:
    """#36: n refused on the first item; the other 29 items' calls, formed with n and queued behind the
    first-call gate, are re-formed as single calls when they are sent, never sent as formed (30 refused
    requests before)."""
    for k in KEYS:
        monkeypatch.setenv(k, "contract-test-key-0123456789")
    out = tmp_path / "run"
    code = main(run_args(_data(tmp_path / "a.jsonl", 0, 30), FUTURE_NO_N, _config(tmp_path, contract.port, 8), out,
                         "--samples", "3", "--temperature", "0.7"))
    assert code == 0
    rows = _rows(out)
    assert len(rows) == 90 and all(r["error"] is None for r in rows)
    assert sum(1 for m, _ in contract.refusals if m == FUTURE_NO_N) <= 2, contract.refusals


def test_a_configured_effort_on_a_model_no_map_knows_is_on_the_wire(
    tmp_path: Path, contract: ContractServer, monkeypatch: pytest.MonkeyPatch
) -> None:
    """#36: reasoning_effort set for a model no map knows used to be dropped in silence; now it is sent,
    and recorded as the model's setting."""
    for k in KEYS:
        monkeypatch.setenv(k, "contract-test-key-0123456789")
    cfg = _config(tmp_path, contract.port)
    cfg.write_text(cfg.read_text() + '\n[[models]]\nname = "zeta-7"\nendpoint = "openai"\nreasoning_effort = "high"\n')
    out = tmp_path / "run"
    assert main(run_args(_data(tmp_path / "a.jsonl", 0, 2), "zeta-7", cfg, out)) == 0
    assert contract.bodies["zeta-7"]["reasoning_effort"] == "high"
    man = orjson.loads((out / "manifest.json").read_bytes())
    assert any("zeta-7" in d and "high" in d for d in man["model_deviations"]), man["model_deviations"]
