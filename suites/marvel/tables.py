"""Report tables (accuracies in %): models beside the random/human reference rows.

A model whose AVR predictions are significantly imbalanced is marked `[BIASED]` in every table,
because its AVR accuracy then reflects an output preference rather than reasoning.
"""

from __future__ import annotations

from collections import Counter
from typing import Any

from suites.base import Table, ranked
from suites.marvel import paper
from suites.marvel.data import CONFIGURATIONS, PATTERNS, REFERENCE
from suites.marvel.paper_tables import (
    GAP_NOTE,
    ZERO_SHOT,
    ZERO_SHOT_QUESTIONS,
    Prompting,
    gap,
    human_avr,
    table2_rows,
    table4,
    table5,
    table6,
    table7_rows,
    vs,
)
from suites.stats import ci_method

DASH = "-"
INSTANCE = ["avr", "fine", "coarse_context", "coarse_choices", "coarse_whole"]
GROUP = ["perc_c", "perc_cf", "perc_cf_avr"]


def pct(x: float | None) -> str:
    return DASH if x is None else f"{100.0 * x:.2f}"


def label(model: str, s: dict[str, Any]) -> str:
    return f"{model} [BIASED]" if s.get("biased") else model


def _note(models: dict[str, dict[str, Any]], alpha: float) -> str:
    flagged = [m for m, s in models.items() if s.get("biased")]
    if not flagged:
        return f"no model's AVR choices differ from uniform at p < {alpha:g} (chi-square)"
    return (
        f"[BIASED] = AVR predictions significantly imbalanced over choices 1-4 (chi-square vs uniform, "
        f"p < {alpha:g}): AVR accuracy reflects a bias, not reasoning ({', '.join(sorted(flagged))})"
    )


def _reference(cols: list[str], prompting: Prompting) -> list[list[Any]]:
    """Random and human rows (Table 2: the human AVR with its SD), then the paper's model rows."""
    rows = [[name, DASH, *(human_avr() if (name, c) == ("human", "avr") else pct(ref.get(c)) for c in cols)]
            for name, ref in REFERENCE.items()]  # fmt: skip
    return rows + table2_rows(cols, prompting)[0]


def tables(
    models: dict[str, dict[str, Any]],
    kinds: tuple[str, ...],
    gold: list[Any],
    alpha: float,
    prompting: Prompting = ZERO_SHOT,
) -> list[Table]:
    note = _note(models, alpha)
    source = table2_rows(["avr"], prompting)[1]
    ms = [(m, models[m]) for m in ranked(models, "avr" if "avr" in kinds else _first(models, kinds))]
    paper_note = (
        f"; `paper:` rows are the paper's {source}"
        + (" (Gemini's on its left set)" if prompting == ZERO_SHOT else
           " (AVR) and Table 2 (fine, PercC, PercC&F: those questions stay zero-shot here, as there; Gemini's on "
           "its left set)")
        + ("; † as the paper marks inductive bias" if prompting == ZERO_SHOT else "")
    )
    main = []
    for what, cols in (("instance", INSTANCE), ("group", GROUP)):
        compared = _compared(what, prompting)
        among = tuple(compared[0][1]) if compared else ()
        extra = [h for c, _ in compared for h in (f"paper {c}", f"gap {c}")]
        main.append(
            Table(
                title=f"MARVEL: {what} accuracy (%)",
                columns=["model", "puzzles", *cols, "bias p", *(["vs paper", *extra] if compared else [])],
                rows=[[label(m, s), s["n_puzzles"], *(pct(s[c]) for c in cols), _p(s),
                       *_beside(m, s, compared, among)] for m, s in ms]  # fmt: skip
                + [[*r, DASH, *(DASH for _ in (["vs paper", *extra] if compared else []))]
                   for r in _reference(cols, prompting)],  # fmt: skip
                note=note
                + paper_note
                + (f"; {GAP_NOTE}" if compared else ""),
                key=("avr",) if what == "instance" else ("perc_cf_avr",),
            )
        )
    n_max = max((s["n_puzzles"] for _, s in ms), default=0)
    main.append(
        Table(
            title="MARVEL: 95% CIs of the accuracies (%)",
            columns=["model", *(c for c in (*INSTANCE, *GROUP) if any(s.get(f"ci95_{c}") for _, s in ms))],
            rows=[
                [
                    label(m, s),
                    *(
                        pct_ci(s.get(f"ci95_{c}"))
                        for c in (*INSTANCE, *GROUP)
                        if any(x.get(f"ci95_{c}") for _, x in ms)
                    ),
                ]
                for m, s in ms
            ],
            note=ci_method(n_max) + " (puzzles; a puzzle's value is its mean over samples)",
        )
    )
    left = [(m, s["left_set"]) for m, s in ms if s.get("left_set")]
    if left:
        cols = [c for c in INSTANCE if c in left[0][1]]
        main.append(
            Table(
                title="MARVEL: accuracy on the left set (%): refusals excluded, as the paper reports",
                columns=["model", *cols, *(f"{c} refused" for c in cols)],
                rows=[[label(m, models[m]), *(pct(v[c]) for c in cols), *(v[f"{c}_refused"] for c in cols)]
                      for m, v in left],  # fmt: skip
                note="A refusal: a response that declines to answer and gives nothing the rules or judge can read, "
                "or the provider's block of the request (content_filter); blocks per model: "
                + ", ".join(f"{m} {sum(v.get(f'{c}_blocked', 0) for c in cols)}" for m, v in left) + ".",
            )
        )
    if "fine" in kinds:
        main.append(table6(ms, note))
    if "avr" not in kinds:
        return main
    by_pattern, by_cfg = table4(ms, note, prompting), table5(ms, note, prompting)
    cross = Table(
        title="MARVEL: AVR accuracy by pattern x configuration (%)",
        columns=["model", "pattern", *CONFIGURATIONS],
        rows=[
            [label(m, s), p, *(pct(row.get(c)) for c in CONFIGURATIONS)]
            for m, s in ms
            for p, row in s["by_pattern_configuration"].items()
        ],
        note=note + "; '-' = no puzzles of that pattern in that configuration",
    )
    g = Counter(gold)
    dist = Table(
        title="MARVEL: AVR output distribution over choices (%) and chi-square test against uniform",
        columns=["model", "1", "2", "3", "4", "no answer", "chi2", "p", "biased"],
        rows=[
            [
                label(m, s),
                *(pct(s["choice_distribution"][c]) for c in "1234"),
                s["choice_none"],
                _r(s["chi2"]),
                _p(s),
                "yes" if s["biased"] else "no",
            ]  # fmt: skip
            for m, s in ms
        ]
        + [
            [
                "gold answers",
                *(pct(g[c] / len(gold) if gold else None) for c in (1, 2, 3, 4)),
                DASH,
                DASH,
                DASH,
                DASH,
            ]
        ],
        note=note,
    )
    return [*main, by_pattern, by_cfg, cross, dist]


