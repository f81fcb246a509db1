"""A provider-contract mock on 127.0.0.1: each family's documented request rules, refused with the
provider's own error bodies, and each family's usage shapes in its answers.

The rules (each cited where it is applied):
- OpenAI reasoning models (o1/o3/o4-mini, gpt-5 family but gpt-5-chat): `max_tokens` refused, any
  `temperature` or `top_p` but the default refused, `reasoning_effort` only among the model's values
  (`KNOWN_EFFORTS`: gpt-5-pro high only, gpt-5.1 none..high, codex low..high, o-series low..high);
  gpt-5.1 does not reason unless sent an effort; gpt-5-chat refuses `reasoning_effort`; codex models
  refused on chat completions (Responses API only).
- Anthropic Messages: `max_tokens` required and within the model's maximum; with `thinking`,
  `budget_tokens` >= 1024 and < `max_tokens`, and no `temperature` (other than 1) or `top_k`;
  Claude 4.5+ and Opus 4.1: `temperature` and `top_p` not both.
- Gemini (OpenAI-compatible endpoint): `reasoning_effort` and a thinking budget not both; Gemini 3 Pro
  takes low|high only; 2.5 Flash-Lite thinks only when asked, the others by default.
- DeepSeek reasoner: sampling fields accepted and ignored (its docs); usage reports its cache as
  `prompt_cache_hit_tokens`. xAI: reasoning tokens outside `completion_tokens`, inside `total_tokens`.
  Other chat models take all.
- Future models (the last section): ids that no map and no family rule of ours knows, each refusing
  what such a model refuses, in its provider's words: only learning from the refusal makes them work.
Answers are deterministic and their usage is a function of the request (`usage_for`), so a test can
compute every cost by hand. A prompt containing `[[exhaust]]` sent to a reasoning model gets the
reasoning-exhausted answer: no text, cut by the limit, every output token spent reasoning.
"""

from __future__ import annotations

import re
from collections import Counter
from typing import Any

import orjson
from aiohttp import web

from tests.mock_openai import MockServer, answer_text

REASONING = re.compile(r"^(o1|o3|o4)(-|$)|^gpt-5(?!(\.\d+)?-chat)")
CODEX = re.compile(r"codex")
# Opus 4.1 refuses the pair too (open-webui/pipelines#546, aws-samples/bedrock-chat#979)
CLAUDE_45 = re.compile(r"claude-(opus|sonnet|haiku)-4-5|claude-opus-4-1")
CLAUDE_MAX = {"claude-sonnet-4-5": 64000, "claude-opus-4-5": 64000, "claude-haiku-4-5": 64000,
              "claude-opus-4-1": 32000, "claude-sonnet-4": 64000, "claude-3-5-haiku": 8192}
REASONING_TOKENS = 120


def _openai_error(message: str, param: str | None, code: str) -> web.Response:
    """OpenAI's 400 body (https://platform.openai.com/docs/guides/error-codes)."""
    return web.json_response(
        {"error": {"message": message, "type": "invalid_request_error", "param": param, "code": code}}, status=400
    )


def _anthropic_error(message: str) -> web.Response:
    """Anthropic's 400 body (https://docs.anthropic.com/en/api/errors)."""
    return web.json_response(
        {"type": "error", "error": {"type": "invalid_request_error", "message": message}}, status=400
    )


# --- Known models: the efforts each takes, as the providers refuse the others ---------------------
# OpenAI: openai-openapi ReasoningEffort ("gpt-5-pro defaults to (and only supports) high"; gpt-5.1:
# none, low, medium, high); codex: low|medium|high; o-series: low|medium|high. The 400 body is OpenAI's
# published wording: "Unsupported value: 'medium' is not supported with the 'gpt-5-pro' model.
# Supported values are: 'high'." (anomalyco/opencode PR#3474), "... 'minimal' is not supported with the
# 'gpt-5.1' model. Supported values are: 'none', 'low', 'medium', and 'high'." (openai-agents-python#2089).
KNOWN_EFFORTS = [
    (re.compile(r"^gpt-5(\.\d+)?-pro"), ("high",)),
    (re.compile(r"codex-max"), ("low", "medium", "high", "xhigh")),
    (re.compile(r"codex"), ("low", "medium", "high")),
    (re.compile(r"^gpt-5\.1"), ("none", "low", "medium", "high")),
    (re.compile(r"^gpt-5\.\d"), ("none", "low", "medium", "high", "xhigh")),
    (re.compile(r"^gpt-5"), ("minimal", "low", "medium", "high")),
    (re.compile(r"^(o1|o3|o4)"), ("low", "medium", "high")),
]
GPT5_CHAT = re.compile(r"^gpt-5(\.\d+)?-chat")
GEMINI_3_PRO = re.compile(r"gemini-3-pro")


