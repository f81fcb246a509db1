"""`evalsweep models`: what the config defines, each model as it will be called (its resolved profile:
API, token-limit field, reasoning and its budget, limits, prices) and, for named models, where each
field came from (config, litellm map, family rule, genai-prices...)."""

from __future__ import annotations

import argparse
from datetime import UTC, datetime
from typing import Any

from providers.capabilities import resolve, rule_docs
from providers.pricing import Prices, resolve_prices
from runner.config import Config, ConfigError


def _num(x: float | None) -> str:
    return "?" if x is None else f"{x:g}"


def _k(n: int | None) -> str:
    return "?" if n is None else f"{n // 1000}k" if n >= 1000 else str(n)


def _agg(eps: list[Any], f: str) -> str:
    return ", ".join("-" if getattr(e, f) is None else f"{getattr(e, f):g}" for e in eps) or "-"


def describe(cfg: Config, name: str) -> dict[str, Any]:
    """A model's profile and prices, each with its source; sim and replay models have neither."""
    m = cfg.resolve(name)
    kind = cfg.provider_of(m)
    out: dict[str, Any] = {"name": m.name, "provider": kind, "model id": m.model_id}
    if kind in ("openai", "anthropic", "litellm"):
        eps = [cfg.endpoint(e) for e in m.endpoint_names]
        p = resolve(m, kind, eps[0].base_url if eps else None)
        src = p.sources
        reasoning = "-"
        if p.thinks:
            reasoning = " ".join(x for x in (p.effort, f"+{p.reasoning_budget:,} tok") if x)
        out.update({
            "family": (p.family, src.get("family")),
            "api": (p.api, src.get("api")),
            "limit field": (p.limit_field, src.get("limit_field")),
            "sampling": (", ".join(sorted(p.sampling)) or "-", src.get("sampling")),
            "reasons": ("yes" if p.reasoning else "no", src.get("reasoning")),
            "reasoning sent": (reasoning, "config" if (m.reasoning_effort or m.thinking_budget) else "default"),
            "efforts taken": (", ".join(p.efforts) or "-", "providers.efforts" if p.efforts else "-"),
            "unless sent": ((p.default_effort or "dynamic") if p.reasoning else "-", "provider's default"),
            "max output": (_k(p.max_output_tokens), src.get("max_output_tokens")),
            "context": (_k(p.context_window), src.get("context_window")),
            "vision": ({True: "yes", False: "no"}.get(p.vision, "?"), src.get("vision")),
        })
        out["caution"] = p.temperature_caution and f"below temperature 1: {p.temperature_caution}"
        out["docs"] = "; ".join(rule_docs(p, m.model_id))
        prices = resolve_prices(m, datetime.now(UTC))
    else:
        prices = Prices(m.price_in, m.price_out, source="sim" if kind == "sim" else "config")
    out["prices"] = prices
    return out


def learned_of(cfg: Config, name: str) -> list[tuple[str, str]]:
    """What the providers' refusals taught about the model (runner.calls.learned), from the cache directory."""
    from pathlib import Path

    from cache.store import default_cache_dir
    from runner.calls.learned import for_config

    return for_config(cfg, name, Path(cfg.cache_dir) if cfg.cache_dir else default_cache_dir())


def _forget(cfg: Config, names: list[str]) -> int:
    from pathlib import Path

    from cache.store import default_cache_dir
    from runner.calls.learned import config_paths

    cache = Path(cfg.cache_dir) if cfg.cache_dir else default_cache_dir()
    for name in names:
        gone = [p for p in config_paths(cfg, name, cache) if p.exists()]
        for p in gone:
            p.unlink()
        print(f"{name}: forgot what it learned ({', '.join(map(str, gone))})" if gone else f"{name}: nothing learned")
    return 0


def cmd_models(argv: list[str], load_config: Any) -> int:
    from core.term import print_table
    from providers.sim import PROFILES
    from suites.base import Table

    p = argparse.ArgumentParser(
        prog="evalsweep models",
        description="The models the config defines, as they will be called; name models to see where "
        "each field of their profile came from.",
    )
    p.add_argument("names", nargs="*", help="models to show in full")
    p.add_argument("--forget", action="store_true", help="forget what the named models learned from "
                   "providers' refusals (their next run sends them as configured)")
    p.add_argument("--config", help="evalsweep.toml (default: $EVALSWEEP_CONFIG, else ./evalsweep.toml)")
    a = p.parse_args(argv)
    cfg = load_config(a.config)
    if a.forget:
        if not a.names:
            raise ConfigError("models --forget: name the models whose learned rules to forget")
        return _forget(cfg, a.names)
    if a.names:
        for name in a.names:
            d = describe(cfg, name)
            print(f"{d['name']}  ({d['provider']}: {d['model id']})")
            for k, v in d.items():
                if isinstance(v, tuple):
                    print(f"  {k:<15} {v[0]:<28} from {v[1]}")
            for said, where in learned_of(cfg, name):
                print(f"  {'learned':<15} {said:<28} {where}")
            pr: Prices = d["prices"]
            for k, v in (("$/M in", pr.price_in), ("$/M out", pr.price_out), ("$/M cache read", pr.cache_read),
                         ("$/M cache write", pr.cache_write)):
                print(f"  {k:<15} {_num(v):<28} from {pr.source if v is not None else '-'}")
            if d.get("docs"):
                print(f"  {'rules from':<15} {d['docs']}")
            if d.get("caution"):
                print(f"  {'caution':<15} {d['caution']}")
            if pr.other:  # two price sources more than 2x apart: both shown, the newer one used
                print(f"  {'other prices':<15} {pr.other}")
        return 0
    cols = ["name", "provider", "api", "limit", "reasoning", "ctx", "$/M in", "$/M out", "prices from",
            "endpoints", "rpm", "concurrency"]
    t = Table(title=f"models ({cfg.source or 'no config file'}; sim/* built in)", columns=cols, rows=[])
    t.key = ("provider", "$/M in", "$/M out")
    for name in [m.name for m in cfg.models] + list(PROFILES):
        d = describe(cfg, name)
        pr = d["prices"]
        m = cfg.resolve(name)
        eps = [cfg.endpoint(e) for e in m.endpoint_names]
        t.rows.append([
            d["name"], d["provider"], d.get("api", ("-",))[0],
            {"max_completion_tokens": "max_compl", "max_output_tokens": "max_output"}.get(
                d.get("limit field", ("-",))[0], d.get("limit field", ("-",))[0]),
            d.get("reasoning sent", ("-",))[0], d.get("context", ("-",))[0],
            _num(pr.price_in), _num(pr.price_out), pr.source.split(" (")[0],
            ", ".join(m.endpoint_names) or "-", _agg(eps, "rpm"), _agg(eps, "max_concurrency"),
        ])
    print_table(t, whole_labels=True)  # the names to type: whole
    print("evalsweep models NAME shows where each field of a model's profile came from.")
    return 0
