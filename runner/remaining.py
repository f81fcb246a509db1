"""What a set of run plans still has to send: rows already finished in the run directory (what a rerun
resumes) and answers already in the cache (what a rerun replays for free) are counted, not planned.

Shared by the dry run (cli.dryrun prices it) and the resume message (runner.resume) from one place.
"""

from __future__ import annotations

from collections.abc import Callable, Container
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from cache.key import cache_keys
from core.types import Request, Row, row_identity
from runner import history
from runner.pool import ModelEntry, estimate_tokens
from runner.rowindex import RowIndex, index
from suites.base import _no_follow_up, get_suite

DEFAULT_MAX_TOKENS = 256
"""What a request without max_tokens is priced at (the scheduler's estimate assumes the same)."""


@dataclass
class Plan:
    """The remaining first-pass work of one (run, model)."""

    run: str
    model: str
    calls: int = 0
    requests: int = 0
    """What the calls go out as: one request for a call's samples where the model takes `n`."""
    finished: int = 0
    cached: int = 0
    input_tokens: int = 0
    max_output_tokens: int = 0
    out_tokens_seen: list[int] = field(default_factory=lambda: [0, 0])
    """[output tokens, successful rows] of this model in the run directory: the expected-output basis."""
    answer_tokens: int | None = None
    """The suite's typical answer length (suites.base.Suite.answer_tokens)."""
    reasoning_tokens: int = 0
    """The model's reasoning budget per call (its limit adds it to the answer budget)."""
    follow: dict[str, list[int]] = field(default_factory=dict)
    """Per follow-up pass (critique, judge...): [calls expected, calls at most, input tokens, max output
    tokens] still to make; a pass the suite makes only for some answers (a judge for an answer the rules
    cannot read) counts 0 expected and every such answer at most."""
    follow_via: dict[str, str] = field(default_factory=dict)
    """A follow-up pass called on another model (a judge): priced at that model."""
    follow_seen: dict[str, list[int]] = field(default_factory=dict)
    """Per follow-up pass: [output tokens, successful rows] in the run directory."""
    latency_seen: dict[str, list[float]] = field(default_factory=dict)
    """Per pass: [seconds, successful rows] of this model's calls in the run directory (the wall forecast)."""
    latency_from_history: set[str] = field(default_factory=set)
    """Passes whose `latency_seen` came from earlier runs (runner.history), not this run's rows: forecast from
    the history's calls of as many samples a request (runner.history.at_n)."""
    latency_sigma: dict[str, float] = field(default_factory=dict)
    """Per pass: its latencies' spread as a lognormal's sigma, from the same calls as `latency_seen` (runner.history.
    latency_sigma): how far a lane's last calls may end past its work (runner.forecast.last_residual)."""
    latency_cap: dict[str, float] = field(default_factory=dict)
    """Per pass: the longest latency seen (runner.history.latency_cap): the law `latency_sigma` spreads ends there."""
    tpm_depth: float = 0.0
    """How deep its key's token bucket was seen in earlier runs (runner.history.DEPTH): a fresh run spends it at once."""
    token_var: dict[str, float] = field(default_factory=dict)
    """Per pass: the variance of a sample's output tokens, from the same rows as its mean (runner.history.token_var;
    none: unknown): the range of the pass's output total (`output_var`)."""

    def output_var(self, pass_: str, share: float = 1.0) -> float:
        """The variance of what `share` of this pass's calls will write around its expected output: their draws'
        (calls * var), and its mean's own error, known from `rows` draws (calls^2 * var / rows); 0 unknown."""
        v = self.token_var.get(pass_)
        if pass_ == "answer":
            calls, rows = self.calls * share, self.out_tokens_seen[1]
        else:
            calls, rows = (self.follow.get(pass_) or [0])[0] * share, self.follow_seen.get(pass_, [0, 0])[1]
        if v is None or not rows or not calls:
            return 0.0
        return calls * v * (1.0 + calls / rows)

    def per_request(self, pass_: str) -> int:
        """Samples a request of this pass carries (an answer's where the model takes `n`; a follow-up: one):
        the latency history this pass's calls are forecast from (runner.history.at_n)."""
        return max(1, round(self.calls / self.requests)) if pass_ == "answer" and self.requests else 1

    def follow_expected_output_tokens(self, pass_: str) -> float:
        """A follow-up pass's expected output: its own mean so far, else half of its limit."""
        calls, most, _tin, mx = self.follow[pass_]
        tokens, n = self.follow_seen.get(pass_, [0, 0])
        per_call_max = mx / most if most else 0
        return calls * (tokens / n if n else 0.5 * per_call_max)

    def expected_output_tokens(self) -> float:
        """The mean seen so far, in this run or earlier ones (reasoning included: what was billed, even past
        the limit, as some providers bill thinking); else the suite's typical answer plus half the reasoning
        budget; else half of the limit."""
        tokens, n = self.out_tokens_seen
        if n:
            return self.calls * tokens / n
        if self.answer_tokens is not None:
            return min(self.max_output_tokens, self.calls * (self.answer_tokens + 0.5 * self.reasoning_tokens))
        return 0.5 * self.max_output_tokens


