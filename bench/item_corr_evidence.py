"""Does an item's difficulty carry across models? The cross-model correlation of per-item response length on
released JEEBench responses (issue 40: `reasoning_server.py`'s `item_corr` takes its value from here).

Each file is a JEEBench response set aligned with `dataset.json` (a list of rows with `description`, `index`,
`subject`, `type` and one `*_response` field holding the raw API object, a dict or its repr): the authors'
`dev_responses/*.json` in `../shared/data/jeebench`, or their `data/responses/*/responses.json`. Per file, an item's
length is its log(completion tokens) (or log(characters) where usage is missing) less the file's median; per pair of
files, Pearson and Spearman on their common items, also within subject x type (each cell's median removed: is it the
item, or only its kind?). Truncated answers (finish_reason `length`) are kept (a long thinker is the point).

    python bench/item_corr_evidence.py FILE.json...
"""

from __future__ import annotations

import ast
import json
import math
import sys
from itertools import combinations
from pathlib import Path
from statistics import median
from typing import Any

from scipy.stats import pearsonr, spearmanr


def lengths(path: Path) -> tuple[str, dict[tuple[str, str], tuple[float, float, str]]]:
    """(model, {item: (log tokens, log chars, subject x type)}) of one response file."""
    model, out = path.stem, {}
    for r in json.loads(path.read_text()):
        key = next(k for k in r if k.endswith("_response"))
        v: Any = r[key]
        if isinstance(v, str):
            v = ast.literal_eval(v)
        c = v["choices"][0]
        text = c.get("text") or (c.get("message") or {}).get("content") or ""
        tok = (v.get("usage") or {}).get("completion_tokens") or 0
        model = f"{key.removesuffix('_response')} ({v.get('model', '?')})"
        out[(r["description"], str(r["index"]))] = (
            math.log(max(tok, 1)) if tok else math.nan, math.log(max(len(text), 1)), f"{r['subject']} {r['type']}")
    return model, out


def centred(got: dict[Any, tuple[float, float, str]], i: int, by_cell: bool) -> dict[Any, float]:
    """Each item's log-length less the median of its file (or of its subject x type cell)."""
    cells: dict[str, list[float]] = {}
    for v in got.values():
        if not math.isnan(v[i]):
            cells.setdefault(v[2] if by_cell else "", []).append(v[i])
    med = {c: median(xs) for c, xs in cells.items()}
    return {k: v[i] - med[v[2] if by_cell else ""] for k, v in got.items() if not math.isnan(v[i])}


def main() -> None:
    sets = [lengths(Path(p)) for p in sys.argv[1:]]
    print(f"{'model A':<40} {'model B':<40} {'items':>5}  {'tokens P/S':>11}  {'in cell P/S':>11}  {'chars P/S':>11}")
    for (ma, a), (mb, b) in combinations(sets, 2):
        cols = []
        for i, by_cell in ((0, False), (0, True), (1, False)):
            xa, xb = centred(a, i, by_cell), centred(b, i, by_cell)
            common = sorted(set(xa) & set(xb))
            if len(common) < 10:
                cols.append("     -     ")
                continue
            x, y = [xa[k] for k in common], [xb[k] for k in common]
            cols.append(f"{pearsonr(x, y)[0]:.2f}/{spearmanr(x, y)[0]:.2f}".rjust(11))
        n = len(set(a) & set(b))
        print(f"{ma:<40} {mb:<40} {n:>5}  " + "  ".join(cols))


if __name__ == "__main__":
    main()
