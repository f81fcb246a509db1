"""`evalsweep.toml`: endpoints (one lane per endpoint and key) and models, validated at the edge.

Errors name the file, the line and the field, and say how to fix it. Keys are never stored here: an
endpoint names the environment variable that holds its key.
"""

from __future__ import annotations

import os
import re
import tomllib
from pathlib import Path
from typing import Any, Literal

from pydantic import BaseModel, ConfigDict, Field, ValidationError, field_validator, model_validator

from core.errors import ConfigError
from core.secrets import header_secrets, redact_url  # noqa: F401  (re-exported)
from core.urls import userinfo

ProviderKind = Literal["openai", "anthropic", "litellm", "sim", "replay"]


class Endpoint(BaseModel):
    model_config = ConfigDict(extra="forbid")
    name: str
    kind: ProviderKind = "openai"
    base_url: str | None = None
    api_key_env: str | list[str] | None = None
    """Env var name(s) holding the key; each key is its own lane with its own limits."""
    rpm: float | None = Field(None, gt=0)
    tpm: float | None = Field(None, gt=0)
    max_concurrency: int = Field(64, ge=1)
    timeout_s: float = Field(600.0, gt=0)
    """A non-streamed call's total timeout; a streamed one's idle timeout unless `idle_timeout_s` says."""
    stream_above_tokens: int | None = Field(None, ge=0)
    """Calls whose maximum output is above this stream (default 21,333, the largest max_tokens Anthropic's
    SDK sends unstreamed; Anthropic calls the SDK would refuse unstreamed always stream)."""
    idle_timeout_s: float | None = Field(None, gt=0)
    """A streamed call is cut after this long without content (default: timeout_s); keep-alive comments
    do not count."""
    stream_deadline_s: float | None = Field(None, gt=0)
    """A streamed call's total deadline (default: its idle timeout plus its token limit at 10 tokens/s)."""
    max_attempts: int = Field(6, ge=1)
    retry_initial_s: float = Field(1.0, ge=0)
    retry_max_s: float = Field(60.0, ge=0)
    supports_n: bool | None = None
    """Whether the endpoint honours `n` (several samples in one call); default: yes for openai."""
    headers: dict[str, str] = Field(default_factory=dict)
    latency_ms: float | None = Field(None, ge=0)
    """sim only: median simulated latency."""
    batch: bool | None = None
    """true: always send as batches; false: never (a server without a batch API); unset: --batch decides,
    for an endpoint with a batch API (runner.batch.plan.has_batch_api)."""
    batch_api: bool | None = None
    """true: this endpoint implements its kind's batch API though its host is not api.openai.com /
    api.anthropic.com (Azure OpenAI, a proxy); unset: the host decides."""
    batch_discount: float = Field(0.5, ge=0, le=1)
    """Fraction of the live price saved on batch calls (OpenAI and Anthropic: 50%)."""
    batch_poll_s: float = Field(30.0, gt=0)
    batch_idle_s: float = Field(5.0, gt=0)
    """A model's queued requests go out as a batch after this long without a new one."""
    batch_max_requests: int | None = Field(None, ge=1)
    batch_max_bytes: int | None = Field(None, ge=1024)
    """Lower the provider's per-batch limits (OpenAI 50,000 / 200 MB; Anthropic 100,000 / 256 MB)."""
    prompt_caching: bool = True
    """Runner-side prompt caching: breakpoints on re-sent prefixes (Anthropic), `prompt_cache_key`
    (api.openai.com), and a shared prefix's first call before its siblings (runner.calls.fanout). false: none
    of it (the provider's own automatic caching still applies)."""
    hedge_after: float | None = Field(None, gt=1)
    """Opt-in: at a concurrency-bound lane's drain, re-send a call that has run this many times its kind's median
    (e.g. 3.0) and keep the first answer (runner.budgets.hedge); the cancelled one's estimated spend is billed on
    its row. Unset: never (the default)."""

    @field_validator("api_key_env")
    @classmethod
    def _env_names(cls, v: str | list[str] | None) -> str | list[str] | None:
        for name in [v] if isinstance(v, str) else v or []:
            if not re.fullmatch(r"[A-Za-z_][A-Za-z0-9_]*", name):
                raise ValueError(
                    "must be the NAME of an environment variable (e.g. OPENAI_API_KEY), not the key itself"
                )
        return v

    @field_validator("base_url")
    @classmethod
    def _url(cls, v: str | None) -> str | None:
        if v is not None and not re.fullmatch(r"https?://([^\s/@]+@)?[^\s/:@]+(:\d+)?(/\S*)?", v):
            raise ValueError(f"not an http(s) URL: {redact_url(v)!r} (e.g. https://api.openai.com/v1)")
        return v

    @model_validator(mode="after")
    def _batch_kind(self) -> Endpoint:
        for f in ("batch", "batch_api"):
            if getattr(self, f) and self.kind not in ("openai", "anthropic"):
                raise ValueError(f"{f} = true needs kind 'openai' or 'anthropic', not {self.kind!r}")
        if self.base_url and userinfo(self.base_url) and (self.api_key_env or any(
                k.lower() == "authorization" for k in self.headers)):
            raise ValueError(
                f"base_url {redact_url(self.base_url)!r} carries credentials (user:password@) and the endpoint "
                "sends a key too (api_key_env or an Authorization header): a request carries one or the other. "
                "Drop the user:password@ part (the key goes as a bearer token), or unset api_key_env"
            )
        if self.base_url and "?" in self.base_url and (self.batch or self.batch_api):
            raise ValueError("batch = true with a query string in base_url: batch APIs are called without it; "
                             "drop the query (or batch = false)")
        if self.retry_max_s < self.retry_initial_s:
            raise ValueError(
                f"retry_max_s ({self.retry_max_s:g}) is below retry_initial_s ({self.retry_initial_s:g})"
            )
        return self

    @property
    def key_envs(self) -> list[str | None]:
        if self.api_key_env is None:
            return [None]
        return [self.api_key_env] if isinstance(self.api_key_env, str) else list(self.api_key_env)