def finished_rows(
    run_dir: Path | None, partial: bool = False
) -> tuple[RowIndex, dict[str, dict[str, list[int]]]]:
    """Identities with a successful row (where it is), and per model and pass [output tokens, rows]
    (and under `latency:<pass>`, [seconds, rows] of the calls not served from the cache). `partial`:
    a stream cut mid-answer (billed, kept unless `--resend-partial`) counts as finished too.

    The identities are the resume's compact index (runner.rowindex: ~20 bytes a finished row, where a
    dict of identity strings and locations held ~220: a dry run over a 45-model night of 200k rows each
    took ~2 GB), read in the same pass as the totals."""
    seen: dict[str, dict[str, list[Any]]] = {}
    if run_dir is None:
        return RowIndex(), seen

    def tally(r: Row) -> None:
        if r.get("error") is None:
            history.tally(seen.setdefault(r["model"], {}), r)

    done = index(run_dir / "results.jsonl", set() if partial else None, tally)[0]
    return done, seen


FOLLOW_DEPTH = 4
"""Passes after the answer a chain may have (answer -> critique -> judge of the critique...)."""


TOOL_ROUNDS = 1
"""Tool rounds a typical chain is planned with when a request offers tools (JEEBench §4.2): one turn of
calls (a model's parallel calls share a turn), its results, then the answer. The longest chain calls in
every round the suite allows (its round limit)."""
TOOL_DEPTH = 64
"""A guard on a chain of tool rounds, for a suite that would never stop offering another."""


def _as_answered(req: Request, text: str, called: bool = False) -> Row:
    """The row a follow-up is formed from, as if `req` was answered with `text`; `called`: a turn that
    called the first tool offered (the follow-up the suite makes of it: the next tool round)."""
    row = {"model": req.model, "item": req.item, "sample": req.sample, "pass": req.pass_, "text": text,
           "error": None, "error_kind": None, "usage": {}, "cached": False}
    if called and req.tools:
        name = (req.tools[0].get("function") or {}).get("name") or ""
        row["tool_calls"] = [{"id": "call_0", "type": "function", "function": {"name": name, "arguments": "{}"}}]
    return row


def _chain(suite: Any, spec: Any, req: Request, text: str | None, rounds: int) -> list[Request]:
    """One sample's follow-ups when each answer reads `text` (None: the simulated model's right answer) after
    `rounds` tool rounds (a request offering tools: a turn of calls until then)."""
    chain: list[Request] = []
    todo = [req]
    for depth in range(FOLLOW_DEPTH + (TOOL_DEPTH if req.tools else 0)):
        nxt = []
        for r in todo:
            said = ((r.sim or {}).get("correct") or "") if text is None else text
            nxt.extend(suite.follow_up(r, _as_answered(r, said, depth < rounds), spec))
        chain.extend(nxt)
        todo = nxt
        if not todo:
            break
    return chain