def _listed(values: tuple[str, ...]) -> str:
    q = [f"'{v}'" for v in values]
    return q[0] if len(q) == 1 else ", ".join(q[:-1]) + f", and {q[-1]}" if len(q) > 2 else " and ".join(q)


def effort_refusal(bare: str, effort: Any, param: str) -> web.Response | None:
    """OpenAI's 400 for an effort the model does not take."""
    takes = next((t for rx, t in KNOWN_EFFORTS if rx.search(bare)), None)
    if effort is None or takes is None or effort in takes:
        return None
    msg = (f"Unsupported value: '{effort}' is not supported with the '{bare}' model. "
           f"Supported values are: {_listed(takes)}.")
    return _openai_error(msg, param, "unsupported_value")


def gemini_error(message: str) -> web.Response:
    """Google's 400 as its OpenAI-compatible endpoint sends it: a list around a google.rpc Status
    (google-gemini/gemini-cli#14025; jenslys/opencode-gemini-auth#14)."""
    return web.json_response([{"error": {"code": 400, "message": message, "status": "INVALID_ARGUMENT"}}],
                             status=400)


def reasons(model: str, body: dict[str, Any]) -> bool:
    """Whether the real provider reasons on this chat or Responses request (Claude: see `messages`)."""
    bare = model.rsplit("/", 1)[-1]
    effort = body.get("reasoning_effort") or (body.get("reasoning") or {}).get("effort")
    budget = (((body.get("extra_body") or {}).get("google") or {}).get("thinking_config") or {}).get(
        "thinking_budget")
    if effort == "none" or budget == 0:
        return False
    if re.search(r"^gpt-5\.\d", bare) and not re.search(r"codex|pro", bare):
        return effort is not None  # gpt-5.1+ default to none (openai-openapi ReasoningEffort)
    if REASONING.search(bare):
        return True
    if "gemini" in bare:  # ai.google.dev/gemini-api/docs/thinking: Flash-Lite does not think by default
        if "flash-lite" in bare:
            return effort is not None or bool(budget)
        return bool(re.search(r"gemini-(2\.5|[3-9])", bare))
    return "reasoner" in bare or bool(re.search(r"grok-(3-mini|4)", bare))


def _text_of(content: Any) -> str:
    if isinstance(content, str):
        return content
    return "".join(p.get("text", "") for p in content or [] if isinstance(p, dict))


def usage_for(prompt: str, answer: str, reasoning: bool) -> dict[str, int]:
    """The usage the mock bills: every prompt's first half "cached" (a shared few-shot prefix), 8
    tokens written to the cache, a fixed thinking spend for reasoning models."""
    ins = len(prompt) // 4 + 10
    out = len(answer) // 4 + 1 + (REASONING_TOKENS if reasoning else 0)
    return {"input": ins, "cached": ins // 2, "written": 8, "output": out,
            "reasoning": REASONING_TOKENS if reasoning else 0}


