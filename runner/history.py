"""What each model spent in earlier runs, per pass: the prior the dry run prices and forecasts with for
a run that has no rows of its own yet (a new benchmark, tomorrow's sweep), instead of a guess.

One small JSON per model in the cache folder (beside runner.calls.learned's), keyed by where the model
is served (its cache id). Each session of a run adds what its own answers spent (counted as they were
written, never re-read), so a resumed run is never counted twice; the last `KEEP_RUNS` sessions are kept.
Writing it is best effort: a run never fails for its history.
"""

from __future__ import annotations

import functools
import hashlib
import logging
import math
import re
import time
from pathlib import Path
from typing import Any

import orjson

from runner.atomic import write_atomic

DIR = "history"
KEEP_RUNS = 20

log = logging.getLogger(__name__)

Seen = dict[str, list[Any]]
"""Per pass: [output tokens, rows]; per `latency:<pass>`: [seconds, rows] of calls not served from a cache
(runner.scheduler counts them as rows are written), and per `lnlat:<pass>` / `lnlat2:<pass>` [the sum of
ln(seconds), rows] / [of its squares, rows]: the spread of the pass's latencies (a lognormal's sigma), which
tells the live ETA how long a call already running for a while has still to go (runner.forecast.Law.residual);
`latmax:<pass>`: [the longest, rows] (a lognormal fit of a bounded tail runs far past it: runner.forecast.last_residual).
The same three per samples a request (`n<k>/latency:<pass>`...: `at_n`; k the row's `n`), as an `n` call lasts the
longest of its samples (#40: a model's 1-sample rows took 1.39 s, its 8-sample rows 2.37 s; pooled, its 1-sample run
was forecast 38% slow); `open:<pass>`: [seconds, rows, last sample, item] of the call whose rows are being tallied
(rows without `n`, from older run directories: `_by_n`). Per `tok1:<pass>` / `tok2:<pass>` / `tokn:<pass>`: [output
tokens, rows] / [the sum of n * output tokens^2, rows] / [the sum of n, rows] (n: the row's call's samples, 1 without
one; `tok1` is the pass's own total, kept apart for the rows that have the other two): the spread of a sample's output
tokens (`token_var`), which tells the forecast how far a lane's token total may land from its mean (#40: a TPM lane's
heavy-tailed total moved 1.34-1.49x between nights). Squares, not logs: the total's variance is the draws' variance,
whatever their law (a lognormal fit misstates a power law's); times n, because an `n` call's rows split its one total
(each ~ total / n, all moving together), and n * (total / n)^2 summed over its n rows is the call's total^2. A history
without these (written before them) has no spread: its range is its point."""

LATMAX = "latmax:"
"""The key prefix of a pass's longest latency: [seconds, rows], merged by max (`prior`), not summed."""
DEPTH = "depth:tpm"
"""The key of how deep a model's key's token bucket was seen (runner.budgets.tokens.TokenAccount.depth, from its
answers' remaining-tokens): [tokens, 1], merged by max. A fresh run spends it at once (`forecast.LaneWork.depth`:
bench tpm-a, 10 s of its TPM deep, ended 0.95x its tokens' time and was forecast 1.17x its wall)."""
OPEN = "open:"
"""The key prefix of a tally's call in progress (never written to a history file)."""


def path_for(cache_dir: Path, cache_id: str) -> Path:
    slug = re.sub(r"[^A-Za-z0-9._-]+", "_", cache_id)[:80]
    return cache_dir / DIR / f"{slug}.{hashlib.sha256(cache_id.encode()).hexdigest()[:12]}.json"


def _load(path: Path) -> dict[str, Any]:
    try:
        doc = orjson.loads(path.read_bytes())
    except (OSError, orjson.JSONDecodeError):
        return {}
    return doc if isinstance(doc, dict) and isinstance(doc.get("runs"), dict) else {}


def depths(models: dict[str, Any], names: Any) -> dict[str, float]:
    """How deep each model's keys' token buckets were seen this session (the deepest of its lanes'; 0: no TPM, not
    seen, or a budget keeping none, as a Redis-shared one)."""
    return {m: max((getattr(getattr(ln.budget, "tokens", None), "depth", 0.0) or 0.0 for ln in models[m].lanes),
                   default=0.0) for m in names if m in models}


