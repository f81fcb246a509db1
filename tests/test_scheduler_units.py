"""The scheduler's per-request helpers (runner.scheduler) against what they stand in for."""

from __future__ import annotations

import pydantic
import pytest

from core.types import Decoding, ImagePart, Request, user
from runner.scheduler import for_model

PNG = b"\x89PNG\r\n\x1a\n" + b"an image" * 10


def _requests() -> list[Request]:
    return [
        Request(suite="s", item="i1", messages=[user("Which?")]),
        Request(
            suite="jsonl:x.jsonl",
            item="i2",
            model="earlier",
            sample=3,
            **{"pass": "critique"},
            messages=[user(ImagePart(data=PNG), "What is shown?")],
            decoding=Decoding(temperature=0.7, max_tokens=64, top_p=0.9, seed=1, n=2),
            via="judge",
            sim={"correct": "B", "wrong": ["A"]},
            meta={"k": [1, 2]},
            prefix=(0, 0),
            resent=True,
            tools=[{"type": "function", "function": {"name": "f"}}],
        ),
    ]


@pytest.mark.parametrize("req", _requests())
def test_for_model_is_model_copy(req: Request):
    want = req.model_copy(update={"model": "m1"})
    got = for_model(req, "m1")
    assert got == want and got.model == "m1"
    assert got.model_fields_set == want.model_fields_set
    assert got.model_dump(by_alias=True) == want.model_dump(by_alias=True)
    assert got.identity(1) == want.identity(1) and got.target == want.target
    assert req.model != "m1"  # the suite's request is left as it was
    with pytest.raises(pydantic.ValidationError):
        got.model = "other"  # frozen, as the copy is
