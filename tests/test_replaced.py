"""core.types.replaced (a Request's copy with some fields, on the hot path) against what it stands in for:
pydantic's `model_copy`, and for a suite's requests a validated `Request(...)`."""

from __future__ import annotations

from pathlib import Path

import orjson
import pydantic
import pytest

from core.types import Decoding, ImagePart, Request, replaced, user
from suites.base import RunSpec
from suites.jsonl import build

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
def test_replaced_is_model_copy(req: Request):
    for update in ({"model": "m1"}, {"item": "i9", "messages": [user("Other?")], "sim": {"correct": "C"}}):
        want = req.model_copy(update=update)
        got = replaced(req, **update)
        assert got == want
        assert got.model_fields_set == want.model_fields_set
        assert got.model_dump(by_alias=True) == want.model_dump(by_alias=True)
        assert got.identity(1) == want.identity(1) and got.target == want.target
    assert req.model != "m1"  # the request copied is left as it was
    with pytest.raises(pydantic.ValidationError):
        got.model = "other"  # frozen, as the copy is


def test_jsonl_requests_as_validated(tmp_path: Path):
    """The jsonl suite's requests (copies of one validated template) equal validated `Request`s, each
    with a `meta` of its own."""
    (tmp_path / "a.png").write_bytes(PNG)
    lines = [
        {"id": 1, "prompt": "Which?", "choices": ["x", "y", "z"], "answer": "y"},
        {"id": "b", "prompt": "Name it.", "answer": "Paris"},
        {"id": "c", "prompt": "What is shown?", "images": ["a.png"], "choices": ["cat", "dog"], "answer": "A"},
    ]
    path = tmp_path / "d.jsonl"
    path.write_bytes(b"".join(orjson.dumps(d) + b"\n" for d in lines))
    spec = RunSpec(suite=f"jsonl:{path}", samples=3, temperature=0.5, options={"shuffle_choices": 0})
    got = list(build(spec))
    assert [r.item for r in got] == ["1", "b", "c"]
    for r in got:
        want = Request(suite=r.suite, item=r.item, messages=r.messages, decoding=r.decoding, sim=r.sim)
        assert r == want and r.model_dump(by_alias=True) == want.model_dump(by_alias=True)
        assert r.decoding == Decoding(temperature=0.5, n=3, max_tokens=1024) and r.model == ""
    assert got[0].meta is not got[1].meta
