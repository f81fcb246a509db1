"""Pre-flight: every endpoint a run will call is reached once before the first paid call (and in the
dry run), so a dead server, a wrong port, a DNS typo, a TLS failure or a bad key is named at once —
host:port and the cause — instead of hours of retries ending in error rows.

OpenAI-compatible endpoints get `GET {base_url}/models` with each key (free, and it checks the key:
401/403 is a bad key); any other answer proves the server is there, but a 404 (a server without that
route, or a base_url that is wrong) is checked once more on the calls' own path, where a 404 too means
every call would be one. Endpoints without such a route (anthropic, litellm with a base_url) get a TCP connect to their
host. Simulated and replayed models are not checked; litellm without a base_url is the provider's own
host, left to the run.

Where `GET /models` answers with a list (OpenAI's `{"data": [{"id": ...}]}`), a configured model id it
does not list is a warning naming the nearest listed ids: a typo or a model not yet released costs
nothing to spot here. A listing that fails, is empty or is not that shape is skipped in silence (many
servers lack the route); the first call's gate (runner.calls.gate) still stops a model the provider refuses.
"""

from __future__ import annotations

import asyncio
import difflib
from typing import Any

import aiohttp

from core.secrets import redact_url
from core.urls import endpoint_url
from providers.http import connection_cause, host_port
from runner.pool import ModelEntry

TIMEOUT_S = 10.0
DEFAULT_PORTS = {"https": 443, "http": 80}


async def _get_models(session: aiohttp.ClientSession, lane: Any) -> tuple[str | None, set[str] | None]:
    """(the endpoint's problem or None, the model ids it lists or None)."""
    ep = lane.endpoint
    url = endpoint_url(ep.base_url, "/models")
    headers = dict(ep.headers)
    if lane.api_key:
        headers["Authorization"] = f"Bearer {lane.api_key}"
    where = f"endpoint {ep.name!r} ({host_port(url)})"
    try:
        async with session.get(url, headers=headers) as resp:
            if resp.status in (401, 403):
                key = f" (key from {lane.name.split('/', 1)[1]})" if "/" in lane.name else " (no key set)"
                return f"{where}: HTTP {resp.status}: the key was refused{key}", None
            if resp.status == 404:  # no /models route, or a base_url that is wrong: the calls' path says
                return await _path_missing(session, lane, headers, where), None
            return None, await _listed(resp)
    except TimeoutError:
        return f"{where}: no answer within {TIMEOUT_S:g} s", None
    except (aiohttp.ClientError, OSError) as e:
        return f"{where}: {connection_cause(e)}", None
    except ValueError as e:  # aiohttp refusing the URL or headers (after ClientError: TLS errors are both)
        return f"{where}: {redact_url(str(e), [ep.base_url])}", None


async def _listed(resp: aiohttp.ClientResponse) -> set[str] | None:
    """The ids of an OpenAI-shaped model list; None for anything else (no route, HTML, an empty list)."""
    if resp.status != 200:
        return None
    try:
        data = (await resp.json(content_type=None)).get("data")
    except (ValueError, AttributeError, aiohttp.ClientError):
        return None
    if not isinstance(data, list):
        return None
    ids = {d["id"] for d in data if isinstance(d, dict) and isinstance(d.get("id"), str)}
    return ids or None


def _is_listed(model_id: str, ids: set[str]) -> bool:
    """Listed as sent, or as Google's listing spells it (`models/ID`), or Ollama's (`ID:latest`)."""
    return model_id in ids or f"models/{model_id}" in ids or f"{model_id}:latest" in ids


