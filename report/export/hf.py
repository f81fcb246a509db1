"""The Hugging Face Hub's evaluation results: per model a `.eval_results/<task>.yaml` (the format model
repos carry, https://huggingface.co/docs/hub/eval-results) holding the headline score, plus one parquet
of every scored sample of the run (`samples/<suite>.parquet`), ready to upload as the result's traces.

Layout: `OUT/<model>/.eval_results/<run>.yaml` (copy the folder into the model's repo, or open a PR
with it; a run's name tells a suite's variants apart) and `OUT/samples/<run>.parquet`. `dataset.id` must be the benchmark's Hub dataset id: give it
with `--dataset-id`; without it the suite's name stands in, and the export says so.
"""

from __future__ import annotations

from pathlib import Path
from typing import Any

from report.export.samples import ExportRun, slug
from report.load import ReportError, atomic_write, suite_label


def _yaml() -> Any:
    try:
        import yaml
    except ImportError:
        raise ReportError('--format hf needs PyYAML: pip install "evalsweep[hf]"') from None
    return yaml


def entries(run: ExportRun, dataset_id: str | None) -> dict[str, list[dict[str, Any]]]:
    """model → its `.eval_results` list (one entry: the headline metric of this run)."""
    out = {}
    date = run.created[:10] or None
    for e in run.entries:
        if e.accuracy is None:
            continue
        settings = ", ".join(f"{k}={v}" for k, v in sorted(e.spec.items()) if v not in (None, {}, []))
        deviations = (run.manifest.get("protocol") or {}).get("deviations") or []
        notes = f"evalsweep {e.metric}" + (f" ({settings})" if settings else "")
        if deviations:
            notes += "; deviations: " + "; ".join(map(str, deviations))
        entry: dict[str, Any] = {
            "dataset": {"id": dataset_id or suite_label(e.suite), "task_id": suite_label(e.suite)},
            "value": e.accuracy,
        }
        if date:
            entry["date"] = date
        entry["notes"] = notes
        out[e.model] = [entry]
    return out


def samples_table(run: ExportRun) -> Any:
    import pyarrow as pa

    cols: dict[str, list[Any]] = {
        k: []
        for k in (
            "model",
            "item",
            "sample",
            "prompt",
            "responses",
            "extracted",
            "gold",
            "score",
            "error",
            "input_tokens",
            "output_tokens",
            "cost_usd",
            "latency_s",
        )
    }
    for e in run.entries:
        for s in run.samples.get(e.model, []):
            u = s.usage()
            lat = [c["latency_s"] for c in s.calls if isinstance(c.get("latency_s"), int | float)]
            ext, gold = s.scored.get("extracted"), s.scored.get("gold")
            row = {
                "model": e.model,
                "item": s.item,
                "sample": s.sample,
                "prompt": "\n\n".join(m["content"] for m in run.prompts.get(s.item, [])) or None,
                "responses": [c.get("text") for c in s.calls],
                "extracted": None if ext is None else str(ext),
                "gold": None if gold is None else str(gold),
                "score": s.score,
                "error": s.error,
                "input_tokens": u["input_tokens"],
                "output_tokens": u["output_tokens"],
                "cost_usd": s.cost_usd(),
                "latency_s": sum(lat) if lat else None,
            }
            for k, v in row.items():
                cols[k].append(v)
    schema = pa.schema(
        [
            ("model", pa.string()), ("item", pa.string()), ("sample", pa.int64()), ("prompt", pa.string()),
            ("responses", pa.list_(pa.string())), ("extracted", pa.string()), ("gold", pa.string()),
            ("score", pa.float64()), ("error", pa.string()), ("input_tokens", pa.int64()),
            ("output_tokens", pa.int64()), ("cost_usd", pa.float64()), ("latency_s", pa.float64()),
        ]
    )  # fmt: skip
    return pa.table(cols, schema=schema)


def write_hf(run: ExportRun, out: Path, dataset_id: str | None = None) -> list[Path]:
    import pyarrow.parquet as pq

    yaml = _yaml()
    written = []
    task = slug(run.run_dir.name)  # one file per run: a suite's variants are separate results
    for model, items in entries(run, dataset_id).items():
        path = out / slug(model) / ".eval_results" / f"{task}.yaml"
        atomic_write(path, yaml.safe_dump(items, sort_keys=False, allow_unicode=True))
        written.append(path)
    parquet = out / "samples" / f"{task}.parquet"
    parquet.parent.mkdir(parents=True, exist_ok=True)
    tmp = parquet.with_name(f".{parquet.name}.tmp")
    pq.write_table(samples_table(run), tmp)
    tmp.replace(parquet)
    written.append(parquet)
    if dataset_id is None:
        print(
            f"note: dataset.id is {suite_label(run.suite)!r}; give the benchmark's Hub id with --dataset-id"
        )
    return written
