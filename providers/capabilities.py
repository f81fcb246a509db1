"""What a model accepts, resolved once per model before its first call (never per call).

A 45-model sweep today is mostly reasoning models, and each family refuses 2023-style requests in its
own way: OpenAI's o-series and gpt-5 refuse `max_tokens` and any `temperature` but 1, Claude with
extended thinking refuses `temperature` and a budget not below `max_tokens`, Claude 4.5+ refuses
`temperature` with `top_p`. A `Profile` says, per model, which sampling fields it takes, where its token
limit goes, whether and how it reasons, its limits and vision, and where each of those came from:
the config first, then litellm's bundled model map (read as JSON, litellm is not imported), then the
family rules below for ids the map lacks, then defaults.
"""

from __future__ import annotations

import re
from dataclasses import dataclass, field
from typing import Any

from providers.efforts import (
    REASONING_BUDGET,
    XAI_MINI,
    Efforts,
    for_budget,
    gemini_efforts,
    nearest,
    openai_efforts,
)
from providers.pricing import map_entry

DEFAULT_EFFORT = "medium"  # OpenAI's default for models before gpt-5.1 (openai-openapi ReasoningEffort)
DYNAMIC_HEADROOM = REASONING_BUDGET["high"]
"""Room for a model that decides its own thinking (Gemini's dynamic thinking: up to 32,768 tokens on
2.5 Pro, ai.google.dev/gemini-api/docs/thinking): its output limit holds the thoughts."""
MIN_THINKING = 1024  # Anthropic: budget_tokens >= 1024 (extended-thinking docs)
SAMPLING = frozenset({"temperature", "top_p", "seed", "n"})

# Family rules, for model ids litellm's map does not know (the map wins where it has the field).
# OpenAI reasoning models (https://platform.openai.com/docs/guides/reasoning): `max_completion_tokens`
# (max_tokens is refused), no temperature/top_p other than the default, `reasoning_effort`.
_OPENAI_REASONING = re.compile(r"^(o1|o3|o4)(-|$)|^gpt-5(?!(\.\d+)?-chat)")
# gpt-5-chat-latest is not a reasoning model and refuses `reasoning_effort` ("Unsupported parameter:
# 'reasoning_effort' is not supported with this model"; inspect_ai _providers/openai.py excludes
# gpt-5-chat from its reasoning options) although litellm's map says `supports_reasoning`. Like every
# current OpenAI chat model it takes `max_completion_tokens` (openai-openapi: `max_tokens` is
# "deprecated in favor of max_completion_tokens").
_GPT5_CHAT = re.compile(r"^gpt-5(\.\d+)?-chat")
_GPT5_PRO_ID = re.compile(r"^gpt-5(\.\d+)?-pro")
_CODEX = re.compile(r"codex")  # served on /v1/responses only (litellm map: supported_endpoints)
# Claude (https://docs.anthropic.com/en/docs/build-with-claude/extended-thinking): thinking on
# Claude 3.7 and 4+; with thinking, no temperature/top_k, budget_tokens >= 1024 and < max_tokens.
_CLAUDE_THINKS = re.compile(r"claude-(3-7|(opus|sonnet|haiku)-[4-9]|[4-9])")
# Only one of temperature and top_p: Claude 4.5+ (https://docs.anthropic.com/en/docs/about-claude/
# models/migrating-to-claude-4) and Opus 4.1, which refuses the pair with the same 400 ("`temperature`
# and `top_p` cannot both be specified for this model", open-webui/pipelines#546, bedrock-chat#979).
_CLAUDE_EXCLUSIVE = re.compile(r"claude-(opus|sonnet|haiku)-(4-[5-9]|4\.[5-9]|[5-9])|claude-opus-4[-.]1")
# Gemini 2.5+ think (https://ai.google.dev/gemini-api/docs/thinking); its OpenAI-compatible endpoint
# takes `reasoning_effort` or a `thinking_budget` (https://ai.google.dev/gemini-api/docs/openai).
_GEMINI_THINKS = re.compile(r"gemini-(2\.5|[3-9])")
# Gemini 3: "we strongly recommend keeping the temperature parameter at its default value of 1.0 ...
# may lead to unexpected behavior, such as looping or degraded performance, particularly in complex
# mathematical or reasoning tasks" (ai.google.dev/gemini-api/docs/gemini-3, Vertex Gemini 3 guide).
_GEMINI_3 = re.compile(r"gemini-[3-9]")
GEMINI_3_TEMPERATURE = (
    "Google's Gemini 3 guide recommends keeping temperature at its default 1.0: lower values \"may lead "
    "to unexpected behavior, such as looping or degraded performance\" on reasoning tasks "
    "(ai.google.dev/gemini-api/docs/gemini-3)"
)
# DeepSeek reasoner (https://api-docs.deepseek.com/guides/reasoning_model): temperature/top_p have no
# effect; max_tokens counts the chain of thought; no budget control.
_DEEPSEEK_REASONER = re.compile(r"deepseek-(reasoner|r1)")
_XAI_REASONING = re.compile(r"grok-(3-mini|4)")
# Open models that think. Qwen3 hybrids (Qwen3-8B, Qwen3-235B-A22B, no -Instruct/-Thinking-2507
# suffix) think by default and switch it off with `chat_template_kwargs: {"enable_thinking": false}`
# (huggingface.co/Qwen/Qwen3-8B "Switching Between Thinking and Non-Thinking Mode"; vLLM docs
# features/reasoning_outputs); Qwen3 *-Thinking models always think, *-Instruct never do. Magistral
# always reasons before its answer (docs.mistral.ai/capabilities/reasoning), with no control field.
_QWEN3 = re.compile(r"qwen3(?!-coder)")
_MAGISTRAL = re.compile(r"magistral")
# OpenRouter normalises reasoning across providers with one `reasoning` object: {"effort": ...} or
# {"max_tokens": N} (openrouter.ai/docs/use-cases/reasoning-tokens), and takes `max_tokens` for every
# model (openrouter.ai/docs/api-reference/parameters).
_OPENROUTER = "openrouter.ai"


