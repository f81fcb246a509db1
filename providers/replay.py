"""Replay published model outputs through the exact same pipeline (extraction, scoring, reports).

Three formats, told apart by content (and the `.eval` extension):
- ours: JSONL of `{"item": ID, "sample": 0, "pass": "answer", "text": "..."}`;
- inspect_ai logs (`.eval`, or a `.json` log; needs the `inspect` extra): a sample's id is the item,
  its epoch - 1 the sample, its output's completion the answer; a log written by `evalsweep export`
  gives back every call (passes included) exactly;
- OpenAI Evals: the `oaieval` recorder's JSONL (`{"spec"}` first, then events; each `sampling`
  event's `sampled` texts are the samples of its `sample_id`) and the Evals API's run output items
  (`"object": "eval.run.output_item"`, or a `{"object": "list", "data": [...]}` page of them): the
  item is the data source item's `id` field, else its index; the answer is the first output message.
A request with no line is an error row, never a guess.
"""

from __future__ import annotations

from pathlib import Path
from typing import Any

import orjson

from core.errors import ConfigError
from core.types import Request
from providers.base import Completion, ProviderError

Answers = dict[tuple[str, int, str], str | None]


def load_replay(path: Path) -> Answers:
    if not path.is_file():
        raise ConfigError(f"{path}: replay file not found")
    with path.open("rb") as f:
        if f.read(4) == b"PK\x03\x04" or path.suffix == ".eval":
            return _inspect(path)  # a zip: inspect's .eval format
        f.seek(0)
        first = next((line for line in f if line.strip()), b"")
    if first.strip() == b"{" and path.suffix == ".json":
        return _inspect(path)  # an inspect log in its (pretty-printed) JSON format
    try:
        d = orjson.loads(first) if first.strip() else {}
    except orjson.JSONDecodeError:
        d = {}  # ours reports the line
    if not isinstance(d, dict):
        return _ours(path)
    if "spec" in d or d.get("type") in ("sampling", "match") or _is_item(d) or d.get("object") == "list":
        return _openai_evals(path)
    return _ours(path)


def _ours(path: Path) -> Answers:
    answers: dict[tuple[str, int, str], str | None] = {}
    with path.open("rb") as f:
        for lineno, line in enumerate(f, 1):
            if not line.strip():
                continue
            try:
                d = orjson.loads(line)
                key = (str(d["item"]), int(d.get("sample", 0)), str(d.get("pass", "answer")))
                text = d["text"]
            except (orjson.JSONDecodeError, KeyError, TypeError, ValueError) as e:
                raise ConfigError(
                    f"{path}:{lineno}: a replay line needs "
                    f'{{"item", "sample", "pass", "text"}} ({type(e).__name__}: {e})'
                ) from None
            if text is not None and not isinstance(text, str):
                raise ConfigError(f"{path}:{lineno}: field text: must be a string or null")
            answers[key] = text
    return answers


def _inspect(path: Path) -> Answers:
    try:
        from inspect_ai.log import read_eval_log
    except ImportError:
        raise ConfigError(
            f'{path}: reading inspect logs needs inspect_ai: pip install "evalsweep[inspect]"'
        ) from None
    try:
        log = read_eval_log(str(path))
    except Exception as e:  # a damaged zip, a log of another version: say which file
        raise ConfigError(f"{path}: not a readable inspect log ({type(e).__name__}: {e})") from None
    answers: Answers = {}
    for s in log.samples or []:
        ours = (s.metadata or {}).get("evalsweep")
        if isinstance(ours, dict) and isinstance(ours.get("calls"), list):
            for c in ours["calls"]:
                if c.get("error"):  # a failed call stays failed: no line, so an error row on replay
                    continue
                answers[(str(s.id), int(c.get("sample") or 0), str(c.get("pass") or "answer"))] = c.get(
                    "text"
                )
            continue
        text = s.output.completion if s.output is not None and s.output.choices else None
        if s.error is None:
            answers[(str(s.id), s.epoch - 1, "answer")] = text
    return answers


def _is_item(d: Any) -> bool:
    return isinstance(d, dict) and d.get("object") == "eval.run.output_item"


def _output_item(d: dict[str, Any], where: str) -> tuple[str, str | None]:
    src = d.get("datasource_item") if isinstance(d.get("datasource_item"), dict) else {}
    item = src.get("id", d.get("datasource_item_id"))
    if item is None:
        raise ConfigError(f"{where}: an output item needs datasource_item.id or datasource_item_id")
    out = (d.get("sample") or {}).get("output") or []
    texts = [m.get("content") for m in out if isinstance(m, dict) and m.get("role") == "assistant"]
    text = texts[0] if texts and isinstance(texts[0], str) else None
    return str(item), text


def _openai_evals(path: Path) -> Answers:
    answers: Answers = {}
    with path.open("rb") as f:
        for lineno, line in enumerate(f, 1):
            if not line.strip():
                continue
            where = f"{path}:{lineno}"
            try:
                d = orjson.loads(line)
            except orjson.JSONDecodeError as e:
                raise ConfigError(f"{where}: not JSON ({e})") from None
            if not isinstance(d, dict):
                raise ConfigError(f"{where}: an OpenAI Evals line must be a JSON object")
            for it in d.get("data", []) if d.get("object") == "list" else [d] if _is_item(d) else []:
                item, text = _output_item(it, where)
                n = sum(k[0] == item for k in answers)
                answers[(item, n, "answer")] = text
            if d.get("type") != "sampling":
                continue
            data = d.get("data") if isinstance(d.get("data"), dict) else {}
            sampled = data.get("sampled")
            if d.get("sample_id") is None or sampled is None:
                raise ConfigError(f"{where}: a sampling event needs sample_id and data.sampled")
            texts = [sampled] if isinstance(sampled, str) else sampled
            if not isinstance(texts, list) or not all(isinstance(t, str) for t in texts):
                raise ConfigError(f"{where}: field data.sampled: must be a string or a list of strings")
            for i, t in enumerate(texts):
                answers[(str(d["sample_id"]), i, "answer")] = t
    return answers


class ReplayProvider:
    supports_n = False
    cacheable = False

    def __init__(self, path: str | Path) -> None:
        self.path = Path(path)
        self.answers = load_replay(self.path)

    async def close(self) -> None:
        return None

    async def complete(
        self,
        req: Request,
        model_id: str,
        n: int,
        sample: int,
        api_key: str | None,
        params: dict[str, Any],
        shape: Any = None,
    ) -> Completion:
        key = (req.item, sample, req.pass_)
        if key not in self.answers:
            raise ProviderError(
                f"replay file {self.path} has no line for item {req.item!r} sample {sample} "
                f"pass {req.pass_!r}"
            )
        return Completion(texts=[self.answers[key]], finish_reasons=["replay"])
