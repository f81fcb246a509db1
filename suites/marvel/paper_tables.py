"""The paper's Tables 4, 5 and 6 in its orientation (rows: patterns, task configurations, fine-question
categories; columns: Human, then models), our models beside the paper's columns, and the paper's rows for
Tables 2 and 7. Paper values are marked `paper:`; † as the paper marks them (inductive bias)."""

from __future__ import annotations

from typing import Any

from suites.base import Table
from suites.marvel import paper
from suites.marvel.categories import counts
from suites.marvel.data import PATTERNS, REFERENCE, load

DASH = "-"
ZERO_SHOT_QUESTIONS = ("fine", "perc_c", "perc_cf")
"""Table 2's columns a few-shot or one-by-one run is still compared with: their questions stay zero-shot."""
Prompting = tuple[int, str, str]
"""(shots, demos, panels) of the run: which of the paper's tables its AVR figures compare with."""
ZERO_SHOT: Prompting = (0, "same", "whole")


def pct(x: float | None) -> str:
    return DASH if x is None else f"{100.0 * x:.2f}"


def paper_name(m: str, dagger: bool = True) -> str:
    """`paper: model`, with † where Tables 2, 4 and 5 print it (Tables 6 and 7 print none)."""
    return f"paper: {m}" + (" †" if dagger and m in paper.BIASED else "")


def head(model: str, s: dict[str, Any]) -> str:
    """A model as a column head: no spaces, so the terminal sizes the column by its whole head."""
    return (f"{model}[BIASED]" if s.get("biased") else model).replace(" ", "")


def paper_head(m: str, dagger: bool = True) -> str:
    return paper_name(m, dagger).replace(" ", "")


def human_avr() -> str:
    """Table 2's human AVR with its standard deviation (§6: "68.86%, with a standard deviation of 9.74")."""
    return f"{pct(REFERENCE['human']['avr'])} ± {paper.HUMAN['avr_sd']:.2f}"


def table2_rows(cols: list[str], prompting: Prompting) -> tuple[list[list[Any]], str]:
    """The paper's rows for our instance/group columns (`paper: model`), and which table they are from.
    Few-shot and one-by-one runs get their AVR column from Tables 8-11 (their models only) and Table 2's fine,
    PercC and PercC&F, since only the AVR question changes (the fine and coarse questions stay zero-shot, as in
    Table 2); PercC&F&AVR holds the AVR answer: Table 2's only for zero-shot runs. † only beside Table 2's
    values: Tables 8-11 print none (§6: "The inductive bias is mitigated in few-shot settings")."""
    source, avr = paper.avr_column(*prompting)
    rows = []
    for m in paper.MODELS:
        vals = dict(zip(paper.TABLE2_COLS, paper.TABLE2[m], strict=True))
        if prompting != ZERO_SHOT:
            vals = {**{c: vals[c] for c in ZERO_SHOT_QUESTIONS}, "avr": avr.get(m)} if m in avr else {}
        if any(vals.get(c) is not None for c in cols):
            rows.append([paper_name(m, prompting == ZERO_SHOT), DASH, *(_p(vals.get(c)) for c in cols)])
    return rows, source


def _p(x: float | None) -> str:
    return DASH if x is None else f"{x:.2f}"


def gap(ours: float | None, paper_pct: float | None) -> str:
    """Ours (a fraction) − the paper's value (a percentage), in points."""
    return DASH if ours is None or paper_pct is None else f"{100.0 * ours - paper_pct:+.2f}"


def vs(model: str, among: tuple[str, ...] | None = None) -> str:
    """The paper's model a row of ours is compared with: the same model, or `GPT-4o (ref.)`."""
    found = paper.paper_model(model, among)
    return DASH if found is None else found[0] + ("" if found[1] else " (ref.)")


GAP_NOTE = (
    "gap = ours − the paper's value (points) of the model named under `vs paper` (or below, for gap:<model>): "
    "the same model where the name names one of the paper's, which leaves the protocol's and the version's "
    "difference; else `GPT-4o (ref.)`, the paper's strongest, which mixes the model's difference with the "
    "protocol's"
)


