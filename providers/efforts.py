"""Which reasoning efforts a model takes and which one it uses when none is sent, per provider doc.

A wrong effort is refused on every call (gpt-5-pro takes only `high`, Gemini 3 Pro only `low`/`high`),
and a missing one can silently switch reasoning off (gpt-5.1 defaults to `none`), so these are rules
with a source each, resolved once per model by `providers.capabilities`.
"""

from __future__ import annotations

import re
from dataclasses import dataclass
from typing import Any

EFFORTS = ("none", "minimal", "low", "medium", "high", "xhigh")
"""OpenAI's ReasoningEffort enum, lowest first (openai-openapi `ReasoningEffort`; mirrored in the SDKs,
e.g. openai-ruby lib/openai/models/reasoning_effort.rb)."""
REASONING_BUDGET = {"none": 0, "minimal": 1024, "low": 4096, "medium": 16384, "high": 32768, "xhigh": 65536}
"""Tokens a reasoning model may think, by effort, added to a suite's answer budget in the request's
limit (OpenAI counts reasoning in `max_completion_tokens`; Claude's `max_tokens` must exceed its
`budget_tokens`; Gemini and DeepSeek count thoughts in their output limit)."""


@dataclass(frozen=True)
class Efforts:
    takes: tuple[str, ...]
    """The efforts the provider accepts for the model (EFFORTS order)."""
    default: str | None
    """What the model does when no effort is sent: an effort, "none" (no reasoning) or None (dynamic:
    the model decides, e.g. Gemini's dynamic thinking)."""
    doc: str


# OpenAI (openai-openapi `ReasoningEffort`, as generated into openai-ruby reasoning_effort.rb):
# "gpt-5.1 defaults to none ... supported values for gpt-5.1 are none, low, medium, and high";
# "All models before gpt-5.1 default to medium ... and do not support none"; "The gpt-5-pro model
# defaults to (and only supports) high"; "xhigh is supported for all models after gpt-5.1-codex-max".
# minimal came with gpt-5 (platform.openai.com/docs/guides/latest-model); gpt-5.1 refuses it
# ("Unsupported value: 'minimal' is not supported with the 'gpt-5.1' model", openai-agents-python#2089);
# the codex models take low|medium|high (platform.openai.com/docs/models/gpt-5-codex).
_OPENAI_DOC = "openai-openapi ReasoningEffort (platform.openai.com/docs/guides/reasoning)"
_GPT5_PRO = re.compile(r"^gpt-5(\.\d+)?-pro")
_GPT5_LATER = re.compile(r"^gpt-5\.(\d+)")
_CODEX_MAX = re.compile(r"codex-max")


def openai_efforts(bare: str, entry: dict[str, Any]) -> Efforts:
    """An OpenAI reasoning model's efforts: OpenAI's rules for the ids they name, litellm's map flags
    (`supports_none/minimal/xhigh_reasoning_effort`, `default_reasoning_effort`) for the others."""
    if _GPT5_PRO.search(bare):  # the map says minimal; OpenAI says high only
        return Efforts(("high",), "high", _OPENAI_DOC)
    later = _GPT5_LATER.search(bare)
    if "codex" in bare:
        takes = ["low", "medium", "high"] + (["xhigh"] if _CODEX_MAX.search(bare) else [])
        return Efforts(tuple(takes), "medium", _OPENAI_DOC)
    if later:  # gpt-5.1 and after: none (the default) .. high; xhigh after gpt-5.1-codex-max
        takes = {"none", "low", "medium", "high"} | ({"xhigh"} if int(later.group(1)) >= 2 else set())
        default = "none"
    elif bare.startswith("gpt-5"):
        takes, default = {"minimal", "low", "medium", "high"}, "medium"
    else:  # o1, o3, o4-mini, o3-pro: low|medium|high, default medium
        takes, default = {"low", "medium", "high"}, "medium"
    for e in ("none", "minimal", "xhigh"):
        flag = entry.get(f"supports_{e}_reasoning_effort")
        if flag is True:
            takes.add(e)
        elif flag is False:
            takes.discard(e)
    mapped = entry.get("default_reasoning_effort")
    if mapped in EFFORTS:
        default = mapped
    return Efforts(tuple(e for e in EFFORTS if e in takes), default, _OPENAI_DOC)


# Gemini (ai.google.dev/gemini-api/docs/thinking and /docs/openai): 2.5 Pro thinks dynamically and
# cannot switch it off; 2.5 Flash thinks dynamically, `none` switches it off; 2.5 Flash-Lite does not
# think unless asked. Gemini 3 Pro takes thinking levels low|high only, default high (dynamic), and
# cannot switch thinking off ("Thinking level MEDIUM is not supported for this model",
# discuss.ai.google.dev/t/112648, confirmed by Google); Gemini 3 Flash takes minimal|low|medium|high.
_GEMINI_DOC = "ai.google.dev/gemini-api/docs/thinking"


def gemini_efforts(bare: str) -> Efforts:
    if re.search(r"gemini-3-pro", bare):
        return Efforts(("low", "high"), None, _GEMINI_DOC + " (Gemini 3 Pro: low, high)")
    if re.search(r"gemini-([3-9])(\.\d+)?-pro", bare):
        return Efforts(("low", "medium", "high"), None, _GEMINI_DOC)
    if re.search(r"gemini-([3-9])", bare):
        return Efforts(("minimal", "low", "medium", "high"), None, _GEMINI_DOC)
    if "flash-lite" in bare:
        return Efforts(("none", "low", "medium", "high"), "none", _GEMINI_DOC + " (Flash-Lite: off by default)")
    if "flash" in bare:
        return Efforts(("none", "low", "medium", "high"), None, _GEMINI_DOC)
    return Efforts(("low", "medium", "high"), None, _GEMINI_DOC + " (2.5 Pro: cannot be switched off)")


# xAI (docs.x.ai/docs/guides/reasoning): grok-3-mini takes reasoning_effort low (its default) or high;
# grok-4 reasons but refuses the field.
XAI_MINI = Efforts(("low", "high"), "low", "docs.x.ai/docs/guides/reasoning")


def nearest(effort: str, takes: tuple[str, ...]) -> str:
    """The accepted effort closest to `effort` (ties: the higher one): never a refused value."""
    if effort in takes or not takes:
        return effort
    i = EFFORTS.index(effort)
    return min(takes, key=lambda e: (abs(EFFORTS.index(e) - i), -EFFORTS.index(e)))


def for_budget(budget: int, takes: tuple[str, ...]) -> str:
    """The lowest accepted effort whose budget covers `budget` tokens of thinking (else the highest):
    how a budget-only config reaches a model that takes efforts, not budgets."""
    usable = [e for e in takes if e != "none"] or list(takes)
    return next((e for e in usable if REASONING_BUDGET[e] >= budget), usable[-1])