def record(cache_dir: Path, run_dir: Path, seen: dict[str, Seen], cache_ids: dict[str, str],
           depth: dict[str, float] | None = None) -> None:
    """Store this session's per-pass totals for each of its models (`seen`: by model name), and how deep its keys'
    token buckets were seen (`depth`)."""
    key = f"{run_dir.resolve()}#{time.time_ns()}"
    for name, passes in seen.items():
        cid = cache_ids.get(name)
        if cid is None or not passes:
            continue
        path = path_for(cache_dir, cid)
        try:
            doc = _load(path) or {"model": cid, "runs": {}}
            kept = {k: v for k, v in passes.items() if not k.startswith(OPEN)}
            if (depth or {}).get(name):
                kept[DEPTH] = [depth[name], 1]  # type: ignore[index]
            doc["runs"][key] = {"at": time.time(), "seen": kept}
            keep = sorted(doc["runs"].items(), key=lambda kv: kv[1].get("at", 0))[-KEEP_RUNS:]
            doc["runs"] = dict(keep)
            path.parent.mkdir(parents=True, exist_ok=True)
            write_atomic(path, orjson.dumps(doc))
        except OSError as e:  # (a full disk, a read-only cache): the prior is only a prior
            log.debug("history of %s not written: %s", cid, e)


def prior(cache_dir: Path | None, cache_id: str, skip: Path | None = None) -> Seen:
    """This model's per-pass totals over its earlier runs (`skip`: the run being planned, whose own rows
    are counted from its directory)."""
    if cache_dir is None:
        return {}
    doc = _load(path_for(cache_dir, cache_id))
    out: Seen = {}
    not_this = None if skip is None else f"{skip.resolve()}#"
    for run, entry in doc.get("runs", {}).items():
        if (not_this is not None and run.startswith(not_this)) or not isinstance(entry, dict):
            continue
        for k, v in (entry.get("seen") or {}).items():
            if isinstance(v, list) and len(v) == 2 and all(isinstance(x, int | float) for x in v):
                s = out.setdefault(k, [0, 0])
                s[0] = max(s[0], v[0]) if k.startswith(LATMAX) or k == DEPTH else s[0] + v[0]
                s[1] += v[1]
    return out


def tally(by_pass: Seen, row: dict[str, Any]) -> None:
    """Add a success row to its model's per-pass totals: its output tokens, and its latency when it was a
    live call (not an answer from a cache, nor a batch's: its batch's turnaround would make the live lanes'
    forecast and `runner.batch.plan.live_seconds` hours long), pooled and by the call's samples (the row's `n`; a row without one,
    read from an older run directory, by `_by_n`'s inference). Once a row written: the pass's keys are made
    once (`_keys`), and a total's list only when it is new (~0.6 us a row instead of ~1.3)."""
    p = row["pass"]
    out = (row.get("usage") or _NONE).get("output_tokens")
    if out is not None:
        s = by_pass.get(p)
        if s is None:
            s = by_pass[p] = [0, 0]
        s[0] += out
        s[1] += 1
        k = row.get("n")
        w = k if type(k) is int and k > 0 else 1
        k_1, k_sq, k_n = _tok_keys(p)
        _add(by_pass, k_1, out)
        _add(by_pass, k_sq, w * out * out)
        _add(by_pass, k_n, w)
    lat = row.get("latency_s")
    if (type(lat) is float or isinstance(lat, int | float)) and lat > 0 and not row.get("cached") \
            and not row.get("batch_id"):  # (a batch row's latency is its batch's turnaround, no call's)
        ln = math.log(lat)
        k_lat, k_ln, k_ln2 = _keys(p)
        _add(by_pass, k_lat, lat)
        _add(by_pass, k_ln, ln)
        _add(by_pass, k_ln2, ln * ln)
        m = by_pass.get(k_max := _max_key(p))
        if m is None:
            by_pass[k_max] = [lat, 1]
        else:
            m[0] = max(m[0], lat)
            m[1] += 1
        k = row.get("n")
        if type(k) is int and k > 0:  # the call's samples, as rows_from wrote them
            k_lat, k_ln, k_ln2 = _keys_n(p, k)
            _add(by_pass, k_lat, lat)
            _add(by_pass, k_ln, ln)
            _add(by_pass, k_ln2, ln * ln)
        else:  # a row written before rows said their call's samples (#40): inferred from its neighbours
            _by_n(by_pass, p, row, lat, ln)


def _by_n(by_pass: Seen, p: str, row: dict[str, Any], lat: float, ln: float) -> None:
    """Tally a row that does not say its call's samples (written before rows had `n`) under the samples
    inferred: an `n` call's rows come together, one after the other with the call's latency and consecutive
    samples (runner.calls.call.rows_from), so a row that continues the call before it moves the call's rows
    from the k-sample totals to the k+1 ones. The totals stay whole after every row (nothing to close when a
    session ends or a file is read). Two one-sample calls of one item back to back with the same latency
    (to 0.1 ms) are taken for one 2-sample call: why rows now carry `n`."""
    k_open = _open(p)
    o = by_pass.get(k_open)
    s = row.get("sample")
    if o is not None and o[0] == lat and isinstance(s, int) and o[2] == s - 1 and o[3] == row.get("item"):
        k = o[1]
        for key, v in zip(_keys_n(p, k), (lat, ln, ln * ln), strict=True):
            t = by_pass[key]
            t[1] -= k
            if t[1] <= 0:
                del by_pass[key]
            else:
                t[0] -= k * v
        o[1], o[2] = k + 1, s
    else:
        o = by_pass[k_open] = [lat, 1, s if isinstance(s, int) else -2, row.get("item")]
    k = o[1]
    for key, v in zip(_keys_n(p, k), (lat, ln, ln * ln), strict=True):
        t = by_pass.get(key)
        if t is None:
            t = by_pass[key] = [0.0, 0]
        t[0] += k * v
        t[1] += k


