"""The per-sample viewer's data: one small JS file per (suite view, model) and one prompts file per
view, written beside index.html and loaded by the page only when asked for (a `<script>` tag, so it
works from file:// with no server).

First-pass prompts are not in results.jsonl (the hot path writes no prompt text; the data they are
built from is fingerprinted by content, so an edited file is another run); they are rebuilt here from
the suite and the run's spec, exactly as the runner built them, once per item. A follow-up's prompt
(critique, judge: it quotes an answer and the suite's template) is stored with its row and shown as
sent, never rebuilt from today's code. Images are written once
each, named by their SHA-256, under samples/img/. When the suite's data is not reachable here (a
`--data-dir` on another machine) the viewer still shows every response, with a note instead of the
prompt.

A record is one scored row (one per model and item, or per model, item and sample when the suite
scores samples one by one) with the calls behind it. Memory stays bounded: results are read in
(model, item, sample, pass) order one model at a time, and at most `max_items` records per model
are kept (a note says so when a model has more).
"""

from __future__ import annotations

import hashlib
import re
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import orjson

from report.costs import all_rows
from report.load import atomic_write, read_json

MAX_ITEMS = 5000
STATUSES = ("correct", "partial", "wrong", "unextractable", "reasoning_exhausted", "error", "unscored")


@dataclass
class ViewData:
    """What the page's index needs for one suite view."""

    slug: str
    label: str
    models: list[dict[str, Any]] = field(default_factory=list)
    """{name, display, file, n, counts: {status: n}, stages: [..]} per model, in leaderboard order."""
    prompts: str | None = None
    notes: list[str] = field(default_factory=list)


def status_of(score: Any, extracted: Any, error: Any) -> str:
    if error == "reasoning_exhausted":  # its own class: the model thought until the limit, no answer
        return "reasoning_exhausted"
    if error:
        return "error"
    if extracted is None or extracted == "":
        return "unextractable"
    if not isinstance(score, int | float) or isinstance(score, bool):
        return "unscored"
    return "correct" if score >= 1 else "partial" if score > 0 else "wrong"


def _compact_call(r: dict[str, Any]) -> dict[str, Any]:
    return {
        "n": r.get("sample"),
        "p": r.get("pass"),
        "t": r.get("text"),
        "c": r.get("cost_usd"),
        "l": r.get("latency_s"),
        "a": r.get("attempts"),
        "e": r.get("error"),
        "ek": r.get("error_kind"),
        "f": r.get("finish_reason"),
        "ch": bool(r.get("cached")),
        "v": r.get("via"),
        **({"q": r["prompt"]} if r.get("prompt") else {}),
    }


Scored = dict[str, dict[str, list[dict[str, Any]]]]


def _scored_index(path: Path, models: set[str], max_items: int) -> tuple[Scored, dict[str, int]]:
    """model → item → its scored rows (the first max_items items of each model); and items per model."""
    out: Scored = {}
    total: dict[str, int] = {}
    last_over: dict[str, str] = {}  # past the cap: the last item seen, so its samples count once (rows
    # come grouped by item, as the scorers write them; memory stays bounded on a 1M-row run)
    if not path.is_file():
        return out, total
    with path.open("rb") as f:
        for line in f:
            try:
                s = orjson.loads(line)
            except orjson.JSONDecodeError:
                continue
            m, item = s.get("model"), s.get("item")
            if m not in models or item is None:
                continue
            mine = out.setdefault(m, {})
            rows = mine.get(str(item))
            if rows is None:
                if last_over.get(m) == str(item):
                    continue
                total[m] = total.get(m, 0) + 1
                if len(mine) >= max_items:
                    last_over[m] = str(item)
                    continue
                rows = mine[str(item)] = []
            rows.append(s)
    return out, total


def _record(item: str, s: dict[str, Any] | None, calls: list[dict[str, Any]]) -> dict[str, Any]:
    """One viewer row: the scored row's fields plus its calls, per-sample extracts put on each call."""
    s = s or {}
    per = s.get("samples") if isinstance(s.get("samples"), list) else None
    stages = s.get("stages") if isinstance(s.get("stages"), list) else None
    for c in calls:
        n = c.get("n")
        if isinstance(n, int) and c.get("p") == "answer":
            if per is not None and n < len(per):
                c["x"] = per[n]
            if stages is not None and n < len(stages):
                c["sg"] = stages[n]
    errs = [c["e"] for c in calls if c.get("e")]
    error = s.get("error") or s.get("error_kind") or (errs[0] if calls and len(errs) == len(calls) else None)
    if s.get("error_kind") == "reasoning_exhausted" or (
        calls and error and all(c.get("ek") == "reasoning_exhausted" for c in calls)
    ):
        error = "reasoning_exhausted"
    stage = s.get("stage")
    if stage is None and stages:
        stage = next((x for x in stages if x), None)
    extracted = s.get("extracted")
    rec = {
        "i": item,
        "x": None if extracted is None else str(extracted),
        "g": None if s.get("gold") is None else str(s.get("gold")),
        "s": s.get("score"),
        "sg": stage,
        "st": status_of(s.get("score"), extracted, error) if s else ("error" if errs else "unscored"),
        "e": error if isinstance(error, str) else None,
        "c": sum(c["c"] for c in calls if isinstance(c.get("c"), int | float)) if calls else None,
        "l": max((c["l"] for c in calls if isinstance(c.get("l"), int | float)), default=None),
        "a": len(calls),
        "rt": sum(c["a"] - 1 for c in calls if isinstance(c.get("a"), int) and c["a"] > 1),
        "k": calls,
    }
    if "sample" in s:
        rec["n"] = s["sample"]
    return rec