class ModelCfg(BaseModel):
    model_config = ConfigDict(extra="forbid")
    name: str
    endpoint: str | None = None
    endpoints: list[str] | None = None
    provider: ProviderKind | None = None
    model: str | None = None
    """The provider's model id (default: name). Also the cache identity, so one model served by
    several endpoints or keys shares its cache entries."""
    price_in: float | None = Field(None, ge=0)
    price_out: float | None = Field(None, ge=0)
    path: str | None = None
    params: dict[str, Any] = Field(default_factory=dict)
    """Extra request body fields (e.g. reasoning_effort); part of the cache key."""
    omit: list[str] = Field(default_factory=list)
    """Request fields this model refuses (e.g. ["temperature"] for o-series): never sent."""
    max_consecutive_failures: int = Field(10, ge=1)
    max_output_tokens: int | None = Field(None, ge=1)
    """Sent as max_tokens when a suite leaves it unset (native Anthropic; default: litellm's model map)."""
    reasoning_effort: Literal["none", "minimal", "low", "medium", "high", "xhigh"] | None = None
    """A reasoning model's effort, in its provider's form (providers.capabilities; OpenAI's enum,
    openai-openapi ReasoningEffort); sets its budget. Each model's accepted values: providers.efforts."""
    thinking_budget: int | None = Field(None, ge=1)
    """Tokens a reasoning model may think (Claude: budget_tokens, which turns thinking on)."""
    api: Literal["chat", "responses"] | None = None
    """OpenAI endpoint: chat completions or the Responses API (default: from litellm's map)."""
    context_window: int | None = Field(None, ge=1)
    vision: bool | None = None
    price_cache_read: float | None = Field(None, ge=0)
    """USD per million cached input tokens (OpenAI cached / Anthropic cache reads)."""
    price_cache_write: float | None = Field(None, ge=0)
    """USD per million cache-write input tokens (Anthropic cache_creation_input_tokens)."""
    max_cost: float | None = Field(None, gt=0)
    """USD this model's calls may be billed in the command's run directories (runner.calls.spend)."""
    open_weights: bool | None = None
    reasoning: bool | None = None
    release_date: str | None = None
    display_name: str | None = None

    @model_validator(mode="after")
    def _check(self) -> ModelCfg:
        if self.endpoint and self.endpoints:
            raise ValueError("give either `endpoint` or `endpoints`, not both")
        for k in self.omit:  # a None param removes the field from the body, and keys the cache apart
            self.params.setdefault(k, None)
        if self.provider == "replay" and not self.path:
            raise ValueError("a replay model needs `path` (a JSONL of {item, sample, pass, text})")
        return self

    @property
    def model_id(self) -> str:
        return self.model or self.name

    @property
    def endpoint_names(self) -> list[str]:
        return self.endpoints or ([self.endpoint] if self.endpoint else [])


