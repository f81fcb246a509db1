"""Wiring: config → providers (one per endpoint) → lanes (one per endpoint and key) → models.

Keys are read from the environment here, once, and live only inside lanes; a missing variable is a
clear error before anything is sent.
"""

from __future__ import annotations

import logging
import os
from dataclasses import dataclass, field
from datetime import UTC, datetime
from typing import Any
from urllib.parse import urlsplit

from core.secrets import bad_key_chars
from core.types import Request, text_of
from providers.capabilities import Profile, problems, resolve
from providers.pricing import Prices, resolve_prices
from providers.shape import Shape, key_params, shape_for
from runner.calls.estimates import Spend
from runner.config import Config, ConfigError, Endpoint, ModelCfg
from runner.lanes import Lane

log = logging.getLogger("evalsweep")


@dataclass
class ModelEntry:
    cfg: ModelCfg
    provider_kind: str
    lanes: list[Lane]
    price_in: float | None
    price_out: float | None
    provider_cacheable: bool = True
    supports_n: bool = True
    batch: bool = False
    """Send this model's calls as provider batches (decided per run by runner.batch.plan)."""
    spend: Any = None
    """runner.calls.spend.Spend when a ceiling (--max-cost, the model's max_cost) holds its calls."""
    prices: Prices = field(default_factory=Prices)
    """All of its prices (cache reads and writes too) and their source, resolved once."""
    profile: Profile | None = None
    """What the model accepts (providers.capabilities), resolved once; None for sim and replay."""
    shape: Shape | None = None
    """Its request rules, applied to every body; None when it is sent as it always was."""
    key_params: dict[str, Any] = field(default_factory=dict)
    context_window: int | None = None
    """Prompt + answer budget above this is an error row before any call (profile.context_window)."""
    """`cfg.params` plus the shape, for cache keys (the request on the wire depends on both)."""
    learned: Any = None
    """runner.calls.learned.Learned: what the provider's refusals taught (this run and earlier ones)."""
    learned_by: dict[str, Any] = field(default_factory=dict)
    """A model pooled over several endpoints: each endpoint's own Learned (their rules may differ)."""
    usage: Spend = field(default_factory=Spend)
    """What its calls really use (output tokens, latency) per pass: TPM charges and queue order
    (runner.calls.estimates)."""
    _est: dict[int, int] = field(default_factory=dict)

    @property
    def model_id(self) -> str:
        return self.cfg.model_id

    @property
    def cache_id(self) -> str:
        """Who answers, for the cache: the model id, and the server where it is not a provider's public
        API (`model@host/path`): two servers serving one model id never share answers, the keys of one
        endpoint, or the endpoints a model is pooled over, do; a public API's key is the bare id, as before."""
        cid = self.__dict__.get("_cache_id")
        if cid is None:
            servers = sorted({s for ln in self.lanes if (s := server_of(ln.endpoint)) is not None})
            cid = self.cfg.model_id if not servers else f"{self.cfg.model_id}@{'+'.join(servers)}"
            self.__dict__["_cache_id"] = cid
        return cid

    def cost(
        self, input_tokens: int | None, output_tokens: int | None, cached: int | None = None, writes: int | None = None
    ) -> float | None:
        return self.prices.cost(input_tokens, output_tokens, cached, writes)

    def estimate_tokens(self, req: Request) -> int:
        return estimate_tokens(req)


PUBLIC_HOSTS = frozenset({
    "api.openai.com", "api.anthropic.com", "generativelanguage.googleapis.com", "api.x.ai", "api.deepseek.com",
    "api.mistral.ai", "api.groq.com", "openrouter.ai", "api.together.xyz", "api.fireworks.ai",
    "api.cohere.com", "api.cohere.ai", "api.perplexity.ai", "api.cerebras.ai", "api.moonshot.ai",
})
"""Providers' own APIs: one model id there is one model, whatever key calls it (the cache keys of answers
made there stay the bare model id, as before)."""


