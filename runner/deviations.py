"""A run's deviations as a person reads them: a short block said before the first call (at most ~10
lines at 80 columns: the suites' own departures, one line each, runs sharing a departure named
together, and the request shaping counted by field), and `deviations.txt` in each run directory with
every sentence and the request-shaping table (model × field). manifest.json and scores.json keep
every line as data."""

from __future__ import annotations

from collections import Counter
from pathlib import Path

from core.term import tables_text
from runner.atomic import atomic_open
from suites.base import Table, has_paper, protocol_of

FILE = "deviations.txt"
MAX_LINES = 7
"""Suite departures shown before the first call; the rest are counted (all of them: deviations.txt)."""


def shaping_table(shaping: dict[str, dict[str, str]]) -> Table:
    fields = list(dict.fromkeys(f for row in shaping.values() for f in row))
    return Table(
        title="request shaping: how each model's request departs from the suite's",
        columns=["model", *fields],
        rows=[[m, *(row.get(f, "") for f in fields)] for m, row in shaping.items()],
    )


def write(run_dir: Path, run_name: str, suite_devs: list[str], model_devs: list[str],
          shaping: dict[str, dict[str, str]], suite: str = "") -> Path:
    """deviations.txt: every sentence the run records, then the request-shaping table."""
    path = run_dir / FILE
    lines = [f"{run_name}: deviations from {protocol_of(suite)}", ""]
    lines += [f"- {d}" for d in suite_devs] or ["- none of the suite's own"]
    if model_devs:
        lines += ["", "per model:", *(f"- {d}" for d in model_devs)]
    text = "\n".join(lines) + "\n"
    if shaping:
        text += "\n" + tables_text([shaping_table(shaping)], width=120)
    with atomic_open(path, "w", encoding="utf-8") as f:
        f.write(text)
    return path


def of_manifest(man: dict, run_dir: Path | None) -> tuple[str, list[str], dict[str, dict[str, str]], Path | None,
                                                         str]:
    """(run name, the departures said one by one, request shaping, run dir) for `block`: the suite's own
    departures and any per-model sentence the shaping table does not hold (a judge alias, say)."""
    devs = list((man.get("protocol") or {}).get("deviations") or [])
    shaping = man.get("request_shaping") or {}
    per_model = set(man.get("model_deviations") or [])
    own = [d for d in devs if d not in per_model or not any(d.startswith(f"{m}: ") for m in shaping)]
    return str(man.get("run_name") or ""), own, shaping, run_dir, str(man.get("suite") or "")


def _fit(line: str, width: int) -> str:
    return line if len(line) <= width else line[: width - 1] + "…"


def block(runs: list[tuple[str, list[str], dict[str, dict[str, str]], Path | None, str]],
          width: int = 80) -> list[str]:
    """The lines said before the first call, for runs given as (name, suite departures, request
    shaping, run directory, suite): each departure once, with the runs it applies to."""
    by_text: dict[str, list[str]] = {}
    for name, devs, _, _, _ in runs:
        for d in devs:
            by_text.setdefault(d, []).append(name)
    shaped = {m: row for _, _, shaping, _, _ in runs for m, row in shaping.items()}
    if not by_text and not shaped:
        return []
    where = [str(d / FILE) for _, _, _, d, _ in runs if d is not None]
    path = where[0] if len(where) == 1 else f"{Path(where[0]).parent}/*/{FILE}" if where else FILE
    papers = {has_paper(s) for *_, s in runs}
    out = ["deviations from " + ("the papers' and suites' protocols:" if len(papers) > 1 else
                                 protocol_of(runs[0][4]) + ":")]
    for i, (text, names) in enumerate(by_text.items()):
        if i == MAX_LINES:
            out.append(f"  … {len(by_text) - MAX_LINES} more")
            break
        who = names[0] if len(names) == 1 else f"{len(names)} runs" if len(names) > 2 else ", ".join(names)
        out.append(_fit(f"  [{who}] {text}", width))
    if shaped:
        counts = Counter(f for row in shaped.values() for f in row)
        models = {m for _, _, _, _, _ in runs for m in shaped}
        parts = " · ".join(f"{f} {n}" for f, n in counts.most_common())
        out.append(_fit(f"  request shaping, {len(models)} models: {parts}", width))
    out.append(f"  every line: {path}")  # whole, to copy
    return out