Calls = dict[str, dict[str, list[dict[str, Any]]]]


def final_calls(results: Path, scored: Scored) -> Calls:
    """model → item → its final calls (the last success of each (sample, pass), else its last error:
    the rows the scorer read), for the kept items only. One pass over results.jsonl without an index
    of every row, so a 1M-row run costs memory only for the few thousand items the viewer shows."""
    out: dict[str, dict[str, dict[tuple, dict[str, Any]]]] = {}
    for r in all_rows(results):
        mine = scored.get(r.get("model"))  # type: ignore[arg-type]
        item = str(r.get("item"))
        if mine is None or item not in mine:
            continue
        calls = out.setdefault(r["model"], {}).setdefault(item, {})
        k = (r.get("sample") or 0, str(r.get("pass")))
        prev = calls.get(k)
        if prev is None or r.get("error") is None or prev.get("e") is not None:
            calls[k] = _compact_call(r)
    return {m: {i: [c[k] for k in sorted(c)] for i, c in d.items()} for m, d in out.items()}


def natural(item: str) -> tuple[Any, ...]:
    """Item ids in natural order: `-1, -2, -10`, not `-1, -10, -2`."""
    return tuple((0, int(p), "") if p.isdigit() else (1, 0, p) for p in re.split(r"(\d+)", item) if p)


def model_records(mine: dict[str, list[dict[str, Any]]], calls: dict[str, list[dict]]) -> list[dict]:
    """The viewer rows of one model, items in natural order: each kept scored row with the calls of its
    item (and sample). `a` is the number of calls, `rt` the retries they needed."""
    out = []
    for item, srows in mine.items():
        cs = calls.get(item, [])
        if len(srows) > 1 or "sample" in srows[0]:
            for s in srows:
                mine_ = [c for c in cs if c.get("n") == s.get("sample")] if "sample" in s else cs
                out.append(_record(item, s, mine_))
        else:
            out.append(_record(item, srows[0], cs))
    out.sort(key=lambda r: (natural(r["i"]), r.get("n") or 0))
    return out


def _js(key: str, data: Any) -> bytes:
    return b"EVS.put(" + orjson.dumps(key) + b"," + orjson.dumps(data) + b");\n"


def write_js(path: Path, key: str, data: Any) -> None:
    atomic_write(path, _js(key, data))


def _safe(name: str) -> str:
    return hashlib.sha256(name.encode()).hexdigest()[:16]


def write_view(out: Path, slug: str, label: str, entries: list, max_items: int = MAX_ITEMS) -> ViewData:
    """Write samples/<slug>/<model>.js for every model of one suite view (entries in leaderboard order)
    and samples/<slug>/prompts.js; returns the index the page embeds."""
    vd = ViewData(slug=slug, label=label)
    items: set[str] = set()
    by_dir: dict[Path, list] = {}
    for e in entries:
        by_dir.setdefault(e.run_dir, []).append(e)
    meta: dict[str, dict[str, Any]] = {}
    prompts = Prompts(out, entries[0].run_dir)
    for run_dir, es in by_dir.items():
        names = {e.model for e in es}
        scored, total = _scored_index(run_dir / "scored.jsonl", names, max_items)
        if not (run_dir / "scored.jsonl").is_file():
            vd.notes.append(f"{run_dir}: no scored.jsonl; score the run to see its samples")
        calls = final_calls(run_dir / "results.jsonl", scored)
        for model in names:
            recs = model_records(scored.get(model, {}), calls.pop(model, {}))
            prompts.follow_ups(model, recs)
            meta[model] = _write_model(out, slug, model, recs, items)
        for m, n in total.items():
            if n > max_items:
                vd.notes.append(f"{m}: the viewer shows the first {max_items:,} of its {n:,} items")
    for e in entries:
        if e.model in meta:
            vd.models.append({"name": e.model, "display": e.info.display_name, **meta[e.model]})
    vd.prompts, note = prompts.write(slug, items)
    if note:
        vd.notes.append(note)
    return vd


def _write_model(out: Path, slug: str, model: str, recs: list, items: set[str]) -> dict[str, Any]:
    rel = f"samples/{slug}/{_safe(model)}.js"
    write_js(out / rel, rel, recs)
    counts: dict[str, int] = {}
    stages: set[str] = set()
    for r in recs:
        items.add(r["i"])
        counts[r["st"]] = counts.get(r["st"], 0) + 1
        stages.update(str(x) for x in [r["sg"], *(c.get("sg") for c in r["k"])] if x is not None)
    return {"file": rel, "n": len(recs), "counts": counts, "stages": sorted(stages)}