def server_of(ep: Any) -> str | None:
    """The server an endpoint's answers come from, for the cache key; None for a provider's public API
    (or no base URL: the provider's default), the simulated and the replayed models."""
    if ep.kind in ("sim", "replay") or not ep.base_url:
        return None
    from urllib.parse import urlsplit

    u = urlsplit(ep.base_url.strip())
    host = (u.hostname or "").lower()
    if host in PUBLIC_HOSTS:
        return None
    port = f":{u.port}" if u.port else ""
    return f"{host}{port}{u.path.rstrip('/')}"


def _make_provider(ep: Endpoint, n_keys: int, model: ModelCfg | None = None) -> Any:
    if ep.kind == "openai":
        from providers.openai import OpenAIProvider

        if not ep.base_url:
            raise ConfigError(
                f"endpoint {ep.name!r}: kind 'openai' needs base_url (e.g. https://api.openai.com/v1)"
            )
        p = OpenAIProvider(
            ep.base_url,
            timeout_s=ep.timeout_s,
            headers=ep.headers,
            max_connections=ep.max_concurrency * n_keys,
            stream_above_tokens=ep.stream_above_tokens,
            idle_timeout_s=ep.idle_timeout_s,
            supports_n=True if ep.supports_n is None else ep.supports_n,
            prompt_caching=ep.prompt_caching,
            prompt_cache_key=urlsplit(ep.base_url).hostname == "api.openai.com",
        )
        p.deadline_s = ep.stream_deadline_s
        return p
    if ep.kind == "anthropic":
        from providers.anthropic import AnthropicProvider

        p = AnthropicProvider(
            ep.base_url,
            timeout_s=ep.timeout_s,
            headers=ep.headers,
            max_connections=ep.max_concurrency * n_keys,
            stream_above_tokens=ep.stream_above_tokens,
            idle_timeout_s=ep.idle_timeout_s,
            prompt_caching=ep.prompt_caching,
        )
        p.deadline_s = ep.stream_deadline_s
        return p
    if ep.kind == "litellm":
        from providers.litellm import LiteLLMProvider

        return LiteLLMProvider(
            ep.base_url, timeout_s=ep.timeout_s, supports_n=bool(ep.supports_n), prompt_caching=ep.prompt_caching
        )
    if ep.kind == "sim":
        from providers.sim import SimProvider

        return SimProvider(ep.latency_ms)
    if ep.kind == "replay":
        from providers.replay import ReplayProvider

        assert model is not None and model.path
        return ReplayProvider(model.path)
    raise ConfigError(f"endpoint {ep.name!r}: unknown kind {ep.kind!r}")


