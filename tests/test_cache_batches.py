"""Commits of the response cache (#40, CPU per call): a batch of any length is written by a few statements
that SQLite parses once a connection (a statement of a new length costs a parse, ~3 us a row), and every
value of every length is read back, by our reader and by diskcache's own."""

from __future__ import annotations

from pathlib import Path

import diskcache
import orjson

from cache.disk import open_cache, select_values, upsert_values


def _value(i: int) -> dict:
    return {"text": f"answer {i}", "usage": {"input_tokens": 3, "output_tokens": i}, "cost_usd": 0.0, "t": 1.0}


def test_batches_of_every_length_share_a_few_statements(tmp_path: Path):
    c = open_cache(tmp_path)
    assert c is not None
    shapes: set[int] = set()  # rows a statement (the trace shows it with its values bound: one blob a row)
    c._con.set_trace_callback(lambda sql: shapes.add(sql.count("x'")) if sql.startswith("INSERT INTO Cache") else None)
    n = 0
    for length in [*range(1, 41), 63, 99, 130, 257, 300]:  # a commit's length follows the answers' pace
        upsert_values(c, {f"k{n + i}": _value(n + i) for i in range(length)})
        n += length
    c._con.set_trace_callback(None)
    assert len(shapes) <= 8, sorted(shapes)  # was one statement a length: 45
    keys = [f"k{i}" for i in range(n)]
    assert select_values(c, keys) == {k: _value(i) for i, k in enumerate(keys)}
    c.close()
    with diskcache.Cache(str(tmp_path)) as d:
        assert len(d) == n
        assert orjson.loads(d.get(f"k{n - 1}")) == _value(n - 1)


def test_a_batch_rewritten_keeps_one_entry_a_key(tmp_path: Path):
    c = open_cache(tmp_path)
    assert c is not None
    upsert_values(c, {f"k{i}": _value(i) for i in range(77)})
    upsert_values(c, {f"k{i}": _value(i + 1000) for i in range(50, 177)})
    got = select_values(c, [f"k{i}" for i in range(177)])
    assert got == {f"k{i}": _value(i if i < 50 else i + 1000) for i in range(177)}
    c.close()
    with diskcache.Cache(str(tmp_path)) as d:
        assert len(d) == 177


def test_lookups_of_every_length_share_a_few_statements(tmp_path: Path):
    c = open_cache(tmp_path)
    assert c is not None
    upsert_values(c, {f"k{i}": _value(i) for i in range(600)})
    shapes: set[int] = set()  # keys a statement (the trace shows them bound: one quoted key each)
    c._con.set_trace_callback(lambda sql: shapes.add(sql.count("'k")) if sql.startswith("SELECT key") else None)
    for length in [*range(1, 41), 99, 300, 600]:  # a look-up's length follows the requests read
        keys = [f"k{i}" for i in range(length - 1)] + ["kabsent"]
        assert select_values(c, keys) == {k: _value(i) for i, k in enumerate(keys[:-1])}
    c._con.set_trace_callback(None)
    assert len(shapes) <= 11, sorted(shapes)  # was one statement a length: 44
    c.close()
