"""What a run departs from in its paper's protocol: the suite's own departures for the run's options, and
each model's (a request shaped away from the suite's, an alias that is not the paper's judge, an unknown
Anthropic max output sent as the fallback, a request changed by what the provider refused: runner.calls.learned). One place, so that the dry run says word for word what the
run says before its first call and records in manifest.json."""

from __future__ import annotations

import logging
from typing import Any

from providers.anthropic import FALLBACK_MAX_TOKENS
from providers.shape import cells, departures
from runner.calls import learned
from runner.pool import ModelEntry
from suites.base import RunSpec

log = logging.getLogger("evalsweep")


def judges_of(spec: RunSpec) -> list[str]:
    j = spec.options.get("judge")
    return [j] if j else []


def protocol_deviations(
    suite: Any, spec: RunSpec, models: dict[str, ModelEntry], names: list[str]
) -> tuple[list[str], list[str]]:
    """(the suite's departures for `spec`, the per-model ones) for the models `names` and the run's judge."""
    suite_devs = suite.deviations(spec) if suite.deviations else []
    per_model = [
        d for n in dict.fromkeys(names + judges_of(spec)) if n in models
        for d in (*departures(n, learned.profile_shape(models[n])), *learned.deviations(n, models[n]))
    ]
    judge = spec.options.get("judge")
    if suite.paper_judge and judge in models and suite.paper_judge[0](judge):
        mid = models[judge].model_id
        if not suite.paper_judge[0](mid):
            per_model.append(f"judge {judge} is the model {mid} (the paper's judge: {suite.paper_judge[1]})")
    if suite.open_max_tokens:
        per_model += [
            f"{n}: max_tokens {FALLBACK_MAX_TOKENS:,} (its maximum output is unknown: set max_output_tokens in "
            f"the config; the paper's code: {suite.open_max_tokens:,})"
            for n in dict.fromkeys(names) if n in models and models[n].provider_kind == "anthropic"
            and models[n].profile is not None and models[n].profile.max_output_tokens is None
        ]  # fmt: skip
    for c in cautions(suite, spec, models, names):  # the paper's request, against its provider's advice
        log.warning("[%s] warning: %s", suite.run_name(spec), c)
    return suite_devs, per_model


def request_shaping(
    suite: Any, spec: RunSpec, models: dict[str, ModelEntry], names: list[str]
) -> dict[str, dict[str, str]]:
    """Per model whose request departs from the suite's: field → how it is sent (providers.shape.cells,
    what a refusal taught it, an unknown maximum output's fallback). The table form of the per-model
    deviations: manifest.json and scores.json `request_shaping`, the report's table, deviations.txt."""
    out: dict[str, dict[str, str]] = {}
    for n in dict.fromkeys(names + judges_of(spec)):
        if n not in models:
            continue
        m = models[n]
        row = cells(learned.profile_shape(m))
        said = [str(c["said"]) for mem in (m.learned_by.values() if m.learned_by else [m.learned] if m.learned else [])
                for c in mem.changes]
        if said:
            row["learned"] = "; ".join(said)
        if (suite.open_max_tokens and m.provider_kind == "anthropic" and m.profile is not None
                and m.profile.max_output_tokens is None):
            row["max_tokens"] = f"{FALLBACK_MAX_TOKENS:,} (maximum unknown)"
        if row:
            out[n] = row
    return out


def cautions(suite: Any, spec: RunSpec, models: dict[str, ModelEntry], names: list[str]) -> list[str]:
    """Where the protocol asks for what a model's provider warns against (Gemini 3 below temperature 1):
    the request stays the paper's (not a deviation), and the run says so before it starts."""
    warned = [n for n in dict.fromkeys(names) if n in models and models[n].profile is not None
              and models[n].profile.temperature_caution]  # fmt: skip
    if not warned:
        return []
    t = spec.temperature
    if t is None:  # the suite's own default: read off its first request
        try:
            first = next(iter(suite.build(spec)), None)
        except Exception:  # noqa: BLE001 - data not loadable here: the run itself will say why
            first = None
        t = first.decoding.temperature if first is not None else None
    if t is None or t >= 1.0:
        return []
    return [f"{n}: the protocol asks temperature {t:g}; {models[n].profile.temperature_caution}" for n in warned]


def said(run_name: str, deviation: str) -> str:
    """The line a run says before its first call (stderr) and the dry run prints, for one deviation."""
    return f"[{run_name}] deviation from the paper's protocol: {deviation}"


def record_learned(man: dict[str, Any], suite: Any, spec: RunSpec, models: dict[str, ModelEntry],
                   names: list[str]) -> list[str]:
    """After the calls: the per-model deviations as the run ended (requests changed by a refusal during
    the run among them) added to those the manifest recorded before the first call, which scoring reads
    into scores.json and the report; manifest `learned` says what each model learned and what it cost.
    Returns the deviations that are new."""
    _, now = protocol_deviations(suite, spec, models, names)
    had = man.get("model_deviations") or []
    new = [d for d in now if d not in had]
    man["request_shaping"] = request_shaping(suite, spec, models, names)
    summary = learned.summary(models, names)
    if summary:
        man["learned"] = summary
    if new:
        man["model_deviations"] = [*had, *new]
        proto = man.setdefault("protocol", {"protocol": "paper", "deviations": []})
        proto["deviations"] = [*proto.get("deviations", []), *new]
        proto["protocol"] = "custom"
    return new