def build_models(cfg: Config, names: list[str]) -> dict[str, ModelEntry]:
    """Resolve every model (and judge) a sweep uses; lanes are shared between models of one endpoint."""
    lanes_by_endpoint: dict[str, list[Lane]] = {}

    def lanes_for(ep: Endpoint, model: ModelCfg | None = None) -> list[Lane]:
        key = ep.name if ep.kind != "replay" else f"replay:{model.name if model else ''}"
        if key not in lanes_by_endpoint:
            envs = ep.key_envs
            provider = _make_provider(ep, len(envs), model)
            lanes = []
            for env in envs:
                secret = None
                if env is not None:
                    secret = os.environ.get(env)
                    if not secret:
                        raise ConfigError(
                            f"endpoint {ep.name!r}: environment variable {env} is not set "
                            f"(export {env}=... before running)"
                        )
                    bad = bad_key_chars(secret)
                    if bad:
                        raise ConfigError(
                            f"endpoint {ep.name!r}: the key in environment variable {env} contains {bad}, "
                            "which no HTTP header can carry (a stray paste?); fix the variable"
                        )
                lanes.append(Lane(ep, env, secret, provider))
            lanes_by_endpoint[key] = lanes
        return lanes_by_endpoint[key]

    out: dict[str, ModelEntry] = {}
    for name in dict.fromkeys(names):
        m = cfg.resolve(name)
        kind = cfg.provider_of(m)
        if kind == "replay":
            ep = Endpoint(name=f"replay:{m.name}", kind="replay", max_concurrency=256, max_attempts=1)
            lanes = lanes_for(ep, m)
        elif not m.endpoint_names:
            ep = Endpoint(name=f"{kind}:{m.name}", kind=kind, max_concurrency=16)
            lanes = lanes_for(ep, m)
        else:
            lanes = [ln for e in m.endpoint_names for ln in lanes_for(cfg.endpoint(e), m)]
        if kind in ("replay", "sim"):
            prices = Prices(m.price_in, m.price_out, m.price_cache_read, m.price_cache_write, "config")
        else:
            prices = resolve_prices(m, datetime.now(UTC))
        if m.max_output_tokens is not None:
            from providers.anthropic import configure_max_output

            configure_max_output(m.model_id, m.max_output_tokens)
        provider = lanes[0].provider
        profile = shape = None
        if kind in ("openai", "anthropic", "litellm"):
            profile = resolve(m, kind, lanes[0].endpoint.base_url)
            bad = problems(profile, m.name, m.model_id)
            if bad:
                raise ConfigError("; ".join(bad))
            shape = shape_for(profile)
            shape = None if shape.trivial else shape
        out[name] = ModelEntry(
            cfg=m,
            provider_kind=kind,
            lanes=lanes,
            price_in=prices.price_in,
            price_out=prices.price_out,
            prices=prices,
            provider_cacheable=provider.cacheable,
            supports_n=provider.supports_n and (profile is None or "n" in profile.sampling),
            profile=profile,
            shape=shape,
            key_params=key_params(m.params, shape),
            context_window=profile.context_window if profile is not None else None,
        )
    return out


async def close_models(models: dict[str, ModelEntry]) -> None:
    seen: set[int] = set()
    for m in models.values():
        for lane in m.lanes:
            if id(lane.provider) not in seen:
                seen.add(id(lane.provider))
                await lane.provider.close()


def lane_report(models: dict[str, ModelEntry], names: list[str]) -> dict[str, list[dict[str, Any]]]:
    """Each model's lanes: limit, its source (config or provider) and use (manifest.json, live view)."""
    return {n: [ln.describe(whole_run=True) for ln in models[n].lanes] for n in names if n in models}


def pick_lane(m: ModelEntry) -> Lane | None:
    """The model's least busy lane that still has quota; None when every key is out of quota."""
    lanes = m.lanes
    lane = lanes[0] if len(lanes) == 1 else min(lanes, key=lambda ln: ln.load)
    return None if lane.stopped else lane


def note_ignored_n(m: ModelEntry, lane: Lane, got: int, n: int) -> None:
    """A server answered `n` samples with fewer choices (llama.cpp, Ollama): the scheduler sends the
    missing ones as separate calls, and from now on samples go one by one to this endpoint (unless
    its config insists on `supports_n = true`). Logged once per endpoint."""
    p, insist = lane.provider, lane.endpoint.supports_n
    if not getattr(p, "ignores_n", False):
        p.ignores_n = True
        log.warning(
            "endpoint %s returned %d choice(s) for n=%d: it ignores `n`; missing samples go as separate "
            "calls%s", lane.endpoint.name, got, n, "" if insist else " (set supports_n = false to skip this)",
        )
    if not insist:
        p.supports_n = m.supports_n = False


def estimate_tokens(req: Request) -> int:
    """Rough pre-call token count for TPM pacing: ~4 chars/token, ~765 per image, plus max_tokens."""
    chars = 0
    images = 0
    for msg in req.messages:
        chars += len(text_of(msg.content))
        if not isinstance(msg.content, str):
            images += sum(1 for p in msg.content if p.type == "image")
    return chars // 4 + 765 * images + (req.decoding.max_tokens or 256)
