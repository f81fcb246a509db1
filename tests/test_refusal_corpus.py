"""Refusal bodies real providers sent (tests/data/refusals/corpus.jsonl, each with its source): the
reader, given the refused request, makes of each the change an engineer would, and of one that names
nothing we may change (the content, a field a proxy added) no change at all."""

from __future__ import annotations

from pathlib import Path

import orjson
import pytest

from providers.refusals import FIXED, read

CORPUS = [orjson.loads(x) for x in (Path(__file__).parent / "data" / "refusals" / "corpus.jsonl").read_bytes().splitlines()]


def test_the_corpus_is_wide_enough():
    assert len(CORPUS) >= 40 and len({e["provider"] for e in CORPUS}) >= 10
    assert all(e["source"].startswith("https://") for e in CORPUS)


@pytest.mark.parametrize("e", CORPUS, ids=[f"{e['provider']}-{i}" for i, e in enumerate(CORPUS)])
def test_each_real_refusal_is_read_against_its_request(e: dict):
    got = read(e["status"], e["body"], e["request"])
    assert all(r.field.split(".", 1)[0] not in FIXED for r in got)  # nothing essential, ever
    want = e["expect"]
    if want is None:
        assert got == [], got
        return
    assert got, e["body"]
    if "fields" in want:  # a body naming several fields: each one is read
        assert sorted(r.field for r in got) == sorted(want["fields"]) and {r.action for r in got} == {want["action"]}
        return
    r = got[0]
    assert (r.field, r.action) == (want["field"], want["action"]), (r, e["source"])
    if "to" in want:
        assert r.to == want["to"]
    if "values" in want:
        assert set(r.values) == set(want["values"]) - {r.refused}
    if "bound" in want:
        assert r.bound == want["bound"]