def unlisted(models: dict[str, ModelEntry], listed: dict[Any, set[str]]) -> list[str]:
    """A warning per (model, endpoint) whose listing lacks the model's id, naming the nearest ids."""
    out = []
    for name, m in models.items():
        for ep in dict.fromkeys(ln.endpoint.name for ln in m.lanes if ln in listed):
            ids = set().union(*(listed[ln] for ln in m.lanes if ln in listed and ln.endpoint.name == ep))
            if _is_listed(m.model_id, ids):
                continue
            near = difflib.get_close_matches(m.model_id, sorted(ids), n=3, cutoff=0.5)
            hint = f"nearest listed: {', '.join(near)}" if near else f"it lists {len(ids)} other models"
            out.append(f"model {name!r}: endpoint {ep!r} does not list the id {m.model_id!r} ({hint})")
    return out


async def _path_missing(session: aiohttp.ClientSession, lane: Any, headers: dict[str, str], where: str) -> str | None:
    """After a 404 for /models: POST an empty body (no model: refused, never billed) to the path the
    calls will use. A 404 there too means every call would be a 404: the base_url is wrong."""
    path = "/chat/completions"
    async with session.post(endpoint_url(lane.endpoint.base_url, path), json={}, headers=headers) as resp:
        if resp.status != 404:
            return None
    return (f"{where}: HTTP 404 for {path} under base_url {redact_url(lane.endpoint.base_url)!r}: no such route; "
            "is base_url right? (OpenAI-compatible servers serve it under /v1)")


async def _connect(lane: Any) -> str | None:
    from yarl import URL

    ep = lane.endpoint
    u = URL(ep.base_url)
    host, port = u.host, u.port or DEFAULT_PORTS.get(u.scheme, 443)
    where = f"endpoint {ep.name!r} ({host}:{port})"
    try:
        _, w = await asyncio.wait_for(asyncio.open_connection(host, port), TIMEOUT_S)
    except TimeoutError:
        return f"{where}: no answer within {TIMEOUT_S:g} s"
    except OSError as e:
        return f"{where}: {connection_cause(e)}"
    w.close()
    return None


async def _no_listing(lane: Any) -> tuple[str | None, None]:
    return await _connect(lane), None


async def check(models: dict[str, ModelEntry]) -> tuple[list[str], list[str]]:
    """(one line per endpoint (or key) that cannot be used, naming it, its host:port and the cause;
    one warning per configured model id an endpoint's listing lacks)."""
    lanes = list(dict.fromkeys(ln for m in models.values() for ln in m.lanes))
    todo = [ln for ln in lanes if ln.endpoint.kind not in ("sim", "replay") and ln.endpoint.base_url]
    if not todo:
        return [], []
    timeout = aiohttp.ClientTimeout(total=TIMEOUT_S)
    async with aiohttp.ClientSession(timeout=timeout) as session:
        found = await asyncio.gather(
            *(_get_models(session, ln) if ln.endpoint.kind == "openai" else _no_listing(ln) for ln in todo)
        )
    scrub = {ln.api_key for ln in todo if ln.api_key}
    out = []
    for line in dict.fromkeys(f for f, _ in found if f):
        for s in scrub:
            line = line.replace(s, "[redacted]")
        out.append(line)
    listed = {ln: ids for ln, (_, ids) in zip(todo, found, strict=True) if ids is not None}
    return out, unlisted(models, listed)


def preflight(models: dict[str, ModelEntry], keep_going: bool) -> None:
    """Raise ConfigError (exit 2, nothing spent) when an endpoint cannot be reached, unless
    `keep_going`: then the problems are printed and the run goes on."""
    import sys

    from runner.config import ConfigError

    problems, warnings = asyncio.run(check(models))
    for w in warnings:
        print(f"evalsweep: warning: {w}; if the provider refuses it, its first call stops it", file=sys.stderr)
    if not problems:
        return
    if keep_going:
        for p in problems:
            print(f"evalsweep: warning: {p} (--keep-going: its calls will end in error rows)", file=sys.stderr)
        return
    raise ConfigError(
        "pre-flight: cannot use "
        + ("; ".join(problems) if len(problems) == 1 else "\n  " + "\n  ".join(problems))
        + "\nNothing was sent. Fix the endpoint (or its key), or pass --keep-going to run without it."
    )
