"""An OpenAI-compatible server of heavy-tailed reasoning models, with per-key RPM and TPM buckets.

For `bench/reasoning_sweep.py` (run in its own process: `python bench/reasoning_server.py SPEC.json`,
prints its port). SPEC: {"keys": {KEY: {"rpm", "tpm", "window_s"}}, "models": {MODEL: {"law",
"median", "shape", "tok_s", "answer", "n"}}, "scale", "seed", "chain"}; optional "chain": {"item": [START,
END], "follow": MARK} tags each request for the log only (answers are drawn alike): its item (a hash of
the prompt's text between the first START and the next END, "" without) and its pass ("follow" when
the prompt holds MARK, a follow-up such as a critique quoting the answer, else "answer").

Every choice of a model draws its latency from the model's law (deterministic: a hash of model,
prompt and choice index, the k-th answered call of a prompt taking index k, so calls of models
without `n` draw like the choices of an n call): `lognormal` (median, sigma = shape), `lomax`
(Pareto II, tail index = shape, scaled to the median) or `mixture` (85% lognormal quick answers, 15%
long thinkers at 6x the median). Its output is reasoning (`tok_s` tokens a second of latency) plus
`answer` tokens, reported as OpenAI does (`completion_tokens_details.reasoning_tokens`). An n call
takes the longest of its choices and the sum of their tokens; a model with `n: false` answers one.

Limits are token buckets per key (RPM and TPM, refilled continuously, holding `window_s` seconds of
the limit). TPM is charged as Anthropic documents its output-token limits: at admission the prompt
plus the request's max_tokens (per choice), settled to the real usage (reasoning included) when the
answer is done, so a key spent by long reasoning goes into debt. A request is admitted when both
buckets hold its admission charge (at most a full bucket), else HTTP 429 with the reset of the
exhausted one. Answers carry x-ratelimit-* headers stamped
at admission, as providers send them: by the time the answer arrives they are stale.
Optional "item_corr": rho (default 0, independent draws): an item's difficulty shared by every model (`draw`),
the item being the chain's tag, else the prompt.
GET /log returns every admitted request: [arrival, key, model, n, latency_s, tokens, pass, item, subject] (subject:
the item whose difficulty the draw shares, the tag's item or a hash of the prompt; a request whose client went
away before its answer: the seconds and tokens it ran, its thought cut there), 429 counts
(per key and budget) and each 429: [arrival, key, model, n, budget, reset_s, charge].
"""

from __future__ import annotations

import asyncio
import hashlib
import math
import sys
import time
from collections import Counter
from typing import Any

import orjson
from aiohttp import web

QUICK, SLOW = 0.85, 6.0  # mixture: share of quick answers; long thinkers' multiple of the median


def _unit(*parts: Any) -> float:
    h = hashlib.blake2b("\x1f".join(map(str, parts)).encode(), digest_size=8).digest()
    return (int.from_bytes(h, "big") + 0.5) / 2**64


def _normal(u: float, v: float) -> float:
    return math.sqrt(-2.0 * math.log(u)) * math.cos(2.0 * math.pi * v)


def _phi(z: float) -> float:
    return 0.5 * math.erfc(-z / math.sqrt(2.0))


def draw(
    m: dict[str, Any], model: str, prompt: str, i: int, scale: float = 1.0, seed: int = 0,
    item: str = "", rho: float = 0.0,
) -> tuple[float, int]:
    """(latency_s, output tokens) of choice `i` of `model` on `prompt` (another `seed`: other draws of
    the same laws). `rho` > 0: a hard item is hard for every model (a Gaussian copula): the call's normal
    is rho x its item's (`item`, else the prompt: a hash of it and `seed`) + sqrt(1 - rho^2) x its own, fed
    through each law as its own normal (lomax: its uniform; mixture: also the long-thinker pick, from a second normal of
    the item), so each
    model's law is unchanged and two models' log-latencies on an item correlate ~rho^2. 0: today's draws."""
    s = (seed,) if seed else ()
    u, v, w = (_unit(model, prompt, i, x, *s) for x in "uvw")
    med, shape = m["median"], m["shape"]
    z = _normal(u, v)
    if rho:
        d = _normal(_unit("item", item or prompt, "u", seed), _unit("item", item or prompt, "v", seed))
        own = math.sqrt(1.0 - rho * rho)
        z = rho * d + own * z
        u = _phi(-z)  # (lomax: a long latency is a small u)
        d2 = _normal(_unit("item", item or prompt, "w", seed), _unit("item", item or prompt, "x", seed))
        w = _phi(rho * d2 + own * _normal(w, _unit(model, prompt, i, "x", *s)))  # (its own item normal: a call's
        # pick and its lognormal stay independent, the mixture's law unchanged)
    if m["law"] == "lognormal":
        lat = med * math.exp(shape * z)
    elif m["law"] == "lomax":  # P(L > x) = (1 + x/lam)^-a, median at `med`
        lam = med / (2 ** (1 / shape) - 1)
        lat = lam * (u ** (-1 / shape) - 1)
    else:  # mixture
        base = med * (SLOW if w > QUICK else 1.0)
        lat = base * math.exp(shape * z)
    lat = min(max(lat, 0.05), 30 * med)
    tokens = int(lat * m["tok_s"]) + m["answer"]
    return lat * scale, tokens


