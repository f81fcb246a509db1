"""M3GIA tables over several runs: Table 4 side by side (each model's cluster accuracies in a run with the
images and in its `--no-images` run, App. D.1), paired only over the same questions (each model's scores.json
`questions`: languages, count per language, digest of the item ids). `evalsweep report` builds it from the
runs' scores.json and shows it in the report and on the terminal; its note carries both runs' recorded
deviations, or, when no pair covers the same questions, what differs."""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from typing import Any

from suites.base import Table
from suites.m3gia.data import CLUSTERS
from suites.m3gia.paper import TABLE4


def _diff(a: Any, b: Any) -> float | None:
    return b - a if isinstance(a, int | float) and isinstance(b, int | float) else None


def _gap(ours: Any, paper: Any) -> float | None:
    d = _diff(paper, ours)
    return None if d is None else round(d, 3)


def questions(run: Mapping[str, Any]) -> dict[str, Any] | None:
    """The question set a run's models were scored on (scores.json `questions`, the same for every model of a
    run); None when its scores.json predates it, or its models disagree."""
    sets = [s.get("questions") for s in run["models"].values()]
    return sets[0] if sets and all(isinstance(q, dict) and q == sets[0] for q in sets) else None


def differs(a: Mapping[str, Any], b: Mapping[str, Any]) -> str:
    """What sets two runs' questions apart, in words ("" when they are the same questions)."""
    qa, qb = questions(a), questions(b)
    if qa is None or qb is None:
        stale = [r["label"] for r, q in ((a, qa), (b, qb)) if q is None]
        return f"the question set of {', '.join(stale)} is not recorded (re-score it: `evalsweep score RUN`)"
    out = []
    if qa["languages"] != qb["languages"]:
        out.append(f"languages {','.join(qa['languages'])} vs {','.join(qb['languages'])}")
    counts = {lang: (qa["per_language"].get(lang, 0), qb["per_language"].get(lang, 0))
              for lang in qa["languages"] if lang in qb["languages"]}  # fmt: skip
    if any(x != y for x, y in counts.values()):
        out.append("questions per language " + ", ".join(f"{k} {x} vs {y}" for k, (x, y) in counts.items() if x != y))
    if not out and qa["digest"] != qb["digest"]:
        out.append("the same counts but other question ids (another data file)")
    return "; ".join(out)


def pair(runs: Sequence[Mapping[str, Any]]) -> tuple[tuple[Any, Any] | None, list[str]]:
    """The first (with images, --no-images) pair of runs over the same questions with a model in common, and
    why each other candidate pair was refused."""
    refused = []
    for a in (r for r in runs if r["images"]):
        for b in (r for r in runs if not r["images"]):
            if not set(a["models"]) & set(b["models"]):
                continue
            why = differs(a, b)
            if not why:
                return (a, b), refused
            refused.append(f"{a['label']} (with images) and {b['label']} (--no-images) not paired: {why}")
    return None, refused


def table4(runs: Sequence[Mapping[str, Any]]) -> Table | None:
    """Per model: with images, without images, and the change, per cluster and overall; then the paper's
    GPT-4v rows. Only runs over the same questions (languages and items) are paired: a pair that differs gives
    a table saying so instead, with each run's questions. None unless there is a run of each kind with a model
    in common. `runs`: {label, images, models: {model: scores.json entry}, deviations}."""
    found, refused = pair(runs)
    if found is None:
        return _refused(runs, refused) if refused else None
    a, b = found
    p = {k: [v / 100 for v in vs] for k, vs in TABLE4.items()}
    p["change"] = [_diff(x, y) for x, y in zip(*p.values(), strict=True)]
    rows: list[list[Any]] = []
    for m in sorted(set(a["models"]) & set(b["models"])):
        vals = []
        for label, r in (("with images", a), ("without images", b)):
            s = r["models"][m]
            vals.append([*((s.get("by_cluster") or {}).get(c) for c in CLUSTERS), s.get("accuracy")])
            rows.append([m, label, *vals[-1], p[label][-1], _gap(vals[-1][-1], p[label][-1])])
        change = [_diff(x, y) for x, y in zip(*vals, strict=True)]
        rows.append([m, "change", *change, p["change"][-1], _gap(change[-1], p["change"][-1])])
    if not rows:
        return None
    rows += [["paper: GPT-4v", k, *vs, None, None] for k, vs in p.items()]
    devs = [f"{r['label']}: " + "; ".join(r["deviations"]) for r in (a, b) if r.get("deviations")]
    return Table(
        title="m3gia: Table 4 side by side, accuracy by cluster with and without images",
        columns=["model", "images", *CLUSTERS, "Overall", "paper Overall", "gap"],
        rows=rows,
        note=f"Runs {a['label']} (with images) and {b['label']} (--no-images), over the same questions; rows "
        "`paper: ...` are the paper's Table 4 (GPT-4v, percent / 100); `paper Overall` is GPT-4v's of the same "
        "row (with images, without, change) and gap = ours − it (GPT-4v is Table 4's only model: for any other "
        "model the gap mixes the model's difference with the protocol's)."
        + ("".join(f"\n{x}." for x in refused))
        + ("\nDeviations from the paper's protocol: " + " | ".join(devs) + "." if devs else ""),
    )


def _refused(runs: Sequence[Mapping[str, Any]], refused: list[str]) -> Table:
    """No pair over the same questions: each run's questions, and why no side by side was made."""
    rows = []
    for r in runs:
        q = questions(r) or {}
        per = q.get("per_language") or {}
        rows.append([r["label"], "yes" if r["images"] else "no", ",".join(q.get("languages") or []) or "?",
                     sum(per.values()) if per else "?"])  # fmt: skip
    return Table(
        title="m3gia: Table 4 side by side not made: the runs cover different questions",
        columns=["run", "images", "languages", "questions"],
        rows=rows,
        note="A change from images to none is read only over the same questions. "
        + " ".join(f"{x}." for x in refused)
        + " Run the --no-images ablation with the same --languages and --limit as the run with images.",
    )


def sweep_tables(runs: Sequence[Mapping[str, Any]]) -> list[Table]:
    t = table4(runs)
    return [t] if t is not None else []