@dataclass(frozen=True)
class Profile:
    family: str
    """openai, openai-reasoning, anthropic, gemini, deepseek, xai or other."""
    api: str
    """chat (/chat/completions), responses (/v1/responses) or messages (Anthropic native)."""
    sampling: frozenset[str]
    """Sampling fields the model takes (temperature, top_p, seed, n); others are never sent."""
    limit_field: str
    """max_tokens or max_completion_tokens."""
    reasoning: bool
    """The model can reason (whether it does on these requests: `thinks`)."""
    reasoning_form: str | None
    """effort (reasoning_effort), thinking (Anthropic budget_tokens), gemini (effort or thinking
    budget), openrouter (its `reasoning` object), qwen3 (enable_thinking), or None (no control)."""
    effort: str | None
    """The effort sent (config, a budget's nearest effort, or the provider's default made explicit);
    None: no effort field is sent."""
    thinking_budget: int | None
    """Thinking tokens sent (Anthropic budget_tokens, Gemini thinking_budget, OpenRouter max_tokens)."""
    max_output_tokens: int | None
    context_window: int | None
    vision: bool | None
    exclusive_sampling: bool = False
    """temperature and top_p never both (Claude 4.5+, Opus 4.1)."""
    thinks: bool = False
    """Reasoning is on for this model's requests (Claude only when asked; gpt-5.1 and Gemini 2.5
    Flash-Lite only when asked, their providers' default being no reasoning)."""
    headroom: int = 0
    """Reasoning tokens added to a suite's answer budget in the request's limit."""
    efforts: tuple[str, ...] = ()
    """The efforts the provider takes for this model (providers.efforts)."""
    default_effort: str | None = None
    """What the model does when no effort is sent (None: dynamic, the model decides)."""
    conflicts: tuple[str, ...] = ()
    """What the config asks that the provider refuses, said before the run (`problems`)."""
    temperature_caution: str | None = None
    """The provider's warning against a temperature below its default (Gemini 3), said before a run
    whose protocol asks for one."""
    sources: dict[str, str] = field(default_factory=dict)

    @property
    def reasoning_budget(self) -> int:
        """Tokens added to a suite's answer budget in the request's limit."""
        return self.headroom if self.thinks else 0


def _bare(model_id: str) -> str:
    return model_id.rsplit("/", 1)[-1].lower()


def _entry(model_id: str, kind: str) -> dict[str, Any]:
    e = map_entry(model_id)
    if not e and kind == "anthropic":
        e = map_entry(f"anthropic/{model_id}")
    if not e and "gemini" in model_id:
        e = map_entry(f"gemini/{_bare(model_id)}")
    return e


