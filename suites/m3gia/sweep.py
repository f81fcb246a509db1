"""M3GIA tables over several runs: Table 4 side by side (each model's cluster accuracies in a run with the
images and in its `--no-images` run, App. D.1). `evalsweep report` builds it from the runs' scores.json and
shows it in the report and on the terminal; its note carries both runs' recorded deviations."""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from typing import Any

from suites.base import Table
from suites.m3gia.data import CLUSTERS
from suites.m3gia.paper import TABLE4


def _diff(a: Any, b: Any) -> float | None:
    return b - a if isinstance(a, int | float) and isinstance(b, int | float) else None


def table4(runs: Sequence[Mapping[str, Any]]) -> Table | None:
    """Per model: with images, without images, and the change, per cluster and overall; then the paper's
    GPT-4v rows. None unless there is a run of each kind with a model in common. `runs`: {label, images,
    models: {model: scores.json entry}, deviations}."""
    with_img = [r for r in runs if r["images"]]
    without = [r for r in runs if not r["images"]]
    if not with_img or not without:
        return None
    a, b = with_img[0], without[0]
    rows: list[list[Any]] = []
    for m in sorted(set(a["models"]) & set(b["models"])):
        vals = []
        for label, r in (("with images", a), ("without images", b)):
            s = r["models"][m]
            vals.append([*((s.get("by_cluster") or {}).get(c) for c in CLUSTERS), s.get("accuracy")])
            rows.append([m, label, *vals[-1]])
        rows.append([m, "change", *(_diff(x, y) for x, y in zip(*vals, strict=True))])
    if not rows:
        return None
    p = {k: [v / 100 for v in vs] for k, vs in TABLE4.items()}
    rows += [["paper: GPT-4v", k, *vs] for k, vs in p.items()]
    rows.append(["paper: GPT-4v", "change", *(_diff(x, y) for x, y in zip(*p.values(), strict=True))])
    devs = [f"{r['label']}: " + "; ".join(r["deviations"]) for r in (a, b) if r.get("deviations")]
    return Table(
        title="m3gia: Table 4 side by side, accuracy by cluster with and without images",
        columns=["model", "images", *CLUSTERS, "Overall"],
        rows=rows,
        note=f"Runs {a['label']} (with images) and {b['label']} (--no-images); rows `paper: ...` are the paper's "
        "Table 4 (GPT-4v, percent / 100)."
        + ("\nDeviations from the paper's protocol: " + " | ".join(devs) + "." if devs else ""),
    )


def sweep_tables(runs: Sequence[Mapping[str, Any]]) -> list[Table]:
    t = table4(runs)
    return [t] if t is not None else []