class ContractServer(MockServer):
    def __init__(self, **kw: Any) -> None:
        super().__init__(**kw)
        self.status: Counter[int] = Counter()
        self.refusals: list[tuple[str, str]] = []
        self.bodies: dict[str, dict[str, Any]] = {}

    def app(self) -> web.Application:
        app = web.Application(client_max_size=64 * 2**20, middlewares=[self.sse.middleware])  # streams (tests.mock_sse)
        app.router.add_post("/v1/chat/completions", self.chat)
        app.router.add_post("/v1/responses", self.responses)
        app.router.add_post("/v1/messages", self.messages)
        app.router.add_get("/v1/models", self.handle_models)
        app.router.add_get("/stats", self.handle_stats)
        return app

    def _answer(self, resp: web.Response, model: str, why: str = "") -> web.Response:
        with self._lock:
            self.status[resp.status] += 1
            if resp.status != 200:
                self.refusals.append((model, why))
        return resp

    async def chat(self, request: web.Request) -> web.Response:
        body = orjson.loads(await request.read())
        model = body.get("model", "")
        self.bodies[model] = body
        bare = model.rsplit("/", 1)[-1]
        if (refused := future_chat(body, bare)) is not None:  # models no map knows (section at the end)
            return self._answer(refused[0], model, refused[1])
        if CODEX.search(bare):  # Responses-only models (litellm map: supported_endpoints)
            msg = "This model is only supported in v1/responses and not in v1/chat/completions."
            return self._answer(_openai_error(msg, "model", "unsupported_api"), model, "chat for codex")
        reasoning = reasons(model, body)
        if GPT5_CHAT.search(bare) and "reasoning_effort" in body:  # not a reasoning model (Laisky/one-api#120)
            msg = "Unsupported parameter: 'reasoning_effort' is not supported with this model."
            return self._answer(_openai_error(msg, "reasoning_effort", "unsupported_parameter"), model, "effort")
        if REASONING.search(bare):
            # https://platform.openai.com/docs/guides/reasoning#limitations
            if "max_tokens" in body:
                msg = ("Unsupported parameter: 'max_tokens' is not supported with this model. "
                       "Use 'max_completion_tokens' instead.")
                return self._answer(_openai_error(msg, "max_tokens", "unsupported_parameter"), model, "max_tokens")
            for f in ("temperature", "top_p"):
                if f in body and body[f] != 1:
                    msg = (f"Unsupported value: '{f}' does not support {body[f]!r} with this model. "
                           "Only the default (1) value is supported.")
                    return self._answer(_openai_error(msg, f, "unsupported_value"), model, f)
            refused = effort_refusal(bare, body.get("reasoning_effort"), "reasoning_effort")
            if refused is not None:
                return self._answer(refused, model, "effort")
        if GEMINI_3_PRO.search(bare) and body.get("reasoning_effort") not in (None, "low", "high"):
            # Gemini 3 Pro: thinking levels low|high (discuss.ai.google.dev/t/112648, confirmed by Google)
            level = str(body["reasoning_effort"]).upper()
            return self._answer(gemini_error(f"Thinking level {level} is not supported for this model."),
                                model, "gemini effort")
        if "gemini" in bare and "reasoning_effort" in body and "extra_body" in body:
            # https://ai.google.dev/gemini-api/docs/openai#thinking: the two overlap
            msg = "reasoning_effort and thinking_budget cannot both be set"
            return self._answer(_openai_error(msg, "reasoning_effort", "invalid_argument"), model, "gemini both")
        prompt = _text_of((body.get("messages") or [{}])[-1].get("content"))
        n = int(body.get("n", 1))
        exhaust = reasoning and "[[exhaust]]" in prompt
        choices, out_total, reas_total = [], 0, 0
        u = usage_for(prompt, "", False)
        for i in range(n):
            text = "" if exhaust else answer_text(model, prompt, i)
            ui = usage_for(prompt, text, reasoning)
            out_total += ui["output"]
            reas_total += ui["reasoning"]
            choices.append({"index": i, "message": {"role": "assistant", "content": text},
                            "finish_reason": "length" if exhaust else "stop"})
        usage = {
            "prompt_tokens": u["input"], "completion_tokens": out_total, "total_tokens": u["input"] + out_total,
            "prompt_tokens_details": {"cached_tokens": u["cached"]},
            "completion_tokens_details": {"reasoning_tokens": reas_total},
        }
        if "grok" in bare:  # xAI: reasoning tokens outside completion_tokens, inside total_tokens, billed as
            # output (docs.x.ai consumption and rate limits; Vertex "Reasoning for Grok models")
            usage["completion_tokens"] = out_total - reas_total
        if "deepseek" in bare:  # DeepSeek's own cache fields (api-docs.deepseek.com/guides/kv_cache)
            del usage["prompt_tokens_details"]
            usage.update(prompt_cache_hit_tokens=u["cached"], prompt_cache_miss_tokens=u["input"] - u["cached"])
        return self._answer(web.json_response({
            "id": "chatcmpl-contract", "object": "chat.completion", "model": model, "choices": choices,
            "usage": usage}), model)

    async def responses(self, request: web.Request) -> web.Response:
        body = orjson.loads(await request.read())
        model = body.get("model", "")
        self.bodies[model] = body
        # https://platform.openai.com/docs/api-reference/responses/create
        for f in ("max_tokens", "max_completion_tokens", "messages", "n"):
            if f in body:
                msg = f"Unsupported parameter: '{f}'."
                return self._answer(_openai_error(msg, f, "unsupported_parameter"), model, f)
        if "temperature" in body and body["temperature"] != 1:
            msg = "Unsupported parameter: 'temperature' is not supported with this model."
            return self._answer(_openai_error(msg, "temperature", "unsupported_parameter"), model, "temperature")
        refused = effort_refusal(model.rsplit("/", 1)[-1], (body.get("reasoning") or {}).get("effort"),
                                 "reasoning.effort")
        if refused is not None:
            return self._answer(refused, model, "effort")
        items = body.get("input") or [{}]
        prompt = _text_of(items[-1].get("content"))
        exhaust = "[[exhaust]]" in prompt
        text = "" if exhaust else answer_text(model, prompt, 0)
        u = usage_for(prompt, text, True)
        output: list[dict[str, Any]] = [{"type": "reasoning", "id": "rs_1", "summary": []}]
        if not exhaust:
            output.append({"type": "message", "id": "msg_1", "role": "assistant", "status": "completed",
                           "content": [{"type": "output_text", "text": text, "annotations": []}]})
        return self._answer(web.json_response({
            "id": "resp_contract", "object": "response", "model": model,
            "status": "incomplete" if exhaust else "completed",
            "incomplete_details": {"reason": "max_output_tokens"} if exhaust else None,
            "output": output,
            "usage": {"input_tokens": u["input"], "input_tokens_details": {"cached_tokens": u["cached"]},
                      "output_tokens": u["output"], "output_tokens_details": {"reasoning_tokens": u["reasoning"]},
                      "total_tokens": u["input"] + u["output"]},
        }), model)

    async def messages(self, request: web.Request) -> web.Response:
        body = orjson.loads(await request.read())
        model = body.get("model", "")
        self.bodies[model] = body
        bare = model.rsplit("/", 1)[-1]
        if (refused := future_messages(body, bare)) is not None:  # models no map knows (section at the end)
            return self._answer(refused[0], model, refused[1])
        top = next((v for k, v in CLAUDE_MAX.items() if bare.startswith(k)), 8192)
        mt = body.get("max_tokens")
        if not isinstance(mt, int):
            return self._answer(_anthropic_error("max_tokens: Field required"), model, "no max_tokens")
        if mt > top:
            msg = f"max_tokens: {mt} > {top}, which is the maximum allowed number of output tokens for {bare}"
            return self._answer(_anthropic_error(msg), model, "max_tokens over")
        thinking = body.get("thinking")
        if isinstance(thinking, dict) and thinking.get("type") == "enabled":
            # https://docs.anthropic.com/en/docs/build-with-claude/extended-thinking
            b = thinking.get("budget_tokens")
            if not isinstance(b, int) or b < 1024:
                return self._answer(_anthropic_error("thinking.enabled.budget_tokens: Input should be "
                                                     "greater than or equal to 1024"), model, "budget<1024")
            if b >= mt:
                return self._answer(_anthropic_error("`max_tokens` must be greater than "
                                                     "`thinking.budget_tokens`"), model, "budget>=max")
            if body.get("temperature", 1) != 1 or "top_k" in body:
                msg = ("`temperature` may only be set to 1 when thinking is enabled. Please consult our "
                       "documentation at https://docs.claude.com/en/docs/build-with-claude/extended-thinking")
                return self._answer(_anthropic_error(msg), model, "temperature with thinking")
        if CLAUDE_45.search(bare) and "temperature" in body and "top_p" in body:
            # https://docs.anthropic.com/en/docs/about-claude/models/migrating-to-claude-4
            msg = "`temperature` and `top_p` cannot both be specified for this model. Please use only one."
            return self._answer(_anthropic_error(msg), model, "temperature+top_p")
        prompt = _text_of((body.get("messages") or [{}])[-1].get("content"))
        thinks = isinstance(thinking, dict)
        exhaust = thinks and "[[exhaust]]" in prompt
        text = "" if exhaust else answer_text(model, prompt, 0)
        u = usage_for(prompt, text, thinks)
        content: list[dict[str, Any]] = []
        if thinks:
            content.append({"type": "thinking", "thinking": "Let me think.", "signature": "sig"})
        if not exhaust:
            content.append({"type": "text", "text": text})
        return self._answer(web.json_response({
            "id": "msg_contract", "type": "message", "role": "assistant", "model": model, "content": content,
            "stop_reason": "max_tokens" if exhaust else "end_turn", "stop_sequence": None,
            # input_tokens excludes the cache: https://docs.anthropic.com/en/docs/build-with-claude/prompt-caching
            "usage": {"input_tokens": u["input"] - u["cached"] - u["written"],
                      "cache_read_input_tokens": u["cached"], "cache_creation_input_tokens": u["written"],
                      "output_tokens": u["output"]},
        }), model)