def family_of(model_id: str, kind: str) -> str:
    b = _bare(model_id)
    if kind == "anthropic" or b.startswith("claude"):
        return "anthropic"
    if _OPENAI_REASONING.search(b):
        return "openai-reasoning"
    if b.startswith(("gpt-", "chatgpt")):
        return "openai"
    if "gemini" in b:
        return "gemini"
    if "deepseek" in b:
        return "deepseek"
    if "grok" in b:
        return "xai"
    return "other"


def _open_reasoning(b: str) -> tuple[bool | None, str | None]:
    """(reasons, form) of an open-weights model by its id: Qwen3 hybrids and thinkers, Magistral."""
    if _MAGISTRAL.search(b):
        return True, None
    if _QWEN3.search(b):
        if "instruct" in b:
            return False, None
        return True, (None if "thinking" in b else "qwen3")
    return None, None


def _efforts(fam: str, form: str | None, b: str, entry: dict[str, Any]) -> Efforts | None:
    if fam == "openai-reasoning":
        return openai_efforts(b, entry)
    if fam == "gemini":
        return gemini_efforts(b)
    if fam == "xai" and form == "effort":
        return XAI_MINI
    if form == "qwen3":  # thinking on by default, `none` switches it off
        return Efforts(("none", "low", "medium", "high"), None, "huggingface.co/Qwen/Qwen3-8B")
    return None


def _reasoning(
    fam: str, form: str | None, effs: Efforts | None, b: str, reasoning: bool, asked: str | None,
    budget: int | None,
) -> tuple[str | None, int | None, bool, int, str | None, list[str]]:
    """(effort sent, thinking budget, thinks, headroom, the provider's default, conflicts) for the
    config's effort and budget: a provider's default is kept unless the config asks otherwise."""
    conflicts: list[str] = []
    effort: str | None = None
    if effs is not None and asked is not None and asked not in effs.takes:
        if fam == "openai-reasoning" or (asked == "none" and form != "openrouter"):
            conflicts.append(f"reasoning_effort = {asked!r} is refused by {b}: it takes "
                             f"{', '.join(effs.takes)} ({effs.doc})")
        elif form != "openrouter":  # Gemini, grok-3-mini: the nearest level they take, never a 400
            asked = nearest(asked, effs.takes)
    if asked == "none" and reasoning and form is None and fam not in ("anthropic", "openai-reasoning"):
        conflicts.append(f"reasoning_effort = 'none': {b} always reasons (no field switches it off)")
    default = effs.default if effs is not None else (DEFAULT_EFFORT if reasoning else None)
    if fam == "anthropic":
        default = "none"  # Claude thinks only when the request asks (extended-thinking docs)
    if form in ("effort", "openrouter", "qwen3") or (form == "gemini" and asked is not None):
        effort = asked
    if form == "effort" and effort is None:
        if budget is not None:  # gpt-5.1 given only a budget must be sent an effort, or it never reasons
            effort = for_budget(budget, effs.takes if effs else ("low", "medium", "high"))
        elif default not in (None, "none"):
            effort = default  # the provider's own default, made explicit
    if fam == "anthropic":
        if budget is None and asked not in (None, "none"):
            budget = REASONING_BUDGET[asked]
        thinks = reasoning and budget is not None and asked != "none"
    else:
        chosen = effort if effort is not None else ("custom" if budget is not None else default)
        thinks = reasoning and chosen != "none"
    if not thinks:
        headroom = 0
    elif budget is not None:
        headroom = budget
    elif effort is not None:
        headroom = REASONING_BUDGET[effort]
    elif asked is not None:  # no effort field (DeepSeek, grok-4, Magistral): the config still sizes its room
        headroom = REASONING_BUDGET[asked]
    else:  # the model decides how long it thinks: Gemini's dynamic thinking, DeepSeek, grok-4, Qwen3
        headroom = DYNAMIC_HEADROOM if fam == "gemini" else REASONING_BUDGET[DEFAULT_EFFORT]
    return effort, budget, thinks, headroom, default, conflicts