def follow_ups(suite: Any, spec: Any, req: Request) -> tuple[list[Request], list[Request]]:
    """The follow-up requests one sample of `req` leads to: (when each answer reads as the simulated
    model's right answer would, when each answer is unreadable): the typical chain and the longest. A
    request offering tools: the typical chain answers after TOOL_ROUNDS rounds of calls; the longest,
    per pass, the more of an unreadable answer then and of a chain calling in every round it may."""
    if suite.follow_up is _no_follow_up:
        return [], []
    rounds = TOOL_ROUNDS if req.tools else 0
    typical, longest = _chain(suite, spec, req, None, rounds), _chain(suite, spec, req, "", rounds)
    if req.tools:  # (a chain still calling at the limit has no answer to judge: both count)
        calling = _chain(suite, spec, req, "", TOOL_DEPTH)
        more = {p: n for p in dict.fromkeys(f.pass_ for f in calling)
                if (n := sum(f.pass_ == p for f in calling)) > sum(f.pass_ == p for f in longest)}
        longest = [f for f in longest if f.pass_ not in more] + [f for f in calling if f.pass_ in more]
    return typical, longest


def remaining(
    plans: list[Any],
    models: dict[str, ModelEntry],
    in_cache: Callable[[str], bool],
    known: Container[str] | None = None,
    follow: bool = True,
    prior: Callable[[str, Path | None], dict[str, list[Any]]] | None = None,
    walk: dict[str, bytearray] | None = None,
) -> list[Plan]:
    """Per (run, model): the first-pass calls still to make, skipping finished rows and cache hits.
    `known`: the one plan's finished identities, already read (runner.resume): its files are not read
    again (and its output tokens so far are not counted). `prior(model, run_dir)`: what the model spent
    per pass in earlier runs (runner.history), for each pass this run has no rows of yet. `walk` (the one
    plan's): filled per model with a byte a request of the suite's build, 1 when its every sample is
    finished, so that the scheduler skips those without looking each row up again (runner.resume)."""
    assert known is None or len(plans) == 1
    assert walk is None or len(plans) == 1
    out: list[Plan] = []
    names = [get_suite(p.spec.suite).run_name(p.spec) for p in plans]
    for p, name in zip(plans, names, strict=True):
        suite = get_suite(p.spec.suite)
        if suite.check is not None:
            suite.check(p.spec)
        done: Container[str]
        seen: dict[str, dict[str, list[int]]]
        kept = not getattr(p, "resend_partial", False)  # (cut streams: billed, not sent again)
        done, seen = (known, {}) if known is not None else finished_rows(p.out, kept)
        priors: dict[str, dict[str, list[Any]]] = {}
        from_history: dict[str, set[str]] = {}  # per model: the passes whose latency is the history's
        if prior is not None:
            for m in dict.fromkeys(p.models):
                own = seen.setdefault(m, {})
                for k, v in (priors.setdefault(m, prior(m, p.out))).items():
                    if not own.get(k, [0, 0])[1]:
                        own[k] = v
                        if k.startswith("latency:"):
                            from_history.setdefault(m, set()).add(k.split(":", 1)[1])
        if names.count(name) > 1 and p.out is not None:  # runs told apart by their folders
            name = f"{name} ({p.out.name})"
        todo = {
            m: Plan(name, m, out_tokens_seen=seen.get(m, {}).get("answer", [0, 0]),
                    answer_tokens=suite.answer_tokens,
                    reasoning_tokens=models[m].shape.extra if models[m].shape is not None else 0,
                    follow_seen={k: v for k, v in seen.get(m, {}).items() if k != "answer" and ":" not in k},
                    latency_seen={k.split(":", 1)[1]: v for k, v in seen.get(m, {}).items()
                                  if k.startswith("latency:")},
                    latency_from_history=from_history.get(m, set()),
                    tpm_depth=seen.get(m, {}).get(history.DEPTH, [0.0, 0])[0],
                    token_var={q: v for q in seen.get(m, {}) if ":" not in q
                               and (v := history.token_var(seen[m], q)) is not None})
            for m in dict.fromkeys(p.models)
        }
        count_follow = follow and known is None
        for r in suite.build(p.spec):
            mx = r.decoding.max_tokens or DEFAULT_MAX_TOKENS
            tin = estimate_tokens(r) - mx
            samples = range(r.sample, r.sample + r.decoding.n)
            for model, plan in todo.items():
                m = models[model]
                left = [s for s in samples if row_identity(model, r.item, s, r.pass_) not in done]
                plan.finished += len(samples) - len(left)
                if walk is not None:
                    walk.setdefault(model, bytearray()).append(not left)
                if left and m.provider_cacheable:
                    keys = cache_keys(r, m.cache_id, m.key_params, left)
                    hits = sum(map(in_cache, keys))
                    plan.cached += hits
                    n = len(left) - hits
                else:
                    n = len(left)
                plan.calls += n
                plan.requests += 1 if n and m.supports_n else n
                plan.input_tokens += tin * n
                shape = m.shape
                plan.max_output_tokens += (shape.limit(mx) if shape is not None else mx) * n
            if count_follow:
                _count_follow_ups(suite, p.spec, r, samples, todo, models, done)
        for model, plan in todo.items():  # (a pass with no rows of its own: its history at its samples a request)
            had = priors.get(model, {})
            for q in plan.latency_from_history:
                plan.latency_seen[q] = history.at_n(had, plan.per_request(q))[f"latency:{q}"]
            for q in plan.latency_seen:
                basis = had if q in plan.latency_from_history else seen.get(model, {})
                if (sigma := history.latency_sigma(history.at_n(basis, plan.per_request(q)), q)) is not None:
                    plan.latency_sigma[q] = sigma
                if (cap := history.latency_cap(basis, q)) is not None:
                    plan.latency_cap[q] = cap
        out.extend(todo.values())
    return out