# --- Future models: ids no map (litellm's, genai-prices) and no family rule of ours knows ------------
# Each refuses the 2023-style request a new user's config sends, with its provider's published error
# body; evalsweep gets them right only by reading the refusal (runner.calls.learned). Sources of the words:
# OpenAI's `{"error": {"message", "type", "param", "code"}}` with code unsupported_parameter /
# unsupported_value ("Use 'max_completion_tokens' instead", "Only the default (1) value is supported"
# (https://platform.openai.com/docs/guides/reasoning#limitations, the rules above); "Supported values
# are: ..." as OpenAI words it for reasoning_effort, e.g. Kilo-Org/cloud#3807, anomalyco/opencode#3474);
# Anthropic's invalid_request_error "`temperature` and `top_p` cannot both be specified for this model.
# Please use only one." (migrating-to-claude-4; infiniflow/ragflow#11815) and "<field>: Extra inputs are
# not permitted", the form it answers a field a model no longer takes with (claude-opus-4-7's
# temperature; https://docs.anthropic.com/en/api/errors for the envelope).
FUTURE_REASONING = "o9-preview"
"""An OpenAI reasoning model: refuses max_tokens, temperature/top_p but 1, and any effort but high."""
FUTURE_NO_N = "gpt-7-mini"
"""An OpenAI chat model that takes one choice per request (n = 1)."""
FUTURE_CLAUDE = "claude-mythos-5"
"""A Claude that refuses temperature with top_p, and refuses top_k."""
FUTURE_STUBBORN = "o9-stubborn"
"""Refuses top_p whether it is sent or not: after adapting, the same refusal (a final error)."""
FUTURE_UNREADABLE = "gpt-7-odd"
"""Refuses every request with a 400 that names nothing: no change can follow from it."""


