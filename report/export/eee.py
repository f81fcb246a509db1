"""The EvalEval coalition's "Every Eval Ever" records (schema 0.3.0, vendored in schemas/): per model an
aggregate `{uuid}.json` and its instance-level `{uuid}_samples.jsonl`, laid out as the datastore wants
them: `data/<suite>/<developer>/<model>/`.

The aggregate holds the headline metric (with its bootstrap CI) and every other metric of scores.json;
the instance file one line per scored row (all of its responses, the extracted answer, gold, score,
usage, latency). A row whose calls failed has no score, so it has no instance line (the schema needs a
number): the aggregate says how many (`n_errors`), never scoring them as wrong.
"""

from __future__ import annotations

import hashlib
import uuid
from datetime import datetime
from pathlib import Path
from typing import Any

import orjson

from report.export.samples import COUNTS, ExportRun, ExportSample, slug
from report.load import Entry, atomic_write, suite_label

SCHEMA_VERSION = "0.3.0"
SCHEMAS = Path(__file__).parent / "schemas"


def _stamp(iso: str) -> str:
    try:
        return str(int(datetime.fromisoformat(iso).timestamp()))
    except ValueError:
        return iso


def _ids(run: ExportRun, e: Entry) -> tuple[str, str, str]:
    """(uuid, developer, model) for the file layout; the uuid is a stable version-4 form of a hash of
    the run and model, so exporting twice writes the same files."""
    h = hashlib.sha256(f"{run.suite}\0{e.experiment}\0{e.model}\0{run.created}".encode()).digest()
    dev, _, name = e.model.rpartition("/")
    return str(uuid.UUID(bytes=h[:16], version=4)), slug(dev or "unknown"), slug(name)


def _result(e: Entry, metric: str, value: float, when: str) -> dict[str, Any]:
    details: dict[str, Any] = {"score": value}
    if metric == e.metric and e.ci95 is not None:
        details["uncertainty"] = {
            "confidence_interval": {
                "lower": e.ci95[0],
                "upper": e.ci95[1],
                "confidence_level": 0.95,
                "method": "percentile bootstrap over items",
            },
            **({"num_samples": e.n} if e.n is not None else {}),
        }
    return {
        "evaluation_result_id": f"{e.suite}/{metric}",
        "evaluation_name": e.suite if metric == e.metric else f"{e.suite} ({metric})",
        "source_data": {"dataset_name": e.suite, "source_type": "other"},
        "evaluation_timestamp": when,
        "metric_config": {
            "metric_id": metric,
            "metric_name": metric,
            "lower_is_better": False,
            "score_type": "continuous",
            "min_score": None,  # not provided: JEEBench marks go below 0 and above 1
            "max_score": None,
            "additional_details": {"headline": str(metric == e.metric).lower()},
        },
        "score_details": details,
    }


def aggregate(run: ExportRun, e: Entry, eid: str, samples_path: str, rows: int) -> dict[str, Any]:
    from core import __version__

    when = _stamp(run.created)
    metrics = [e.metric] + [k for k in e.scores if k != e.metric and k not in COUNTS]
    results = [
        _result(e, k, float(v), when)
        for k in metrics
        if isinstance(v := e.scores.get(k), int | float) and not isinstance(v, bool)
    ]
    availability = {True: "open_weights", False: "closed_weights", None: "unknown"}[e.info.open_weights]
    spec = run.manifest.get("spec") if isinstance(run.manifest.get("spec"), dict) else {}
    return {
        "schema_version": SCHEMA_VERSION,
        "evaluation_id": eid,
        "evaluation_timestamp": when,
        "retrieved_timestamp": when,
        "source_metadata": {
            "source_name": "evalsweep run",
            "source_type": "evaluation_run",
            "source_organization_name": "unknown",
            "evaluator_relationship": "third_party",
            "additional_details": {"run_dir": str(run.run_dir), "spec": orjson.dumps(spec).decode()},
        },
        "eval_library": {"name": "evalsweep", "version": __version__},
        "model_info": {
            "name": e.model,
            "id": e.info.model_id or e.model,
            "additional_details": {"deployment_type": "unknown", "model_availability": availability},
        },
        "evaluation_results": results,
        "detailed_evaluation_results": {
            "format": "jsonl",
            "file_path": samples_path,
            "total_rows": rows,
            "additional_details": {k: str(e.scores[k]) for k in COUNTS if isinstance(e.scores.get(k), int)},
        },
    }


def instance(e: Entry, eid: str, s: ExportSample, prompt: str, per_sample: bool) -> dict[str, Any] | None:
    if s.score is None:
        return None
    gold, ext = s.scored.get("gold"), s.scored.get("extracted")
    texts = [c["text"] for c in s.calls if isinstance(c.get("text"), str)]
    u = s.usage()
    lat = [c["latency_s"] for c in s.calls if isinstance(c.get("latency_s"), int | float)]
    stage = s.scored.get("stage")
    sid = f"{s.item}#{s.sample}" if per_sample else s.item
    return {
        "schema_version": SCHEMA_VERSION,
        "evaluation_id": eid,
        "model_id": e.info.model_id or e.model,
        "evaluation_name": e.suite,
        "evaluation_result_id": f"{e.suite}/{e.metric}",
        "sample_id": sid,
        "sample_hash": hashlib.sha256(f"{prompt}{gold}".encode()).hexdigest(),
        "interaction_type": "single_turn",
        "input": {"raw": prompt, "reference": [] if gold is None else [str(gold)]},
        "output": {"raw": texts},
        "answer_attribution": [
            {
                "turn_idx": 0,
                "source": "output.raw",
                "extracted_value": "" if ext is None else str(ext),
                "extraction_method": f"evalsweep:{e.suite}" + (f":{stage}" if stage else ""),
                "is_terminal": True,
            }
        ],
        "evaluation": {"score": s.score, "is_correct": s.score >= 1},
        "token_usage": {
            "input_tokens": u["input_tokens"],
            "output_tokens": u["output_tokens"],
            "total_tokens": u["input_tokens"] + u["output_tokens"],
        },
        "performance": {"latency_ms": 1000 * sum(lat)} if lat else None,
        "metadata": {"item": s.item, **({"cost_usd": str(c)} if (c := s.cost_usd()) is not None else {})},
    }


def write_eee(run: ExportRun, out: Path) -> list[Path]:
    written = []
    for e in run.entries:
        uid, dev, name = _ids(run, e)
        rel = f"data/{slug(suite_label(e.suite))}/{dev}/{name}"
        eid = f"{e.suite}/{e.model}/{_stamp(run.created)}"
        prompt = {i: "\n\n".join(m["content"] for m in msgs) for i, msgs in run.prompts.items()}
        mine = run.samples.get(e.model, [])
        per_sample = len({s.item for s in mine}) < len(mine)  # several scored rows per item: item#sample
        lines = [instance(e, eid, s, prompt.get(s.item, s.item), per_sample) for s in mine]
        body = b"".join(orjson.dumps(x, option=orjson.OPT_APPEND_NEWLINE) for x in lines if x is not None)
        samples = out / rel / f"{uid}_samples.jsonl"
        atomic_write(samples, body)
        n = sum(x is not None for x in lines)
        agg = out / rel / f"{uid}.json"
        atomic_write(
            agg,
            orjson.dumps(aggregate(run, e, eid, f"{rel}/{uid}_samples.jsonl", n), option=orjson.OPT_INDENT_2),
        )
        written += [agg, samples]
    return written