def with_gaps(
    ms: list[tuple[str, dict[str, Any]]], key: str, values: dict[str, dict[str, float]], cols: tuple[str, ...]
) -> tuple[list[str], list[list[str]], str]:
    """Row-per-category tables: after each of our model columns, its gap (`gap:model`) to the paper's column
    of the model it is compared with, which sits on the same row. Returns the heads, per model the gap cells
    in row order, and the note naming each model's paper column."""
    heads, cells, against = [], [], []
    rows = list(values)
    for m, s in ms:
        found = paper.paper_model(m, cols)
        heads.append(f"gap:{head(m, s)}")
        against.append(f"{m} vs {vs(m, cols)}")
        cells.append([gap((s.get(key) or {}).get(r), values[r].get(found[0]) if found else None) for r in rows])
    return heads, cells, f"{GAP_NOTE}; gap:<model> against paper:<model> of: " + ", ".join(against)


def _interleave(ms: list[tuple[str, dict[str, Any]]], ours: list[str], gaps: list[str] | None) -> list[str]:
    """Our models' cells, each followed by its gap when there are gaps."""
    return [x for i, c in enumerate(ours) for x in ((c, gaps[i]) if gaps is not None else (c,))]


def _cells(ms: list[tuple[str, dict[str, Any]]], key: str, row: str) -> list[str]:
    return [pct((s.get(key) or {}).get(row)) for _, s in ms]


def _paper_cells(values: dict[str, dict[str, float]], row: str, cols: tuple[str, ...]) -> list[str]:
    return [_p(values.get(row, {}).get(c)) for c in cols]


def by_pattern_source(prompting: Prompting) -> tuple[dict[str, dict[str, float]], tuple[str, ...], str]:
    """The paper's per-pattern values for the run's prompting: Table 4 (zero-shot), Table 12's one- or two-shot
    columns (same-pattern demos, whole image, as Table 12 ran) with Table 4's Human, else Human only."""
    shots, demos, panels = prompting
    if prompting == ZERO_SHOT:
        return paper.TABLE4, paper.MODELS, ""
    if shots in paper.TABLE12 and demos == "same" and panels == "whole":
        values = {p: {"Human": paper.TABLE4[p]["Human"], **paper.TABLE12[shots][p]} for p in paper.PATTERN_ROWS}
        return values, paper.TABLE12_COLS, paper.TABLE12_NOTE.format(k=("one", "two")[shots - 1])
    return paper.TABLE4, (), ("the paper's per-pattern model columns are zero-shot (Table 4) or with same-pattern "
                              "demos (Table 12): only its Human column shown")


def table4(ms: list[tuple[str, dict[str, Any]]], note: str, prompting: Prompting) -> Table:
    """Table 4: AVR by pattern, rows as the paper prints them, our models then the paper's Human and models (a
    few-shot run: Table 12's models of its shots)."""
    values, models, source = by_pattern_source(prompting)
    cols = ("Human", *models)
    n = {p: sum(q.pattern == p for q in load()) for p in PATTERNS}
    heads, gaps, gap_note = with_gaps(ms, "by_pattern", values, models) if models else ([], [], "")
    return Table(
        title=(f"MARVEL Table 12: AVR accuracy by pattern, {('one', 'two')[prompting[0] - 1]}-shot (%)"
               if models and prompting != ZERO_SHOT else "MARVEL Table 4: AVR accuracy by pattern (%)"),
        columns=["pattern", "puzzles", *_interleave(ms, [head(m, s) for m, s in ms], heads or None), "random",
                 *(paper_head(c, prompting == ZERO_SHOT) for c in cols)],  # fmt: skip
        rows=[[p, n[p], *_interleave(ms, _cells(ms, "by_pattern", p), [g[i] for g in gaps] if gaps else None),
               pct(REFERENCE["random"]["avr"]), *_paper_cells(values, p, cols)]
              for i, p in enumerate(paper.PATTERN_ROWS)],  # fmt: skip
        note=note + ("; the paper's Quantities row fits 165 puzzles and its Mathematical row 240 (the data: 240 and "
                     "165), its model values are printed here as labelled (README: the paper's numbers)"
                     if prompting == ZERO_SHOT else f"; {source}")
        + (f"; {gap_note}" if gaps else ""),
    )


