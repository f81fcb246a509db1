"""The last screen of `run` and `sweep`: the outcome a person reads in the morning, in at most ~22 lines
of 80 columns, printed after everything else (tables, report) so a terminal's scroll-back never buries it.

Per model: rows ok (resumed ones included), error rows by kind, skipped rows and the cost of this
command's calls, from every run directory's manifest; then what to do next, where a plain rerun would pay again for the same
failure (an exhausted reasoning budget, a refused request) the setting to change instead; then where
the tables and the report are.
"""

from __future__ import annotations

from collections import Counter
from dataclasses import dataclass, field
from pathlib import Path

import orjson

from cli.live import abbreviate, fmt_cost
from runner.results import read_manifest

MODEL_ROWS = 10
"""Models listed by name; the rest (all ok) are one line."""
RETRY_KINDS = {"transient", "rate_limit", "internal", "quota"}
"""Error kinds a rerun retries with a chance of success (the call may go through next time)."""
FIX_FIRST = {
    "reasoning_exhausted": "raise its reasoning budget (thinking_budget or reasoning_effort) in the config",
    "context_exceeded": "the prompt + answer budget exceed its context window: lower max_tokens or drop it",
    "fatal": "the provider refused the request as sent: see log.txt, fix the model's config",
    "model_refused": "the provider refused the model (no such id, no access, or every request as sent: its "
                     "words are in log.txt): fix its id, key or config",
    "key_refused": "the provider refused one of its keys: fix that key (see log.txt)",
}
"""Error kinds a plain rerun repeats: the setting to change first."""


@dataclass
class Tally:
    ok: int = 0
    errors: Counter[str] = field(default_factory=Counter)
    skipped: int = 0
    skip_reason: str = ""
    cost: float = 0.0
    cost_known: bool = True

    @property
    def trouble(self) -> int:
        return sum(self.errors.values()) + self.skipped


def tally(run_dirs: list[Path]) -> dict[str, Tally]:
    """Per model, over every run directory: its rows by outcome, from the manifests' counts (what this
    command's calls ended as, and the rows it resumed), so the last screen costs no pass over the rows."""
    out: dict[str, Tally] = {}
    for d in run_dirs:
        try:
            counts = read_manifest(d).get("counts") or {}
        except Exception:  # a directory the run never created: said by the run itself
            continue
        for model, c in counts.items():
            t = out.setdefault(str(model), Tally())
            t.ok += int(c.get("ok", 0)) + int(c.get("resumed", 0))
            t.errors.update({str(k): int(n) for k, n in (c.get("kinds") or {}).items()})
            t.skipped += int(c.get("skipped", 0))
            t.skip_reason = t.skip_reason or str(c.get("skip_reason") or "")
            t.cost += float(c.get("cost_usd") or 0.0)
            t.cost_known &= bool(c.get("cost_known", True))
    return out


def _money(x: float, known: bool = True) -> str:
    return fmt_cost(x) + ("" if known else "+?")


def _kinds(c: Counter[str]) -> str:
    return ", ".join(f"{n:,} {k}" for k, n in c.most_common()) or "-"


def _status(run_dirs: list[Path]) -> str:
    states = []
    for d in run_dirs:
        try:
            states.append(str(read_manifest(d).get("status", "?")))
        except Exception:  # a directory the run never created: said by the run itself
            states.append("?")
    return ", ".join(f"{n} {s}" if len(states) > 1 else s for s, n in Counter(states).most_common())