def _count_follow_ups(suite: Any, spec: Any, r: Request, samples: range, todo: dict[str, Plan],
                      models: dict[str, ModelEntry], done: RowIndex) -> None:
    """Every follow-up pass still to make for `r`'s samples, per model: the dry run's plan counts every
    pass, not the first alone (a critique run is twice the calls). A sample whose answer is in is
    followed up as the run will, from its real row; one still to answer, from the typical and the
    longest chains (`follow_ups`)."""
    typical, longest = follow_ups(suite, spec, r)
    if not typical and not longest:
        return
    unknown = _tally(typical, longest)
    for model, plan in todo.items():
        for s in samples:
            row = done.found(row_identity(model, r.item, s, r.pass_))
            if row is None:
                _add(plan, model, models, unknown, s, done)
            else:
                real = _real_follow_ups(suite, spec, r.model_copy(update={"model": model, "sample": s}),
                                        row, model, done)
                _add(plan, model, models, real, s, done)


def _tally(typical: list[Request], longest: list[Request]) -> dict[str, tuple[Request, int, int]]:
    """Per pass: (a request to price it by, calls expected, calls at most) of one sample's chains."""
    out: dict[str, tuple[Request, int, int]] = {}
    for f in longest + typical:
        if f.pass_ not in out:
            exp = sum(g.pass_ == f.pass_ for g in typical)
            most = max(exp, sum(g.pass_ == f.pass_ for g in longest))
            out[f.pass_] = (f, exp, most)
    return out


def _real_follow_ups(suite: Any, spec: Any, req: Request, row: Row, model: str, done: RowIndex,
                     depth: int = 0) -> dict[str, tuple[Request, int, int]]:
    """The follow-ups still to make after a real row: each one certain, then its own chains."""
    out: dict[str, tuple[Request, int, int]] = {}
    if depth >= FOLLOW_DEPTH + (TOOL_DEPTH if req.tools else 0):  # (a tool chain: up to the suite's round limit)
        return out
    for f in suite.follow_up(req, row, spec):
        got = done.found(row_identity(model, f.item, f.sample, f.pass_))
        more = (_real_follow_ups(suite, spec, f, got, model, done, depth + 1) if got is not None
                else {f.pass_: (f, 1, 1), **_tally(*follow_ups(suite, spec, f))})
        for p, (g, e, m) in more.items():
            old = out.get(p)
            out[p] = (g, e, m) if old is None else (old[0], old[1] + e, old[2] + m)
    return out


def _add(plan: Plan, model: str, models: dict[str, ModelEntry], passes: dict[str, tuple[Request, int, int]],
         sample: int, done: RowIndex) -> None:
    for pass_, (f, exp, most) in passes.items():
        if row_identity(model, f.item, sample, pass_) in done:
            continue
        via = f.via if f.via in models else None
        if via:
            plan.follow_via[pass_] = via
        shape = models[via or model].shape
        fmx = f.decoding.max_tokens or DEFAULT_MAX_TOKENS
        acc = plan.follow.setdefault(pass_, [0, 0, 0, 0])
        acc[0] += exp
        acc[1] += most
        acc[2] += (estimate_tokens(f) - fmx) * most
        acc[3] += (shape.limit(fmx) if shape is not None else fmx) * most
