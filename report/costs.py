"""The measured cost of each model's run, from the final row of each (model, item, sample, pass),
read in one pass over every results file of the run (results.jsonl and the `--join` workers' files)."""

from __future__ import annotations

from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import orjson


@dataclass(frozen=True)
class Cost:
    """The measured cost of one model's run, from the final row of each (model, item, sample, pass)."""

    total: float | None
    """USD, or None when some call that was sent has no price (never a made-up number)."""
    priced: float
    """The sum over the calls that have a price: a lower bound when `total` is None."""
    calls: int
    priced_calls: int
    cached_calls: int
    errors: int = 0
    """Final rows with an error (a failed call: not scored, it lowers the coverage)."""


def all_rows(results: Path) -> Iterator[dict[str, Any]]:
    """Every parseable row of a run: results.jsonl, then the `--join` workers' results.<host>-<pid>.jsonl
    (a torn last line is skipped), in the order `runner.rowindex.index` reads them."""
    from runner.results import results_files, scan

    for p in [results, *(q for q in results_files(results.parent) if q != results)]:
        for _, r in scan(p):
            yield r


def run_costs(path: Path) -> dict[str, Cost]:
    """Per model, over the rows the scorer reads (`runner.rowindex.index`: the last success of each
    identity, else its last error; a torn last line is skipped). Answers served from the cache count at
    the price recorded when they were bought, so a model's cost does not depend on the cache's state.
    A row that was never sent (`attempts == 0`: skipped by the circuit breaker) costs nothing; any
    other row without `cost_usd` makes the total unknown.

    One pass, holding per identity a 16-byte digest and an index into flat arrays (no index of row
    offsets and strings): about 100 bytes per row, 1M rows in ~150 MB."""
    from array import array
    from hashlib import blake2b

    slot: dict[bytes, int] = {}
    cost, flags, who = array("d"), array("B"), array("I")
    models: dict[str, int] = {}
    for r in all_rows(path):
        ident = blake2b(
            orjson.dumps([r.get("model"), r.get("item"), r.get("sample"), r.get("pass")]), digest_size=16
        ).digest()
        err = r.get("error") is not None
        c = r.get("cost_usd")
        f = (
            ERR * err
            | CACHED * bool(r.get("cached"))
            | PRICED * (c is not None)
            | FREE * (c is None and r.get("attempts") == 0 and err)
        )
        j = slot.get(ident)
        if j is None:
            slot[ident] = len(flags)
            cost.append(float(c or 0.0))
            flags.append(f)
            who.append(models.setdefault(r.get("model"), len(models)))
        elif not err or flags[j] & ERR:  # a success replaces anything; an error only an error
            cost[j], flags[j] = float(c or 0.0), f
    del slot
    acc = [[0.0, 0, 0, 0, 0] for _ in models]  # priced cost, calls, priced calls, cached, errors
    for j, f in enumerate(flags):
        a = acc[who[j]]
        a[0] += cost[j] if f & PRICED else 0.0
        a[1] += 1
        a[2] += bool(f & (PRICED | FREE))
        a[3] += bool(f & CACHED)
        a[4] += bool(f & ERR)
    return {
        m: Cost(a[0] if a[2] == a[1] else None, a[0], a[1], a[2], a[3], a[4])
        for m, a in zip(models, acc, strict=True)
    }


ERR, CACHED, PRICED, FREE = 1, 2, 4, 8