class Shared(BaseModel):
    """`[shared]`: servers several processes (or hosts) share. Unset: the embedded single-process default."""

    model_config = ConfigDict(extra="forbid")
    redis_url: str | None = None
    """Lane budgets shared by every process using a key: redis://host:6379/0 or unix:///path/redis.sock."""
    cache_url: str | None = None
    """A shared response cache (and --join work leases) on Postgres: postgresql://user@host/db."""
    lease_s: float = Field(30.0, gt=0)
    """How long a dead process's concurrency slots and work units stay taken (renewed every lease_s/3)."""
    redis_wait_s: float = Field(30.0, ge=0)
    """How long a process started while Redis is unreachable waits for it (saying so) before it gives up:
    a Slurm array element or a pod started during a Redis blip waits, a wrong URL still fails."""

    @field_validator("redis_url")
    @classmethod
    def _redis(cls, v: str | None) -> str | None:
        if v and not re.match(r"(redis|rediss|unix)://", v):
            raise ValueError("must start with redis://, rediss:// or unix://")
        return v or None

    @field_validator("cache_url")
    @classmethod
    def _pg(cls, v: str | None) -> str | None:
        if v and not re.match(r"postgres(ql)?://", v):
            raise ValueError("must start with postgresql://")
        return v or None


class Config(BaseModel):
    model_config = ConfigDict(extra="forbid")
    endpoints: list[Endpoint] = Field(default_factory=list)
    models: list[ModelCfg] = Field(default_factory=list)
    cache_dir: str | None = None
    disk_full_wait_s: float = Field(600.0, ge=0)
    """A full disk stops the run; answers received and not yet written are held this long while space is
    freed (0: not held: they are paid again on resume, and the stop message counts them)."""
    shared: Shared = Field(default_factory=Shared)
    source: str | None = Field(None, exclude=True)

    @field_validator("cache_dir")
    @classmethod
    def _cache_dir(cls, v: str | None) -> str | None:
        for p in (Path(v), *Path(v).parents) if v else ():
            if p.exists():
                if not p.is_dir():
                    raise ValueError(f"{v}: {p} is a file, not a directory")
                break
        return v

    @model_validator(mode="after")
    def _refs(self) -> Config:
        names = [e.name for e in self.endpoints]
        dup = {n for n in names if names.count(n) > 1}
        if dup:
            raise ValueError(f"endpoint names must be unique: {sorted(dup)}")
        mnames = [m.name for m in self.models]
        dup = {n for n in mnames if mnames.count(n) > 1}
        if dup:
            raise ValueError(f"model names must be unique: {sorted(dup)}")
        eps = set(names)
        for i, m in enumerate(self.models):
            for e in m.endpoint_names:
                if e not in eps:
                    raise _Located(
                        ("models", i, "endpoint"), f"unknown endpoint {e!r}; defined: {sorted(eps)}"
                    )
            if m.provider not in ("replay", "sim", "litellm") and not m.endpoint_names:
                raise _Located(("models", i, "endpoint"), "needs `endpoint` (or `endpoints`, or `provider`)")
        return self

    def endpoint(self, name: str) -> Endpoint:
        for e in self.endpoints:
            if e.name == name:
                return e
        if name == "sim":
            return SIM_ENDPOINT
        raise KeyError(name)

    def resolve(self, name: str) -> ModelCfg:
        """A configured model, or a built-in `sim/<name>` one; a clear error otherwise. A configured
        sim model (`model = "sim/strong"`) gets that built-in's ability (and prices) unless it sets them."""
        for m in self.models:
            if m.name == name:
                if "ability" in m.params or self.provider_of(m) != "sim":
                    return m
                from providers.sim import sim_model

                base = sim_model(m.model_id)
                return m.model_copy(
                    update={
                        "params": {**base["params"], **m.params},
                        "price_in": base["price_in"] if m.price_in is None else m.price_in,
                        "price_out": base["price_out"] if m.price_out is None else m.price_out,
                    }
                )
        if name.startswith("sim/"):
            from providers.sim import sim_model

            return ModelCfg(**sim_model(name))
        known = ", ".join(m.name for m in self.models) or "none"
        where = self.source or "no config file"
        raise ConfigError(
            f"unknown model {name!r} ({where} defines: {known}); add a [[models]] entry, or use a "
            "built-in simulated model such as sim/strong"
        )

    def provider_of(self, m: ModelCfg) -> ProviderKind:
        if m.provider:
            return m.provider
        return self.endpoint(m.endpoint_names[0]).kind

    def snapshot(self, model_names: list[str]) -> dict[str, Any]:
        """What a run directory keeps: the config as used, secrets excluded by construction."""
        models = [self.resolve(n) for n in model_names]
        eps = {e for m in models for e in m.endpoint_names}
        return {
            "source": self.source,
            "endpoints": [_redacted(self.endpoint(e).model_dump(mode="json")) for e in sorted(eps)],
            "models": [m.model_dump(mode="json") | {"provider": self.provider_of(m)} for m in models],
        }