def closing(
    run_dirs: list[Path],
    code: int,
    command: str,
    report: Path | None,
    tables_shown: bool,
    width: int = 80,
) -> list[str]:
    """The closing summary's lines, none wider than `width`."""
    t = tally(run_dirs)
    head = f"evalsweep: {_status(run_dirs)} (exit {code}) · {len(run_dirs)} run" + "s" * (len(run_dirs) != 1)
    lines = [head[:width], "─" * min(width, 78)]
    order = sorted(t, key=lambda m: (-t[m].trouble, m))
    named = [m for m in order if t[m].trouble][:MODEL_ROWS] or order[: min(MODEL_ROWS, len(order))]
    if len(order) - len(named) == 1:  # one left over: name it instead of "1 more"
        named = order
    rest_label = f"+ {len(order) - len(named)} more, all ok"
    name_w = max(12, min(28, max((len(m) for m in named), default=5)), len(rest_label) if len(order) > len(named) else 0)
    short, prefix = abbreviate(named, name_w)
    kind_w = max(6, width - name_w - 8 - 8 - 10 - 4)
    lines.append(f"{prefix + 'model':<{name_w}} {'ok':>8} {'errors':<{kind_w}} {'skipped':>8} {'cost':>9}")
    for m in named:
        x = t[m]
        kinds = _kinds(x.errors)
        if len(kinds) > kind_w:
            kinds = kinds[: kind_w - 1] + "…"
        lines.append(
            f"{short[m]:<{name_w}} {x.ok:>8,} {kinds:<{kind_w}} {x.skipped or '-':>8} "
            f"{_money(x.cost, x.cost_known):>9}"
        )
    rest = [m for m in order if m not in named]
    if rest:
        cost = sum(t[m].cost for m in rest)
        ok = sum(t[m].ok for m in rest)
        lines.append(f"{rest_label:<{name_w}} {ok:>8,} {'-':<{kind_w}} {'-':>8} {_money(cost):>9}")
    errs: Counter[str] = sum((x.errors for x in t.values()), Counter())
    total = Tally(sum(x.ok for x in t.values()), errs, sum(x.skipped for x in t.values()), "",
                  sum(x.cost for x in t.values()), all(x.cost_known for x in t.values()))
    lines.append(
        f"{'total':<{name_w}} {total.ok:>8,} {sum(errs.values()) or '-':<{kind_w}} {total.skipped or '-':>8} "
        f"{_money(total.cost, total.cost_known):>9}"
    )
    lines += _unreadable(run_dirs, width)
    lines += _next(t, command, width)
    lines += _where(run_dirs, report, tables_shown, width)
    return lines


def _unreadable(run_dirs: list[Path], width: int) -> list[str]:
    """Models most of whose answers no extraction rule could read (scores.json `unreadable_models`):
    their scores are the rules' failure as much as the model's."""
    found = []
    for d in run_dirs:
        try:
            got = orjson.loads((d / "scores.json").read_bytes()).get("unreadable_models") or {}
        except (OSError, orjson.JSONDecodeError, AttributeError):
            continue
        found += [f"{m} {share:.0%}" + (f" ({d.name})" if len(run_dirs) > 1 else "") for m, share in got.items()]
    if not found:
        return []
    who = ", ".join(found[:4]) + (f" and {len(found) - 4} more" if len(found) > 4 else "")
    return _wrap([f"• answers no rule could read: {who}; they score as wrong: check the prompt and the "
                  "extraction (scored.jsonl) before reading these scores"], width)


def _next(t: dict[str, Tally], command: str, width: int) -> list[str]:
    """What to do next: fix-first settings before a rerun, then the rerun itself."""
    out: list[str] = []
    for kind, fix in FIX_FIRST.items():
        models = [m for m in sorted(t) if t[m].errors.get(kind)]
        if models:
            n = sum(t[m].errors[kind] for m in models)
            who = ", ".join(models[:3]) + (f" and {len(models) - 3} more" if len(models) > 3 else "")
            out.append(f"• {n:,} {kind} ({who}): {fix}; a plain rerun repeats them")
    retry = sum(n for x in t.values() for k, n in x.errors.items() if k not in FIX_FIRST)
    skipped = sum(x.skipped for x in t.values())
    if retry or skipped:
        what = " and ".join(
            s for s in (f"{retry:,} failed calls" if retry else "", f"{skipped:,} skipped" if skipped else "") if s
        )
        reason = next((x.skip_reason for x in t.values() if x.skip_reason), "")
        if reason:
            out.append(f"• skipped: {reason}"[:width])
        out.append(f"• {'then ' if out else ''}rerun to retry the {what} (finished rows are kept):")
        return ["next:", *_wrap(out, width), f"    {command}"]  # whole, to copy
    if not out:
        out.append("• nothing to retry: every planned row is in")
    return ["next:", *_wrap(out, width)]


def _where(run_dirs: list[Path], report: Path | None, tables_shown: bool, width: int) -> list[str]:
    """Where the tables and the report are: paths whole, to copy, however long."""
    parents = {d.parent for d in run_dirs}
    if len(run_dirs) == 1:
        tables = f"{run_dirs[0] / 'tables.txt'}"
    elif len(parents) == 1:
        tables = f"{parents.pop() / '*' / 'tables.txt'}"
    else:
        tables = f"tables.txt in each of the {len(run_dirs)} run directories"
    how = "" if tables_shown else " (--tables prints them)"
    return [f"tables{how}: {tables}",
            f"report: {report}" if report is not None else "report: not written (--no-score)"]


def _wrap(lines: list[str], width: int) -> list[str]:
    """Lines longer than `width` broken at spaces, continuations indented."""
    out = []
    for line in lines:
        while len(line) > width and " " in line[:width].rstrip():
            cut = line.rfind(" ", 0, width)
            if cut <= 4:
                break
            out.append(line[:cut])
            line = "    " + line[cut + 1 :]
        out.append(line)
    return out