class Bucket:
    """Refills at `per_min / 60` a second up to `window_s` seconds of it (starts full)."""

    def __init__(self, per_min: float, window_s: float) -> None:
        self.rate, self.cap = per_min / 60.0, per_min / 60.0 * window_s
        self.level, self.t = self.cap, time.monotonic()

    def fill(self, now: float) -> float:
        self.level = min(self.cap, self.level + (now - self.t) * self.rate)
        self.t = now
        return self.level

    def wait_for(self, need: float) -> float:
        return max(0.0, (min(need, self.cap) - self.level) / self.rate)


class Server:
    def __init__(self, spec: dict[str, Any]) -> None:
        self.models: dict[str, dict[str, Any]] = spec["models"]
        self.scale = float(spec.get("scale", 1.0))
        self.seed = int(spec.get("seed", 0))
        self.rho = float(spec.get("item_corr", 0.0))
        self.port = int(spec.get("port", 0))  # 0: any free one
        self.keys: dict[str, tuple[Bucket | None, Bucket | None, dict[str, Any]]] = {}
        for k, lim in spec["keys"].items():
            w = lim.get("window_s", 1.0)
            self.keys[k] = (
                Bucket(lim["rpm"], lim.get("rpm_window_s", 1.0)) if lim.get("rpm") else None,
                Bucket(lim["tpm"], w) if lim.get("tpm") else None,
                lim,
            )
        self.log: list[list[Any]] = []
        self.refused: Counter[str] = Counter()
        self.refusals: list[list[Any]] = []
        self.seen: Counter[tuple[str, str]] = Counter()
        self.chain: dict[str, Any] = spec.get("chain") or {}

    def tag(self, prompt: str) -> tuple[str, str]:
        """(pass, item) of a request, for the log: which answer->follow-up chain it belongs to."""
        if not self.chain:
            return "answer", ""
        start, end = self.chain["item"]
        i = prompt.find(start)
        j = prompt.find(end, i + len(start)) if i >= 0 else -1
        item = hashlib.blake2b(prompt[i + len(start) : j].encode(), digest_size=6).hexdigest() if j >= 0 else ""
        return ("follow" if self.chain["follow"] in prompt else "answer"), item

    async def handle(self, request: web.Request) -> web.Response:
        body = orjson.loads(await request.read())
        now = time.monotonic()
        key = request.headers.get("Authorization", "").removeprefix("Bearer ")
        model = body.get("model", "")
        m = self.models[model]
        prompt = "".join(
            x.get("content", "") for x in body.get("messages", []) if isinstance(x.get("content"), str)
        )
        n = int(body.get("n", 1)) if m.get("n", True) else 1
        first = self.seen[(model, prompt)]
        pass_, item = self.tag(prompt)
        subject = item or hashlib.blake2b(prompt.encode(), digest_size=6).hexdigest()
        draws = [draw(m, model, prompt, first + i, self.scale, self.seed, subject, self.rho) for i in range(n)]
        lat = max(d[0] for d in draws)
        out = sum(d[1] for d in draws)
        p_tok = len(prompt) // 4 + 1
        limit = body.get("max_completion_tokens") or body.get("max_tokens") or 4096
        charge = p_tok + limit * n  # what admission charges the TPM bucket (settled at the end)
        rb, tb, lim = self.keys[key]
        hdr: dict[str, str] = {}
        if rb is not None:
            rb.fill(now)
            hdr |= {
                "x-ratelimit-limit-requests": f"{lim['rpm']:g}",
                "x-ratelimit-remaining-requests": str(max(0, int(rb.level) - 1)),
            }
        if tb is not None:
            tb.fill(now)
            hdr |= {
                "x-ratelimit-limit-tokens": f"{lim['tpm']:g}",
                "x-ratelimit-remaining-tokens": str(max(0, int(tb.level - charge))),
            }
        short = [
            (what, b.wait_for(c))
            for what, b, c in (("requests", rb, 1), ("tokens", tb, charge))
            if b is not None and b.wait_for(c) > 0
        ]
        if short:
            what, wait = max(short, key=lambda x: x[1])
            self.refused[f"{key} {what}"] += 1
            self.refusals.append([now, key, model, n, what, round(wait, 4), charge])
            h = {
                f"x-ratelimit-remaining-{what}": "0",
                f"x-ratelimit-reset-{what}": f"{max(wait, 0.001) * 1000:.0f}ms",
            }
            err = {
                "error": {
                    "message": f"Rate limit reached for {what}",
                    "type": what,
                    "code": "rate_limit_exceeded",
                }
            }
            return web.json_response(err, status=429, headers={**hdr, **h})
        if rb is not None:
            rb.level -= 1
        if tb is not None:
            tb.level -= charge
            hdr["x-ratelimit-reset-tokens"] = f"{max(0.0, tb.cap - tb.level) / tb.rate * 1000:.0f}ms"
        self.seen[(model, prompt)] += n
        entry = [now, key, model, n, lat, p_tok + out, pass_, item, subject]
        self.log.append(entry)
        try:
            await asyncio.sleep(lat)
        except asyncio.CancelledError:  # the client went away (a call re-sent whose copy answered first):
            took = time.monotonic() - now  # the slot was busy until now, its thought billed as far as it went
            entry[4], entry[5] = took, p_tok + int(out * min(1.0, took / lat))
            if tb is not None:
                tb.fill(time.monotonic())
                tb.level = min(tb.cap, tb.level - (entry[5] - charge))
            raise
        if tb is not None:  # settled: the bucket pays what the call really used (reasoning included)
            tb.fill(time.monotonic())
            tb.level = min(tb.cap, tb.level - (p_tok + out - charge))
        choices = [
            {
                "index": i,
                "message": {
                    "role": "assistant",
                    "content": f"Thought it over.\nThe answer is "
                    f"{'ABCD'[int(_unit(model, prompt, first + i, 'a') * 4)]}.",
                },
                "finish_reason": "stop",
            }
            for i in range(n)
        ]
        reasoning = sum(d[1] for d in draws) - m["answer"] * n
        usage = {
            "prompt_tokens": p_tok,
            "completion_tokens": out,
            "total_tokens": p_tok + out,
            "completion_tokens_details": {"reasoning_tokens": reasoning},
        }
        data = orjson.dumps(
            {"id": "x", "object": "chat.completion", "model": model, "choices": choices, "usage": usage}
        )
        return web.Response(body=data, content_type="application/json", headers=hdr)

    async def handle_log(self, request: web.Request) -> web.Response:
        return web.Response(
            body=orjson.dumps(
                {
                    "log": self.log,
                    "refused": dict(self.refused),
                    "refusals": self.refusals,
                    "refused_by_key": {
                        k: sum(v for kw, v in self.refused.items() if kw.split()[0] == k) for k in self.keys
                    },
                }
            ),
            content_type="application/json",
        )

    async def handle_models(self, request: web.Request) -> web.Response:
        return web.json_response({"object": "list", "data": [{"id": k} for k in self.models]})


def main() -> None:
    with open(sys.argv[1], "rb") as f:
        srv = Server(orjson.loads(f.read()))
    app = web.Application(client_max_size=16 * 2**20)
    app.router.add_post("/v1/chat/completions", srv.handle)
    app.router.add_get("/v1/models", srv.handle_models)
    app.router.add_get("/log", srv.handle_log)

    async def run() -> None:
        runner = web.AppRunner(app, access_log=None, handler_cancellation=True)  # (a client gone: logged as ended)
        await runner.setup()
        site = web.TCPSite(runner, "127.0.0.1", srv.port)  # (a second night: the same port)
        await site.start()
        print(site._server.sockets[0].getsockname()[1], flush=True)  # type: ignore[union-attr]
        await asyncio.Event().wait()

    asyncio.run(run())


if __name__ == "__main__":
    main()
