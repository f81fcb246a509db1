"""Replay published model outputs through the exact same pipeline (extraction, scoring, reports).

The file is JSONL of `{"item": ID, "sample": 0, "pass": "answer", "text": "..."}`. A request with no
line is an error row, never a guess.
"""

from __future__ import annotations

from pathlib import Path
from typing import Any

import orjson

from core.types import Request
from providers.base import Completion, ProviderError
from runner.config import ConfigError


def load_replay(path: Path) -> dict[tuple[str, int, str], str | None]:
    answers: dict[tuple[str, int, str], str | None] = {}
    try:
        f = path.open("rb")
    except FileNotFoundError:
        raise ConfigError(f"{path}: replay file not found") from None
    with f:
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