def future_chat(body: dict[str, Any], bare: str) -> tuple[web.Response, str] | None:
    if bare == FUTURE_REASONING:
        if "max_tokens" in body:
            msg = ("Unsupported parameter: 'max_tokens' is not supported with this model. "
                   "Use 'max_completion_tokens' instead.")
            return _openai_error(msg, "max_tokens", "unsupported_parameter"), "future max_tokens"
        for f in ("temperature", "top_p"):
            if f in body and body[f] != 1:
                msg = (f"Unsupported value: '{f}' does not support {body[f]!r} with this model. "
                       "Only the default (1) value is supported.")
                return _openai_error(msg, f, "unsupported_value"), f"future {f}"
        effort = body.get("reasoning_effort")
        if effort is not None and effort != "high":
            msg = (f"Unsupported value: 'reasoning_effort' does not support {effort!r} with this model. "
                   "Supported values are: 'high'.")
            return _openai_error(msg, "reasoning_effort", "unsupported_value"), "future effort"
    if bare == FUTURE_NO_N and int(body.get("n", 1)) != 1:
        msg = (f"Unsupported value: 'n' does not support {body['n']} with this model. "
               "Only the default (1) value is supported.")
        return _openai_error(msg, "n", "unsupported_value"), "future n"
    if bare == FUTURE_STUBBORN:
        msg = "Unsupported parameter: 'top_p' is not supported with this model."
        return _openai_error(msg, "top_p", "unsupported_parameter"), "stubborn top_p"
    if bare == FUTURE_UNREADABLE:
        return _openai_error("The request could not be processed.", None, "invalid_request"), "unreadable"
    return None


def future_messages(body: dict[str, Any], bare: str) -> tuple[web.Response, str] | None:
    if bare != FUTURE_CLAUDE:
        return None
    if "temperature" in body and "top_p" in body:
        msg = "`temperature` and `top_p` cannot both be specified for this model. Please use only one."
        return _anthropic_error(msg), "future temperature+top_p"
    if "top_k" in body:
        return _anthropic_error("top_k: Extra inputs are not permitted"), "future top_k"
    return None
