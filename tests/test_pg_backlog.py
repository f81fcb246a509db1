"""Answers made while the shared cache's Postgres was unreachable reach it when it returns (they were
only kept locally: another host paid for them again)."""

from __future__ import annotations

import asyncio

import psycopg
import pytest

from cache import pg
from cache.pg import TABLE, PgCache
from tests.servers import PgServer


@pytest.fixture
def own_pg():
    srv = PgServer().start()
    yield srv
    srv.close()


def _answer(i: int) -> dict:
    return {"text": f"answer {i}", "usage": {"prompt_tokens": 3, "completion_tokens": 2}, "cost_usd": 0.0,
            "finish_reason": "stop", "model": "m", "t": 1.0}


async def _stored(url: str) -> set[str]:
    async with await psycopg.AsyncConnection.connect(url) as c:
        cur = await c.execute(f"SELECT key FROM {TABLE}")
        return {r[0] for r in await cur.fetchall()}


async def test_answers_made_while_postgres_was_down_are_written_when_it_returns(
    own_pg: PgServer, monkeypatch: pytest.MonkeyPatch
):
    monkeypatch.setattr(pg, "RETRY_S", 0.5)
    url = own_pg.new_db()
    cache = await PgCache(url, flush_every_s=0.05).open()
    for i in range(5):
        cache.put(f"k{i}", _answer(i))
    await asyncio.sleep(0.3)
    assert await _stored(url) == {f"k{i}" for i in range(5)}
    own_pg.stop()  # the server goes away
    for i in range(5, 10):  # written (and lost) while the client still thinks it is up
        cache.put(f"k{i}", _answer(i))
    while not cache.down:
        await asyncio.sleep(0.05)
    for i in range(10, 1300):  # made while it is known to be down (more than one insert's batch)
        cache.put(f"k{i}", _answer(i))
    own_pg.start()
    while cache.down:
        await asyncio.sleep(0.05)
    for _ in range(200):
        if len(await _stored(url)) == 1300:
            break
        await asyncio.sleep(0.05)
    assert await _stored(url) == {f"k{i}" for i in range(1300)}
    await cache.aclose()