def table5(ms: list[tuple[str, dict[str, Any]]], note: str, prompting: Prompting) -> Table:
    """Table 5: AVR by task configuration in the paper's order and labels (the data's "3D" = Reassembling)."""
    cols = paper.TABLE4_COLS if prompting == ZERO_SHOT else ("Human",)
    data_label = {v: k for k, v in paper.CONFIGURATION_LABEL.items()}
    n = {c: sum(q.configuration == data_label[c] for q in load()) for c in paper.CONFIGURATION_ROWS}
    renamed = [(m, {**s, "by_configuration": {paper.CONFIGURATION_LABEL.get(k, k): v
                                              for k, v in (s.get("by_configuration") or {}).items()}})
               for m, s in ms]  # fmt: skip
    heads, gaps, gap_note = (with_gaps(renamed, "by_configuration", paper.TABLE5, paper.MODELS)
                             if prompting == ZERO_SHOT else ([], [], ""))  # fmt: skip
    return Table(
        title="MARVEL Table 5: AVR accuracy by task configuration (%)",
        columns=["task format", "puzzles", *_interleave(ms, [head(m, s) for m, s in ms], heads or None), "random",
                 *(paper_head(c) for c in cols)],  # fmt: skip
        rows=[[c, n[c], *_interleave(ms, _cells(ms, "by_configuration", data_label[c]),
                                     [g[i] for g in gaps] if gaps else None),
               pct(REFERENCE["random"]["avr"]), *_paper_cells(paper.TABLE5, c, cols)]
              for i, c in enumerate(paper.CONFIGURATION_ROWS)],  # fmt: skip
        note=note + "; Reassembling = the data's task_configuration \"3D\""
        + (f"; {gap_note}" if gaps else "")
        + ("" if prompting == ZERO_SHOT else "; the paper's model columns are zero-shot: only its Human column shown"),
    )


def table6(ms: list[tuple[str, dict[str, Any]]], note: str) -> Table:
    """Table 6: fine-grained accuracy by question category, our classified counts beside the paper's implied ones."""
    ours = counts(load())
    heads, gaps, gap_note = with_gaps(ms, "by_fine_category", paper.TABLE6, paper.TABLE6_COLS)
    return Table(
        title="MARVEL Table 6: fine-grained perception accuracy by question category (%)",
        columns=["category", "questions", "paper:questions", *_interleave(ms, [head(m, s) for m, s in ms], heads),
                 "random", *(paper_head(c, False) for c in paper.TABLE6_COLS)],  # fmt: skip
        rows=[[c, ours[c], paper.CATEGORY_COUNTS[c], *_interleave(ms, _cells(ms, "by_fine_category", c),
                                                                  [g[i] for g in gaps]),
               pct(REFERENCE["random"]["fine"]), *_paper_cells(paper.TABLE6, c, paper.TABLE6_COLS)]
              for i, c in enumerate(paper.CATEGORIES)],  # fmt: skip
        note=note + "; categories are ours, by rules (categories.py: the label file has none); `paper:questions` = "
        f"the counts Table 6's values imply; {gpt4o_note()}; the paper's columns are zero-shot; the gaps compare "
        f"categories whose counts differ from ours (category rules); {gap_note}",
    )


def gpt4o_note() -> str:
    """Where Table 6's GPT-4o column departs from the implied counts (paper.TABLE6_GPT4O_FITS), said under it."""
    moved = {row: fit for row, fit in paper.TABLE6_GPT4O_FITS.items() if row != fit}
    kept = [row for row, fit in paper.TABLE6_GPT4O_FITS.items() if row == fit]
    return (
        f"the paper's GPT-4o values fit their own row's count only for {', '.join(kept)}; its "
        + ", ".join(f"{row} value fits {fit}'s count" for row, fit in moved.items())
        + " (then the five add up to its Table 2 fine): printed as labelled"
    )


def table7_rows() -> list[list[Any]]:
    """Table 7's pattern-classification accuracy per model, in the pattern table's layout."""
    return [[paper_name(m, False), DASH, _p(v), DASH, DASH, DASH, DASH, *(DASH for _ in PATTERNS)]
            for m, v in paper.TABLE7.items()]  # fmt: skip
