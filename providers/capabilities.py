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

from providers.pricing import map_entry

EFFORTS = ("minimal", "low", "medium", "high")
REASONING_BUDGET = {"minimal": 1024, "low": 4096, "medium": 16384, "high": 32768}
"""Tokens a reasoning model may think, by effort, added to a suite's answer budget in the request's
limit (OpenAI counts reasoning in `max_completion_tokens`; Claude's `max_tokens` must exceed its
`budget_tokens`; Gemini and DeepSeek count thoughts in their output limit)."""
DEFAULT_EFFORT = "medium"  # OpenAI's default when reasoning_effort is not sent
MIN_THINKING = 1024  # Anthropic: budget_tokens >= 1024 (extended-thinking docs)
SAMPLING = frozenset({"temperature", "top_p", "seed", "n"})

# Family rules, for model ids litellm's map does not know (the map wins where it has the field).
# OpenAI reasoning models (https://platform.openai.com/docs/guides/reasoning): `max_completion_tokens`
# (max_tokens is refused), no temperature/top_p other than the default, `reasoning_effort`.
_OPENAI_REASONING = re.compile(r"^(o1|o3|o4)(-|$)|^gpt-5(?!-chat)")
_CODEX = re.compile(r"codex")  # served on /v1/responses only (litellm map: supported_endpoints)
# Claude (https://docs.anthropic.com/en/docs/build-with-claude/extended-thinking): thinking on
# Claude 3.7 and 4+; with thinking, no temperature/top_k, budget_tokens >= 1024 and < max_tokens.
_CLAUDE_THINKS = re.compile(r"claude-(3-7|(opus|sonnet|haiku)-[4-9]|[4-9])")
# Claude 4.5+ (https://docs.anthropic.com/en/docs/about-claude/models/migrating-to-claude-4): only
# one of temperature and top_p.
_CLAUDE_45 = re.compile(r"claude-(opus|sonnet|haiku)-(4-[5-9]|4\.[5-9]|[5-9])")
# Gemini 2.5+ think by default (https://ai.google.dev/gemini-api/docs/thinking); its OpenAI-compatible
# endpoint takes `reasoning_effort` or a `thinking_budget` (https://ai.google.dev/gemini-api/docs/openai).
_GEMINI_THINKS = re.compile(r"gemini-(2\.5|[3-9])")
# DeepSeek reasoner (https://api-docs.deepseek.com/guides/reasoning_model): temperature/top_p have no
# effect; max_tokens counts the chain of thought; no budget control.
_DEEPSEEK_REASONER = re.compile(r"deepseek-(reasoner|r1)")
_XAI_REASONING = re.compile(r"grok-(3-mini|4)")


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
    reasoning_form: str | None
    """effort (reasoning_effort), thinking (Anthropic budget_tokens), gemini, or None (no control)."""
    effort: str | None
    """The effort asked for (config), or the default for a model that reasons and takes one."""
    thinking_budget: int | None
    """Tokens of thinking asked for (config), else REASONING_BUDGET[effort] for a reasoning model."""
    max_output_tokens: int | None
    context_window: int | None
    vision: bool | None
    exclusive_sampling: bool = False
    """temperature and top_p never both (Claude 4.5+)."""
    sources: dict[str, str] = field(default_factory=dict)

    @property
    def thinks(self) -> bool:
        """Reasoning is on for this model's requests (for Claude only when the config asks for it)."""
        if self.family == "anthropic":
            return self.thinking_budget is not None and self.reasoning
        return self.reasoning

    @property
    def reasoning_budget(self) -> int:
        """Tokens added to a suite's answer budget in the request's limit."""
        return (self.thinking_budget or 0) if self.thinks else 0


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


def resolve(cfg: Any, kind: str) -> Profile:
    """The profile of a configured model (runner.config.ModelCfg) on an endpoint of `kind`."""
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

    rule_reasoning = {
        "openai-reasoning": True,
        "anthropic": bool(_CLAUDE_THINKS.search(b)),
        "gemini": bool(_GEMINI_THINKS.search(b)),
        "deepseek": bool(_DEEPSEEK_REASONER.search(b)),
        "xai": bool(_XAI_REASONING.search(b)),
    }.get(fam)
    reasoning = bool(pick("reasoning", cfg.reasoning, entry.get("supports_reasoning"), rule_reasoning, False))
    if fam == "openai" and reasoning:  # gpt-5-chat-latest and kin: the map says it reasons
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
    form = {"openai-reasoning": "effort", "anthropic": "thinking", "gemini": "gemini", "xai": "effort"}.get(
        fam
    )
    if not reasoning or (fam == "xai" and "grok-4" in b):  # grok-4 reasons but takes no effort
        form = None
    effort = cfg.reasoning_effort
    budget = cfg.thinking_budget
    if fam == "xai" and form == "effort":  # grok-3-mini: reasoning_effort "low" (its default) or "high"
        # only (https://docs.x.ai/docs/guides/reasoning): the nearest of the two, never a refused "medium"
        effort = {"minimal": "low", "medium": "high"}.get(effort or "low", effort or "low")
    if form is not None and fam != "anthropic":
        effort = effort or (DEFAULT_EFFORT if budget is None else None)
    if reasoning and budget is None and (effort or (fam != "anthropic" and form is None)):
        budget = REASONING_BUDGET[effort or DEFAULT_EFFORT]
    sampling = SAMPLING
    if fam == "openai-reasoning" or (fam == "deepseek" and reasoning):
        sampling = SAMPLING - {"temperature", "top_p"}
    if fam == "anthropic":
        sampling = SAMPLING - {"n", "seed"}
        if reasoning and budget is not None:
            sampling = sampling - {"temperature"}
    limit_field = "max_completion_tokens" if fam == "openai-reasoning" else "max_tokens"
    src["limit_field"] = src["sampling"] = "family rule"
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
        effort=effort if form in ("effort", "gemini") else None,
        thinking_budget=budget,
        max_output_tokens=pick(
            "max_output_tokens", cfg.max_output_tokens, entry.get("max_output_tokens"), _documented(fam, mid)
        ),
        context_window=pick(
            "context_window", getattr(cfg, "context_window", None), entry.get("max_input_tokens"), None
        ),
        vision=pick("vision", getattr(cfg, "vision", None), entry.get("supports_vision"), None),
        exclusive_sampling=fam == "anthropic" and bool(_CLAUDE_45.search(b)),
        sources=src,
    )


def problems(p: Profile, name: str, model_id: str = "") -> list[str]:
    """Requests this profile would make that the provider refuses: said before anything is sent."""
    out = []
    if p.family == "openai-reasoning" and p.effort == "minimal" and "gpt-5" not in _bare(model_id):
        # "minimal" came with gpt-5; o1/o3/o4 take low|medium|high (platform.openai.com/docs/guides/reasoning)
        out.append(f"model {name!r}: reasoning_effort = 'minimal' is taken by gpt-5 models only; "
                   f"{_bare(model_id) or 'this model'} takes low, medium or high")
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