def _redacted(ep: dict[str, Any]) -> dict[str, Any]:
    """An endpoint as a run directory keeps it: a key inside its URL (userinfo, `?key=`, a path segment
    equal to the key its variables hold) or in a header value is never written."""
    envs = ep.get("api_key_env")
    keys = [os.environ.get(v) for v in ([envs] if isinstance(envs, str) else envs or [])]
    if ep.get("base_url"):
        ep["base_url"] = redact_url(ep["base_url"], keys)
    ep["headers"] = {k: "***" if header_secrets({k: v}) else redact_url(v, keys) for k, v in ep.get("headers", {}).items()}
    return ep


SIM_ENDPOINT = Endpoint(name="sim", kind="sim", max_concurrency=512, max_attempts=1)


class _Located(ValueError):
    def __init__(self, loc: tuple[Any, ...], msg: str) -> None:
        super().__init__(msg)
        self.loc = loc


def default_config_path() -> Path | None:
    p = os.environ.get("EVALSWEEP_CONFIG")
    if p:
        return Path(p)
    return Path("evalsweep.toml") if Path("evalsweep.toml").is_file() else None


def load_config(path: str | Path | None) -> Config:
    if path is None:
        path = default_config_path()
        if path is None:
            return Config()
    path = Path(path)
    try:
        raw = path.read_bytes()
    except FileNotFoundError:
        raise ConfigError(f"{path}: config file not found") from None
    except IsADirectoryError:
        raise ConfigError(f"{path}: is a directory, not a config file") from None
    except OSError as e:
        raise ConfigError(f"{path}: cannot read: {e.strerror}") from None
    try:
        text = raw.decode("utf-8")
    except UnicodeDecodeError as e:
        line = raw[: e.start].count(b"\n") + 1
        raise ConfigError(f"{path}:{line}: not valid UTF-8 (byte {e.start})") from None
    try:
        data = tomllib.loads(text)
    except tomllib.TOMLDecodeError as e:
        raise ConfigError(f"{path}: not valid TOML: {e}") from None
    try:
        cfg = Config.model_validate(data)
    except ValidationError as e:
        raise ConfigError(_explain(path, text, data, e)) from None
    except _Located as e:
        raise ConfigError(_where(path, text, e.loc, str(e))) from None
    cfg.source = str(path)
    return cfg