def resolve(cfg: Any, kind: str, base_url: str | None = None) -> Profile:
    """The profile of a configured model (runner.config.ModelCfg) on an endpoint of `kind` at
    `base_url` (OpenRouter's reasoning object is chosen by host)."""
    mid = cfg.model_id
    b = _bare(mid)
    entry = _entry(mid, kind)
    fam = family_of(mid, kind)
    src: dict[str, str] = {"family": "family rule"}

    def pick(name: str, conf: Any, mapped: Any, rule: Any, default: Any = None) -> Any:
        for value, where in ((conf, "config"), (mapped, "litellm map"), (rule, "family rule")):
            if value is not None:
                src[name] = where
                return value
        src[name] = "default"
        return default

    open_reasons, open_form = _open_reasoning(b)
    rule_reasoning = {
        "openai-reasoning": True,
        "anthropic": bool(_CLAUDE_THINKS.search(b)),
        "gemini": bool(_GEMINI_THINKS.search(b)),
        "deepseek": bool(_DEEPSEEK_REASONER.search(b)),
        "xai": bool(_XAI_REASONING.search(b)),
        "other": open_reasons,
    }.get(fam)
    chat5 = bool(_GPT5_CHAT.search(b))
    mapped_reasoning = None if chat5 else entry.get("supports_reasoning")  # the map is wrong on gpt-5-chat
    reasoning = bool(pick("reasoning", cfg.reasoning, mapped_reasoning, rule_reasoning, False))
    if fam == "openai" and reasoning and not chat5:  # a chat-named model the map says reasons
        fam = "openai-reasoning"
    endpoints = entry.get("supported_endpoints")
    mapped_api = None
    if kind == "openai" and isinstance(endpoints, list) and endpoints:
        mapped_api = (
            "chat"
            if "/v1/chat/completions" in endpoints
            else "responses"
            if "/v1/responses" in endpoints
            else None
        )
    rule_api = "responses" if fam == "openai-reasoning" and _CODEX.search(b) else None
    api = (
        "messages"
        if kind == "anthropic"
        else pick("api", getattr(cfg, "api", None), mapped_api, rule_api, "chat")
    )
    if kind == "anthropic":
        src["api"] = "endpoint kind"
    router = kind == "openai" and _OPENROUTER in (base_url or "")
    form = {"openai-reasoning": "effort", "anthropic": "thinking", "gemini": "gemini", "xai": "effort",
            "other": open_form}.get(fam)
    if not reasoning or (fam == "xai" and "grok-4" in b):  # grok-4 reasons but takes no effort
        form = None
    if fam == "other" and open_reasons is None and cfg.reasoning is not False and (
            cfg.reasoning_effort is not None or cfg.thinking_budget is not None):
        # A model no map knows, given a reasoning setting: what the user asked for is sent, in the
        # OpenAI convention (reasoning_effort; a budget as OpenRouter's reasoning.max_tokens) or as
        # Anthropic's thinking; refused, it is learned and recorded like any other change (#36).
        reasoning = True
        src["reasoning"] = "config"
        form = "thinking" if kind == "anthropic" else "effort" if cfg.reasoning_effort else "openrouter"
    effs = _efforts(fam, form, b, entry)
    if router and reasoning:
        form = "openrouter"
    r = _reasoning(fam, form, effs, b, reasoning, cfg.reasoning_effort, cfg.thinking_budget)
    effort, budget, thinks, headroom, default, conflicts = r
    sent_budget = budget if thinks and form in ("thinking", "gemini", "openrouter") else None
    sampling = SAMPLING
    if fam == "openai-reasoning" or (fam == "deepseek" and reasoning):
        sampling = SAMPLING - {"temperature", "top_p"}
    if fam == "anthropic":
        sampling = SAMPLING - {"n", "seed"}
        if thinks:
            sampling = sampling - {"temperature"}
    limit_field = "max_completion_tokens" if fam == "openai-reasoning" or chat5 else "max_tokens"
    src["limit_field"] = src["sampling"] = "family rule"
    if router:
        limit_field = "max_tokens"
    if api == "responses":
        limit_field = "max_output_tokens"
        sampling = sampling - {"n"}
    return Profile(
        family=fam,
        api=api,
        sampling=frozenset(sampling),
        limit_field=limit_field,
        reasoning=reasoning,
        reasoning_form=form,
        effort=effort if form in ("effort", "gemini", "openrouter", "qwen3") else None,
        thinking_budget=sent_budget,
        max_output_tokens=pick(
            "max_output_tokens", cfg.max_output_tokens, entry.get("max_output_tokens"), _documented(fam, mid)
        ),
        context_window=pick(
            "context_window", getattr(cfg, "context_window", None), entry.get("max_input_tokens"), None
        ),
        vision=pick("vision", getattr(cfg, "vision", None), entry.get("supports_vision"), None),
        exclusive_sampling=fam == "anthropic" and bool(_CLAUDE_EXCLUSIVE.search(b)),
        thinks=thinks,
        headroom=headroom,
        efforts=effs.takes if effs is not None else (),
        default_effort=default if reasoning else None,
        conflicts=tuple(conflicts),
        temperature_caution=GEMINI_3_TEMPERATURE if fam == "gemini" and _GEMINI_3.search(b) else None,
        sources=src,
    )


