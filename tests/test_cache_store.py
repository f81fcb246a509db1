"""The response cache as the scheduler uses it: reads answer at once (queued values included), writes are
committed in batches on the loop (checkpoints on a thread), and everything queued is on disk after aclose."""

from __future__ import annotations

import asyncio
import threading
from pathlib import Path

import diskcache
import orjson

from cache import store
from cache.store import AsyncCache


def _value(i: int) -> dict:
    return {
        "text": f"answer {i}",
        "usage": {"input_tokens": 3, "output_tokens": i},
        "cost_usd": 0.0,
        "t": 1.0,
    }


async def test_values_are_readable_while_queued_and_on_disk_after_close(tmp_path: Path):
    c = AsyncCache(tmp_path, flush_every_s=60.0, max_batch=10_000)  # nothing leaves the queue by itself
    assert await c.get("k0") is None
    for i in range(5):
        c.put(f"k{i}", _value(i))
    assert await c.get("k3") == _value(3)  # still queued: answered from memory
    with diskcache.Cache(str(tmp_path)) as d:
        assert len(d) == 0
    await c.aclose()
    assert (c.hits, c.misses) == (1, 1)
    c2 = AsyncCache(tmp_path)
    assert [await c2.get(f"k{i}") for i in range(5)] == [_value(i) for i in range(5)]
    await c2.aclose()


async def test_writes_go_in_batches_on_the_loop_and_checkpoints_on_a_thread(tmp_path: Path, monkeypatch):
    monkeypatch.setattr(store, "CHECKPOINT_EVERY", 200)
    c = AsyncCache(tmp_path, flush_every_s=60.0, max_batch=100)
    commits: list[str] = []
    checkpoints: list[str] = []
    transact = c._cache.transact

    def counting_transact(*a, **kw):  # records which thread commits
        commits.append(threading.current_thread().name)
        return transact(*a, **kw)

    monkeypatch.setattr(c._cache, "transact", counting_transact)
    checkpoint = c._checkpoint_wal

    def recording_checkpoint() -> None:  # records where the WAL checkpoint (and its fsync) runs
        checkpoints.append(threading.current_thread().name)
        checkpoint()

    c._checkpoint_wal = recording_checkpoint  # type: ignore[method-assign]
    for i in range(250):
        c.put(f"k{i}", _value(i))
        if i % 100 == 99:  # a full batch is committed at once; reads go on
            assert await c.get(f"k{i}") == _value(i)
    await c.aclose()
    assert commits == [threading.current_thread().name] * 3  # 100 + 100 + 50, one transaction each
    assert checkpoints and set(checkpoints) == {"evalsweep-cache_0"}  # the fsync never on the loop
    with diskcache.Cache(str(tmp_path)) as d:
        assert len(d) == 250 and d.volume() > 0
        assert orjson.loads(d.get("k7")) == _value(7)  # diskcache's own reader sees our rows


async def test_queued_values_reach_disk_within_the_flush_interval(tmp_path: Path):
    c = AsyncCache(tmp_path, flush_every_s=0.01)
    c.put("k", _value(1))
    with diskcache.Cache(str(tmp_path)) as d:
        for _ in range(200):
            if "k" in d:
                break
            await asyncio.sleep(0.01)
        assert "k" in d  # committed while the run goes on, not only at aclose
    await c.aclose()


async def test_lookup_reads_entries_diskcache_itself_wrote(tmp_path: Path):
    """A pickled dict (older versions) and a value big enough for a file of its own are read through
    diskcache; our own rows in one query; absent keys are misses."""
    big = _value(1) | {"text": "x" * 100_000}
    with diskcache.Cache(str(tmp_path)) as d:
        d.set("pickled", _value(2))
        d.set("file", orjson.dumps(big))
    c = AsyncCache(tmp_path, flush_every_s=60.0)
    c.put("ours", _value(3))
    c._flush()
    found = c.lookup(["pickled", "file", "ours", "absent"])
    assert found == {"pickled": _value(2), "file": big, "ours": _value(3)}
    assert (c.hits, c.misses) == (3, 1)
    await c.aclose()
