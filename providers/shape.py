"""A request body as the model's profile says it must be: computed once per model (`Shape`), applied
to each body in a few dict operations (the hot path stays a dict build).

A suite's `max_tokens` (the paper's) stays the *answer* budget: a reasoning model's request limit is
that plus its reasoning budget, in the field its API reads, capped at the model's maximum output.
Sampling fields the model refuses are left out; the config's `params` are applied after, so a user can
always override.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any

from providers.capabilities import SAMPLING, Profile

ANSWER_FALLBACK = 4096
"""Answer tokens on top of Claude's thinking budget when neither the suite nor the model's known
maximum leaves room for one."""


@dataclass(frozen=True)
class Shape:
    family: str
    api: str
    drop: tuple[str, ...]
    limit_field: str
    extra: int
    """Reasoning tokens added to the answer budget."""
    cap: int | None
    fields: dict[str, Any] = field(default_factory=dict)
    """Body fields every request of the model carries (reasoning_effort, thinking, extra_body)."""
    exclusive: bool = False
    thinking: int | None = None
    """Anthropic budget_tokens when thinking is on."""

    @property
    def ident(self) -> dict[str, Any]:
        """What the cache key adds for a shaped model: the request on the wire depends on it."""
        return {
            "limit": self.limit_field,
            "extra": self.extra,
            "cap": self.cap,
            "fields": self.fields,
            "drop": list(self.drop),
            "api": self.api,
        }

    @property
    def trivial(self) -> bool:
        return (
            not self.drop
            and self.limit_field == "max_tokens"
            and not self.extra
            and not self.fields
            and not self.exclusive
            and self.api != "responses"
        )

    def limit(self, answer: int | None) -> int | None:
        if answer is None:
            return None
        n = answer + self.extra
        return min(n, self.cap) if self.cap else n

    def chat(self, body: dict[str, Any], answer: int | None) -> None:
        """An OpenAI-format body (fast path, litellm, batch lines), in place."""
        for f in self.drop:
            body.pop(f, None)
        if self.exclusive and "temperature" in body and "top_p" in body:
            del body["top_p"]
        body.pop("max_tokens", None)
        n = self.limit(answer)
        if self.thinking is not None:
            _thinking_top_p(body)
            if n is None:
                n = self.cap  # Anthropic (through litellm) needs a limit above the thinking budget
        if n is not None:
            body[self.limit_field] = n
        body.update(self.fields)

    def messages(self, body: dict[str, Any], answer: int | None) -> None:
        """An Anthropic Messages body, in place: thinking, and max_tokens = budget + answer."""
        for f in self.drop:
            body.pop(f, None)
        if self.exclusive and "temperature" in body and "top_p" in body:
            del body["top_p"]
        if self.thinking is not None:
            _thinking_top_p(body)
            body["thinking"] = {"type": "enabled", "budget_tokens": self.thinking}
            n = self.limit(answer)
            if n is None:  # the suite left the answer open: the model's maximum, if it holds an answer
                n = body["max_tokens"]
                if n <= self.thinking:
                    n = self.thinking + ANSWER_FALLBACK
            body["max_tokens"] = n


def _thinking_top_p(body: dict[str, Any]) -> None:
    """With extended thinking Anthropic takes top_p only in [0.95, 1]
    (https://docs.anthropic.com/en/docs/build-with-claude/extended-thinking): a lower one is not sent."""
    tp = body.get("top_p")
    if tp is not None and tp < 0.95:
        del body["top_p"]


def reasoning_fields(p: Profile) -> dict[str, Any]:
    """The body fields that carry the model's reasoning settings, in its provider's form."""
    e, budget = p.effort, p.thinking_budget
    if p.reasoning_form == "effort" and e:
        return {"reasoning": {"effort": e}} if p.api == "responses" else {"reasoning_effort": e}
    if p.reasoning_form == "gemini":
        if e:
            return {"reasoning_effort": e}
        if budget is not None:  # a token budget: Google's OpenAI-compatible extension (ai.google.dev/gemini-api/docs/openai)
            return {"extra_body": {"google": {"thinking_config": {"thinking_budget": budget}}}}
    if p.reasoning_form == "openrouter":  # openrouter.ai/docs/use-cases/reasoning-tokens
        if e:
            return {"reasoning": {"effort": e}}
        if budget is not None:
            return {"reasoning": {"max_tokens": budget}}
    if p.reasoning_form == "qwen3" and e == "none":  # the chat template's switch (vLLM, SGLang)
        return {"chat_template_kwargs": {"enable_thinking": False}}
    if p.reasoning_form == "thinking" and p.thinks and budget is not None:
        return {"thinking": {"type": "enabled", "budget_tokens": budget}}
    return {}


def shape_for(p: Profile) -> Shape:
    drop = tuple(sorted(SAMPLING - p.sampling - {"n"}))  # n: the scheduler never asks it of such models
    fields = reasoning_fields(p)
    thinking = p.thinking_budget if "thinking" in fields else None
    return Shape(
        family=p.family,
        api=p.api,
        drop=drop,
        limit_field=p.limit_field,
        extra=p.reasoning_budget,
        cap=p.max_output_tokens if p.reasoning_budget else None,
        fields=fields,
        exclusive=p.exclusive_sampling,
        thinking=thinking,
    )


def key_params(params: dict[str, Any], shape: Shape | None) -> dict[str, Any]:
    """The params that go into a model's cache keys: unchanged for a model sent as it always was."""
    if shape is None or shape.trivial:
        return params
    return {**params, "__shape__": shape.ident}


def departures(name: str, shape: Shape | None) -> list[str]:
    """How this model's requests differ from the suite's (the paper's), one sentence each: recorded
    as protocol deviations before the run and in scores.json."""
    if shape is None:
        return []
    out = []
    if "temperature" in shape.drop:
        out.append(f"{name}: temperature not sent (the model takes only its provider's default)")
    if shape.extra:
        cap = f", capped at {shape.cap:,}" if shape.cap else ""
        effort = _effort_of(shape.fields)
        how = "; ".join(
            x
            for x in (f"extended thinking, budget_tokens {shape.thinking:,}" if shape.thinking is not None else "",
                      effort)
            if x
        )
        out.append(
            f"{name}: reasons{f' ({how})' if how else ''}; its token limit is the suite's answer budget + "
            f"{shape.extra:,} reasoning tokens ({shape.limit_field}{cap})"
        )
    elif _effort_of(shape.fields):
        out.append(f"{name}: reasoning {_effort_of(shape.fields)} (no reasoning tokens added to its limit)")
    if shape.exclusive:
        out.append(f"{name}: top_p not sent with temperature (Claude 4.5+ and Opus 4.1 take one of them)")
    if shape.api == "responses":
        out.append(f"{name}: sent to the Responses API, one sample per call")
    return out


def _effort_of(fields: dict[str, Any]) -> str:
    """The reasoning setting a shaped body carries, in words (for the recorded departures)."""
    r = fields.get("reasoning")
    if isinstance(r, dict):
        return f"effort {r['effort']}" if "effort" in r else f"max_tokens {r.get('max_tokens'):,}"
    if "reasoning_effort" in fields:
        return str(fields["reasoning_effort"])
    if "chat_template_kwargs" in fields:
        return "enable_thinking false"
    return ""


def cells(shape: Shape | None) -> dict[str, str]:
    """This model's row of the request-shaping table (field → how it is sent), the same facts as
    `departures` says in sentences: one table for a sweep instead of a sentence per model and fact."""
    if shape is None:
        return {}
    out: dict[str, str] = {}
    if "temperature" in shape.drop:
        out["temperature"] = "not sent"
    if shape.exclusive:
        out["top_p"] = "not with temperature"
    if shape.extra:
        how = f"thinking {shape.thinking:,}" if shape.thinking is not None else _effort_of(shape.fields) or "on"
        out["reasoning"] = how
        cap = f" ≤ {shape.cap:,}" if shape.cap else ""
        out["token limit"] = f"{shape.limit_field}: answer + {shape.extra:,}{cap}"
    elif _effort_of(shape.fields):
        out["reasoning"] = _effort_of(shape.fields)
    if shape.api == "responses":
        out["API"] = "Responses, n=1"
    return out