def problems(p: Profile, name: str, model_id: str = "") -> list[str]:
    """Requests this profile would make that the provider refuses: said before anything is sent."""
    out = [f"model {name!r}: {c}" for c in p.conflicts]
    if p.family == "anthropic" and p.thinks and p.thinking_budget is not None:
        if p.thinking_budget < MIN_THINKING:
            out.append(
                f"model {name!r}: thinking_budget = {p.thinking_budget} is below Anthropic's minimum of "
                f"{MIN_THINKING} tokens"
            )
        if p.max_output_tokens is not None and p.thinking_budget >= p.max_output_tokens:
            out.append(
                f"model {name!r}: thinking_budget = {p.thinking_budget} must be below the model's "
                f"max_output_tokens ({p.max_output_tokens}), which also holds the answer"
            )
    return out


def _documented(family: str, model_id: str) -> int | None:
    """Anthropic's documented max output for Claude models the litellm map no longer lists."""
    if family != "anthropic":
        return None
    from providers.anthropic import documented_max_output

    return documented_max_output(model_id)


_FAMILY_DOCS = {
    "openai": "platform.openai.com/docs/api-reference/chat/create",
    "openai-reasoning": "platform.openai.com/docs/guides/reasoning; openai-openapi ReasoningEffort",
    "anthropic": "docs.anthropic.com/en/api/messages",
    "gemini": "ai.google.dev/gemini-api/docs/openai; ai.google.dev/gemini-api/docs/thinking",
    "deepseek": "api-docs.deepseek.com/api/create-chat-completion",
    "xai": "docs.x.ai/docs/guides/reasoning",
    "other": "docs.vllm.ai OpenAI-compatible server",
}


def rule_docs(p: Profile, model_id: str) -> list[str]:
    """The provider documents a profile's request follows (for `evalsweep models` and the line-up table)."""
    b = _bare(model_id)
    out = [_FAMILY_DOCS.get(p.family, "")]
    if p.reasoning_form == "openrouter":
        out = ["openrouter.ai/docs/use-cases/reasoning-tokens"]
    if p.api == "responses":
        out.append("platform.openai.com/docs/api-reference/responses (Responses only: litellm map)")
    if _GPT5_CHAT.search(b):
        out.append("not a reasoning model (inspect_ai openai.py; openai-openapi max_completion_tokens)")
    if p.family == "openai-reasoning" and p.default_effort == "none":
        out.append("default effort none (openai-openapi ReasoningEffort)")
    if _GPT5_PRO_ID.search(b):
        out.append("effort high only (openai-openapi ReasoningEffort)")
    if p.family == "anthropic" and p.thinks:
        out.append("docs.anthropic.com/en/docs/build-with-claude/extended-thinking")
    if p.exclusive_sampling:
        out.append("temperature xor top_p (docs.anthropic.com migrating-to-claude-4; Opus 4.1: open-webui/pipelines#546)")
    if p.family == "gemini" and p.reasoning:
        out.append(f"{'thinks by default' if p.default_effort != 'none' else 'no thinking by default'}"
                   f"{'; levels ' + '/'.join(p.efforts) if p.efforts else ''}")
    if p.temperature_caution:
        out.append("ai.google.dev/gemini-api/docs/gemini-3 (temperature 1.0 advised)")
    if p.family == "deepseek" and p.reasoning:
        out.append("api-docs.deepseek.com/guides/reasoning_model")
    if p.family == "xai":
        out.append("docs.x.ai consumption: reasoning tokens billed as output")
    if p.reasoning_form == "qwen3" or _QWEN3.search(b):
        out.append("huggingface.co/Qwen (enable_thinking; Instruct-2507 does not think)")
    return [d for d in out if d]