def shared_urls(cfg: Config) -> Shared:
    """[shared] with the environment's EVALSWEEP_REDIS_URL / EVALSWEEP_CACHE_URL taking precedence."""
    env = {
        "redis_url": os.environ.get("EVALSWEEP_REDIS_URL"),
        "cache_url": os.environ.get("EVALSWEEP_CACHE_URL"),
    }
    upd = {k: v for k, v in env.items() if v}
    if not upd:
        return cfg.shared
    try:
        return Shared.model_validate(cfg.shared.model_dump() | upd)
    except ValidationError as e:
        d = e.errors()[0]
        name = "EVALSWEEP_" + str(d["loc"][0]).upper()
        raise ConfigError(f"environment variable {name}: {d['msg'].removeprefix('Value error, ')}") from None


def _explain(path: Path, text: str, data: dict[str, Any], err: ValidationError) -> str:
    lines = []
    for d in err.errors():
        loc = tuple(x for x in d["loc"] if not (isinstance(x, str) and x.startswith("function-")))
        ctx = d.get("ctx", {}).get("error")
        if isinstance(ctx, _Located):
            loc, msg = ctx.loc, str(ctx)
        else:
            msg = d["msg"].removeprefix("Value error, ")
            if d["type"] == "extra_forbidden":
                msg = "unknown field (check the spelling; see the README's config reference)"
            elif d["type"] == "missing":
                msg = "required field is missing"
        lines.append(_where(path, text, loc, msg, data))
    return "\n".join(lines)


def _where(path: Path, text: str, loc: tuple[Any, ...], msg: str, data: dict[str, Any] | None = None) -> str:
    """`file:line: field: message`, finding the line of `[[table]]` number i and its key."""
    src = text.splitlines()
    line = None
    if len(loc) >= 2 and isinstance(loc[0], str) and isinstance(loc[1], int):
        heads = [i for i, s in enumerate(src) if re.match(rf"\s*\[\[\s*{re.escape(loc[0])}\s*\]\]", s)]
        if loc[1] < len(heads):
            start = heads[loc[1]]
            line = start + 1
            if len(loc) >= 3 and isinstance(loc[2], str):
                for j in range(start + 1, len(src)):
                    if re.match(r"\s*\[", src[j]):
                        break
                    if re.match(rf"\s*{re.escape(loc[2])}\s*=", src[j]):
                        line = j + 1
                        break
    elif loc and isinstance(loc[0], str):
        for i, s in enumerate(src):
            if re.match(rf"\s*{re.escape(loc[0])}\s*=", s):
                line = i + 1
                break
    field = _field_name(loc, data)
    return f"{path}:{line or '?'}: {field}: {msg}"


def _field_name(loc: tuple[Any, ...], data: dict[str, Any] | None) -> str:
    out = ""
    for x in loc:
        out += f"[{x}]" if isinstance(x, int) else (f".{x}" if out else str(x))
    if data and len(loc) >= 2 and isinstance(loc[1], int):
        try:
            name = data[loc[0]][loc[1]].get("name")
            if name:
                out += f" (name = {name!r})"
        except (KeyError, IndexError, AttributeError, TypeError):
            pass
    return out or "config"