def token_var(tally: Seen, pass_: str) -> float | None:
    """The variance of one sample's output tokens of `pass_` (None: no spread known: fewer than 2 calls with it,
    or a history from before it was kept). Unbiased: E[sum of n * y^2] = rows * var + mean^2 * sum of n (y a row's
    tokens, ~ its call's total / n, a sample's mean), and the mean's own error takes var * sum of n / rows of it
    (rows - 1 with one sample a call). All from the rows that kept the spread (`tok1`: their tokens), so a history
    partly older than it has the spread of its newer rows."""
    tok, sq, ns = tally.get(f"tok1:{pass_}"), tally.get(f"tok2:{pass_}"), tally.get(f"tokn:{pass_}")
    if not tok or not sq or not ns or not tok[1] == sq[1] == ns[1]:
        return None
    free = sq[1] - ns[0] / max(1, sq[1])
    if free < 0.5:  # (one call: its samples' spread is not seen apart)
        return None
    mean = tok[0] / tok[1]  # (a sample's: the rows of an n call sum to its total)
    return max(0.0, (sq[0] - mean * mean * ns[0]) / free)


def latency_sigma(tally: Seen, pass_: str) -> float | None:
    """The sigma of `pass_`'s latencies as a lognormal (the spread of their logs; None: fewer than 2 calls)."""
    ln, ln2 = tally.get(f"lnlat:{pass_}"), tally.get(f"lnlat2:{pass_}")
    if not ln or not ln2 or ln[1] < 2 or ln2[1] != ln[1]:
        return None
    mean = ln[0] / ln[1]
    return math.sqrt(max(0.0, ln2[0] / ln2[1] - mean * mean) * ln[1] / (ln[1] - 1))


def latency_cap(tally: Seen, pass_: str) -> float | None:
    """The longest latency seen of `pass_` (None: none seen, or a history from before it was kept)."""
    m = tally.get(f"{LATMAX}{pass_}")
    return m[0] if m and m[1] else None


def at_n(tally: Seen, n: int) -> Seen:
    """`tally` with each pass's latency totals those of its calls of `n` samples a request, where any were
    seen (else the pass's pooled ones: an `n` never seen; a history written before these totals)."""
    out = dict(tally)
    for key in tally:
        if key.startswith("latency:"):
            p = key.split(":", 1)[1]
            mine = _keys_n(p, n)
            got = tally.get(mine[0])
            if got and got[1]:
                for pooled, own in zip(_keys(p), mine, strict=True):
                    if own in tally:
                        out[pooled] = tally[own]
    return out


def _add(by_pass: Seen, key: str, v: float) -> None:
    s = by_pass.get(key)
    if s is None:
        s = by_pass[key] = [0.0, 0]
    s[0] += v
    s[1] += 1


_NONE: dict[str, Any] = {}
"""A row without usage (read, never written)."""


@functools.lru_cache(maxsize=256)
def _keys(pass_: str) -> tuple[str, str, str]:
    """A pass's latency totals' keys (a handful of passes, a row each call)."""
    return f"latency:{pass_}", f"lnlat:{pass_}", f"lnlat2:{pass_}"


@functools.lru_cache(maxsize=256)
def _tok_keys(pass_: str) -> tuple[str, str, str]:
    """A pass's token spread totals' keys."""
    return f"tok1:{pass_}", f"tok2:{pass_}", f"tokn:{pass_}"


@functools.lru_cache(maxsize=256)
def _keys_n(pass_: str, n: int) -> tuple[str, str, str]:
    """A pass's latency totals' keys for its calls of `n` samples a request."""
    return f"n{n}/latency:{pass_}", f"n{n}/lnlat:{pass_}", f"n{n}/lnlat2:{pass_}"


@functools.lru_cache(maxsize=256)
def _max_key(pass_: str) -> str:
    return f"{LATMAX}{pass_}"


@functools.lru_cache(maxsize=256)
def _open(pass_: str) -> str:
    return f"{OPEN}{pass_}"