def pattern_table(models: dict[str, dict[str, Any]]) -> Table:
    ms = [(m, models[m]) for m in ranked(models, "pattern")]
    t7 = {"pattern": paper.TABLE7}
    return Table(
        title="MARVEL: pattern classification accuracy (%), overall and per true pattern",
        columns=["model", "n", "pattern", "vs paper", "paper pattern", "gap pattern", "95% CI", *PATTERNS],
        rows=[
            [
                m,
                s["n_rows"],
                pct(s["pattern"]),
                *_beside(m, s, [("pattern", t7["pattern"])], tuple(paper.TABLE7)),
                pct_ci(s.get("ci95")),
                *(pct(s["by_pattern"].get(p)) for p in PATTERNS),
            ]
            for m, s in ms
        ]
        + [["random", DASH, pct(REFERENCE["random"]["pattern"]), DASH, DASH, DASH, DASH,
            *(pct(1 / 6) for _ in PATTERNS)]]  # fmt: skip
        + table7_rows(),
        note=ci_method(max((s["n"] for _, s in ms), default=0)) + " (puzzles); `paper:` rows: Table 7 (all 770 "
        f"puzzles; the paper reports no per-pattern figures); {GAP_NOTE}",
        key=("pattern", "95% CI"),
    )


def _compared(what: str, prompting: Prompting) -> list[tuple[str, dict[str, float]]]:
    """The columns of a main table with a paper value to set beside ours, and the paper's values per model:
    instance AVR (Table 2, or Tables 8-11 for the run's prompting) and fine (Table 2); group PercC, PercC&F
    (Table 2) and PercC&F&AVR (Table 2, zero-shot runs: it holds the AVR answer). A few-shot or one-by-one run
    changes the AVR question only, so its fine and coarse answers are Table 2's setting."""
    t2 = {c: {m: v[i] for m, v in paper.TABLE2.items()} for i, c in enumerate(paper.TABLE2_COLS)}
    if what == "instance":
        return [("avr", paper.avr_column(*prompting)[1]), ("fine", t2["fine"])]
    return [(c, t2[c]) for c in GROUP if prompting == ZERO_SHOT or c in ZERO_SHOT_QUESTIONS]


def _beside(m: str, s: dict[str, Any], compared: list[tuple[str, dict[str, float]]], among: tuple[str, ...]) -> list[str]:
    """`vs paper`, then per compared column the paper's value and our gap to it."""
    if not compared:
        return []
    found = paper.paper_model(m, among)
    out = [vs(m, among)]
    for c, values in compared:
        v = values.get(found[0]) if found else None
        out += [DASH if v is None else f"{v:.2f}", gap(s.get(c), v)]
    return out


def pct_ci(ci: list[float] | None) -> str:
    return DASH if not ci else f"[{100 * ci[0]:.1f}, {100 * ci[1]:.1f}]"


def _first(models: dict[str, dict[str, Any]], kinds: tuple[str, ...]) -> str:
    """The first instance metric the run asked for (its ranking key when AVR was not asked)."""
    return next((k.replace("-", "_") for k in kinds), "avr")


def _p(s: dict[str, Any]) -> str:
    return DASH if s.get("chi2_p") is None else f"{s['chi2_p']:.2g}"


def _r(x: float | None) -> str:
    return DASH if x is None else f"{x:.2f}"