# ---------------------------------------------------------------- prompts, rebuilt from the suite


def run_spec(run_dir: Path) -> Any:
    from suites.base import RunSpec

    return RunSpec.from_manifest(read_json(run_dir / "manifest.json").get("spec") or {})


def _parts(content: Any, out: Path, images: dict[str, str]) -> list[list[str]]:
    if isinstance(content, str):
        return [["t", content]]
    parts = []
    for p in content:
        if getattr(p, "type", None) == "text":
            parts.append(["t", p.text])
            continue
        sha = p.sha256()
        if sha not in images:
            ext = (p.media_type() or "image/png").split("/")[-1].replace("jpeg", "jpg")
            rel = f"samples/img/{sha[:32]}.{ext}"
            if not (out / rel).is_file():
                atomic_write(out / rel, p.read())
            images[sha] = rel
        parts.append(["i", images[sha]])
    return parts


class Prompts:
    """Every pass's prompt, rebuilt from the suite: the first pass's per item (samples/<slug>/prompts.js),
    and each follow-up pass's (critique, judge...) per call, from the suite's `follow_up` on the rows
    the run recorded (they hold the answer the follow-up quotes), put on the call as `pm`."""

    def __init__(self, out: Path, run_dir: Path) -> None:
        self.out, self.run_dir = out, run_dir
        self.images: dict[str, str] = {}
        self.first: dict[str, Any] = {}
        self.error: str | None = None
        try:
            from suites.base import get_suite

            self.spec = run_spec(run_dir)
            self.suite = get_suite(self.spec.suite)
            for req in self.suite.build(self.spec):
                self.first.setdefault(req.item, req)
        except Exception as e:  # data not reachable here: the responses are still worth showing
            self.error = f"{run_dir}: prompts not shown ({type(e).__name__}: {e})"

    def _msgs(self, req: Any) -> list[dict[str, Any]]:
        return [{"r": m.role, "p": _parts(m.content, self.out, self.images)} for m in req.messages]

    def follow_ups(self, model: str, recs: list[dict[str, Any]]) -> None:
        for rec in recs:  # a follow-up's prompt its row stored (as sent): shown as is, never rebuilt
            for c in rec["k"]:
                if c.get("q"):
                    c["pm"] = [{"r": m["role"], "p": [["t", m["text"]]]} for m in c.pop("q")]
        if self.error is not None:
            return
        for rec in recs:
            first = self.first.get(rec["i"])
            calls = {(c.get("n") or 0, c.get("p")): c for c in rec["k"]}
            if first is None or len(calls) == sum(p == "answer" for _, p in calls):
                continue
            for (n, p), c in list(calls.items()):
                if p != "answer":
                    continue
                one = first.decoding.model_copy(update={"n": 1})
                todo = [(first.model_copy(update={"model": model, "sample": n, "decoding": one}), c)]
                for _ in range(4):  # answer -> critique -> judge...: a few passes at most
                    nxt = []
                    for req, call in todo:
                        row = {
                            "model": model,
                            "item": rec["i"],
                            "sample": n,
                            "pass": call.get("p"),
                            "text": call.get("t"),
                            "error": call.get("e"),
                            "finish_reason": call.get("f"),
                        }
                        try:
                            follow = self.suite.follow_up(req, row, self.spec)
                        except Exception:
                            follow = []
                        for f in follow:
                            fc = calls.get((n, f.pass_))
                            if fc is not None:
                                if "pm" not in fc:  # (a prompt the row stored is the one sent)
                                    fc["pm"] = self._msgs(f)
                                nxt.append((f, fc))
                    todo = nxt

    def write(self, slug: str, items: set[str]) -> tuple[str | None, str | None]:
        """samples/<slug>/prompts.js: item → its first-pass messages."""
        if self.error is not None:
            return None, self.error
        prompts = {i: self._msgs(r) for i, r in self.first.items() if i in items}
        rel = f"samples/{slug}/prompts.js"
        write_js(self.out / rel, rel, prompts)
        return rel, None


def item_total(run_dir: Path) -> int | None:
    """How many items the suite has without --limit (None when its data is not reachable here)."""
    from dataclasses import replace

    try:
        from suites.base import get_suite

        spec = replace(run_spec(run_dir), limit=None)
        return len({req.item for req in get_suite(spec.suite).build(spec)})
    except Exception:
        return None


def partial_note(v: Any) -> str | None:
    """ "partial run (20 of 515 items)" when the view's runs used --limit below the suite's size."""
    limit = v.entries[0].spec.get("limit") if v.entries else None
    if not isinstance(limit, int):
        return None
    total = item_total(v.entries[0].run_dir)
    if total is None:
        return f"partial run (--limit {limit})"
    return f"partial run ({limit} of {total} items)" if limit < total else None
