"""inspect_ai `.eval` logs, one per suite × model, written with inspect_ai's own `write_eval_log` so
`inspect view` (and lighteval, openbench on top of inspect) open them.

Mapping: an inspect sample is one scored row (id = item, epoch = sample + 1); its messages are the
prompt then every call's response (each assistant message's metadata names its sample, pass, cost,
latency, attempts and error); its score is ours (`evalsweep`), with the extracted answer and gold; its
usage and cost are summed over its calls. The full scored row and calls are kept in the sample's
metadata (`evalsweep`), so `provider = "replay"` reads them back exactly. A sample whose calls failed
carries an error and no score (a failed call is never a wrong answer).
"""

from __future__ import annotations

from datetime import UTC, datetime
from pathlib import Path
from typing import Any

from report.export.samples import COUNTS, ExportRun, ExportSample, slug
from report.load import ReportError

SCORER = "evalsweep"
CALL_FIELDS = (
    "sample",
    "pass",
    "cost_usd",
    "latency_s",
    "attempts",
    "cached",
    "error",
    "error_kind",
    "finish_reason",
    "via",
    "usage",
)


def _import() -> Any:
    try:
        import inspect_ai.log as log
    except ImportError:
        raise ReportError('--format inspect needs inspect_ai: pip install "evalsweep[inspect]"') from None
    return log


def _usage(u: dict[str, int], cost: float | None) -> Any:
    from inspect_ai.model import ModelUsage

    return ModelUsage(
        input_tokens=u["input_tokens"],
        output_tokens=u["output_tokens"],
        total_tokens=u["input_tokens"] + u["output_tokens"],
        input_tokens_cache_read=u["cached_input_tokens"] or None,
        reasoning_tokens=u["reasoning_tokens"] or None,
        total_cost=cost,
    )


def _messages(msgs: list[dict[str, str]]) -> list[Any]:
    from inspect_ai.model import ChatMessageAssistant, ChatMessageSystem, ChatMessageUser

    kinds = {"system": ChatMessageSystem, "user": ChatMessageUser, "assistant": ChatMessageAssistant}
    return [kinds[m["role"]](content=m["content"]) for m in msgs]


def _sample(run: ExportRun, model: str, s: ExportSample) -> Any:
    from inspect_ai._util.error import EvalError
    from inspect_ai.log import EvalSample
    from inspect_ai.model import ChatMessageAssistant, ModelOutput
    from inspect_ai.scorer import Score

    prompt = _messages(run.prompts.get(s.item, []))
    replies = [
        ChatMessageAssistant(
            content=c.get("text") or "",
            model=model,
            metadata={k: c.get(k) for k in CALL_FIELDS},
        )
        for c in s.calls
    ]
    answers = [c for c in s.calls if c.get("pass") == "answer" and c.get("text") is not None]
    output = ModelOutput.from_content(model, answers[0]["text"]) if answers else ModelOutput(model=model)
    usage, cost = s.usage(), s.cost_usd()
    output.usage = _usage(usage, cost)
    gold = s.scored.get("gold")
    scores = {}
    if s.score is not None:
        ext = s.scored.get("extracted")
        scores[SCORER] = Score(
            value=s.score,
            answer=None if ext is None else str(ext),
            metadata={k: v for k, v in s.scored.items() if k not in ("model", "item", "score")},
        )
    err = s.error if s.score is None else None
    lat = [c["latency_s"] for c in s.calls if isinstance(c.get("latency_s"), int | float)]
    return EvalSample(
        id=s.item,
        epoch=(s.sample or 0) + 1,
        input=prompt or s.item,
        target="" if gold is None else str(gold),
        messages=prompt + replies,
        output=output,
        scores=scores,
        metadata={
            "evalsweep": {
                "scored": s.scored,
                "calls": [{"text": c.get("text"), **{k: c.get(k) for k in CALL_FIELDS}} for c in s.calls],
            }
        },
        model_usage={model: _usage(usage, cost)},
        total_time=sum(lat) if lat else None,
        error=EvalError(message=err, traceback="", traceback_ansi="") if err else None,
    )


def _metrics(scores: dict[str, Any], headline: str) -> dict[str, Any]:
    from inspect_ai.log import EvalMetric

    out = {}
    keys = [headline] + [k for k in scores if k != headline and k not in COUNTS]
    for k in keys:
        v = scores.get(k)
        if isinstance(v, int | float) and not isinstance(v, bool):
            out[k] = EvalMetric(name=k, value=float(v))
    ci = scores.get("ci95")
    if isinstance(ci, list) and len(ci) == 2 and all(isinstance(x, int | float) for x in ci):
        out["ci95_low"] = EvalMetric(name="ci95_low", value=float(ci[0]))
        out["ci95_high"] = EvalMetric(name="ci95_high", value=float(ci[1]))
    return out


def write_inspect(run: ExportRun, out: Path) -> list[Path]:
    log = _import()
    from core import __version__

    created = run.created or datetime.now(UTC).isoformat()
    stamp = created.replace(":", "-")[:19]
    written = []
    for e in run.entries:
        samples = [_sample(run, e.model, s) for s in run.samples.get(e.model, [])]
        usage: dict[str, int] = {}
        for s in run.samples.get(e.model, []):
            for k, v in s.usage().items():
                usage[k] = usage.get(k, 0) + v
        items = sorted({s.id for s in samples}, key=str)
        spec = log.EvalSpec(
            created=created,
            task=e.suite,
            task_id=slug(run.run_dir.name),
            task_display_name=f"{e.suite} ({run.run_dir.name})",
            task_args=e.spec,
            dataset=log.EvalDataset(name=e.suite, samples=len(items), sample_ids=items),
            model=e.model,
            config=log.EvalConfig(epochs=max((x.epoch for x in samples), default=1)),
            packages={"evalsweep": __version__},
            metadata={
                "evalsweep": {
                    "run_dir": str(run.run_dir),
                    "spec": run.manifest.get("spec"),
                    "settings": e.spec,
                    "model_id": e.info.model_id,
                    "protocol": run.manifest.get("protocol"),
                    "prompt_note": run.prompt_note,
                }
            },
        )
        sc = e.scores
        results = log.EvalResults(
            total_samples=int(sc.get("n_planned") or len(samples)),
            completed_samples=int(sc.get("n_scored") or sum(bool(x.scores) for x in samples)),
            scores=[
                log.EvalScore(
                    name=SCORER,
                    scorer=SCORER,
                    scored_samples=sum(bool(x.scores) for x in samples),
                    unscored_samples=sum(not x.scores for x in samples),
                    metrics=_metrics(sc, e.metric),
                )
            ],
            metadata={"evalsweep": {"headline": e.metric, "scores": sc, "run_cost_usd": e.run_cost_usd}},
        )
        stats = log.EvalStats(
            started_at=created,
            completed_at=str(run.manifest.get("updated") or created),
            model_usage={
                e.model: _usage(
                    {**{"cached_input_tokens": 0, "reasoning_tokens": 0}, **usage}, e.run_cost_usd
                )
            },
        )
        ev = log.EvalLog(
            status="success",
            eval=spec,
            plan=log.EvalPlan(name="evalsweep", steps=[log.EvalPlanStep(solver=f"evalsweep:{e.suite}")]),
            results=results,
            stats=stats,
            samples=samples,
        )
        # inspect's own naming, {time}_{task}_{id}: its log list reads the task from the name
        name = slug(f"{run.run_dir.name}-{e.model}").replace("_", "-")
        path = out / f"{stamp}_{name}_{spec.eval_id}.eval"
        log.write_eval_log(ev, str(path))
        written.append(path)
    return written
