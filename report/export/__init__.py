"""Export a scored run to the formats other tools read (inspect_ai `.eval` logs, Every Eval Ever, the
Hugging Face Hub's `.eval_results/`). Each format is an optional extra, imported only when asked for.

The run is read once through the report's loaders (`report.load.load_run`: models, headline metric,
scores.json, measured cost) and `runner.results.final_rows` (the rows the scorer read): one
`ExportRun` with, per model, one `ExportSample` per scored row and its calls, that every writer shares.
"""

from __future__ import annotations

from collections.abc import Callable
from pathlib import Path
from typing import Any

import orjson

from report.export.samples import COUNTS, ExportRun, ExportSample, slug  # noqa: F401  (re-exported)
from report.load import ReportError, load_run, read_json

FORMATS = ("inspect", "every-eval-ever", "hf")
def _scored_rows(path: Path) -> dict[str, dict[str, list[dict[str, Any]]]]:
    if not path.is_file():
        raise ReportError(f"{path}: missing; score the run first: `evalsweep score {path.parent}`")
    out: dict[str, dict[str, list[dict[str, Any]]]] = {}
    with path.open("rb") as f:
        for lineno, line in enumerate(f, 1):
            if not line.strip():
                continue
            try:
                s = orjson.loads(line)
                out.setdefault(str(s["model"]), {}).setdefault(str(s["item"]), []).append(s)
            except (orjson.JSONDecodeError, KeyError, TypeError) as e:
                raise ReportError(f"{path}:{lineno}: not a scored row ({type(e).__name__}: {e})") from None
    return out


def _prompts(run_dir: Path) -> tuple[dict[str, list[dict[str, str]]], str | None]:
    """The first pass's prompt per item, rebuilt from the suite as the report's viewer does (images are
    written as `[image]`); the data may live on another machine, then there are none, with a note."""
    from core.types import text_of
    from report.samples import run_spec

    try:
        from suites.base import get_suite

        spec = run_spec(run_dir)
        out: dict[str, list[dict[str, str]]] = {}
        for req in get_suite(spec.suite).build(spec):
            if req.item not in out:
                out[req.item] = [
                    {
                        "role": m.role,
                        "content": m.content
                        if isinstance(m.content, str)
                        else text_of(m.content) + " [image]" * (len(m.content) > 1),
                    }
                    for m in req.messages
                ]
        return out, None
    except Exception as e:  # data not reachable here: responses and scores are still worth exporting
        return {}, f"{run_dir}: prompts not exported ({type(e).__name__}: {e})"


def load_export(run_dir: Path, with_prompts: bool = True) -> ExportRun:
    from runner.results import RESULTS, final_rows

    loaded = load_run(run_dir)
    manifest = read_json(run_dir / "manifest.json")
    scored = _scored_rows(run_dir / "scored.jsonl")
    calls: dict[tuple[str, str], list[dict[str, Any]]] = {}
    for r in final_rows(run_dir / RESULTS):
        calls.setdefault((str(r.get("model")), str(r.get("item"))), []).append(r)
    samples: dict[str, list[ExportSample]] = {}
    for e in loaded.entries:
        mine = samples[e.model] = []
        for item, rows in scored.get(e.model, {}).items():
            item_calls = calls.get((e.model, item), [])
            for s in rows:
                n = s.get("sample") if isinstance(s.get("sample"), int) else None
                mine_calls = [c for c in item_calls if n is None or (c.get("sample") or 0) == n]
                mine.append(ExportSample(item=item, sample=n, scored=s, calls=mine_calls))
    suite = loaded.entries[0].suite if loaded.entries else str(manifest.get("suite"))
    prompts, note = _prompts(run_dir) if with_prompts else ({}, None)
    return ExportRun(run_dir, suite, manifest, loaded.entries, samples, prompts, note)


def writer(fmt: str) -> Callable[..., list[Path]]:
    if fmt == "inspect":
        from report.export.inspect import write_inspect

        return write_inspect
    if fmt == "every-eval-ever":
        from report.export.eee import write_eee

        return write_eee
    if fmt == "hf":
        from report.export.hf import write_hf

        return write_hf
    raise ReportError(f"--format {fmt!r}: one of {', '.join(FORMATS)}")


def export(run_dir: Path, fmt: str, out: Path, dataset_id: str | None = None) -> list[Path]:
    """Write `run_dir` in format `fmt` under `out`; returns the files written."""
    write = writer(fmt)
    run = load_export(run_dir)
    out.mkdir(parents=True, exist_ok=True)
    return write(run, out, dataset_id) if fmt == "hf" else write(run, out)


def cli_main(argv: list[str]) -> int:
    import argparse

    p = argparse.ArgumentParser(
        prog="evalsweep export",
        description="Write a scored run in another tool's format: inspect (.eval logs for `inspect view`), "
        "every-eval-ever (EvalEval schema), hf (Hugging Face .eval_results/ YAML + samples parquet).",
    )
    p.add_argument("run_dir", type=Path, help="a scored run directory")
    p.add_argument("--format", required=True, choices=FORMATS, help="the format to write")
    p.add_argument("--out", type=Path, help="default: RUN_DIR/export/FORMAT")
    p.add_argument("--dataset-id", help="hf: the benchmark's Hub dataset id (dataset.id in the YAML)")
    a = p.parse_args(argv)
    out = a.out or a.run_dir / "export" / a.format
    for path in export(a.run_dir, a.format, out, a.dataset_id):
        print(f"wrote {path}")
    return 0
