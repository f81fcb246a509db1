"""Issue 31.9: the real runner process SIGSTOPped longer than its calls' timeout, then continued. The
answers that arrived while it was frozen sit in its sockets; it reads them before calling anything timed
out, so no call is paid twice: the server receives exactly one request per planned call."""

from __future__ import annotations

import os
import signal
import time
from pathlib import Path

from tests.helpers import REPO, rows, run_args, spawn, write_config, write_dataset
from tests.mock_openai import MockServer

N = 300


def test_a_frozen_runner_reads_what_arrived_before_timing_out(tmp_path: Path):
    srv = MockServer(latency_s=0.1).start()
    try:
        cfg = write_config(tmp_path / "c.toml", srv.base_url, ["ok-a"],
                           extra_endpoint="max_concurrency = 8\ntimeout_s = 1.5\nretry_initial_s = 0.01\n")
        data = write_dataset(tmp_path / "d.jsonl", N)
        out = tmp_path / "run"
        env = {**os.environ, "PYTHONPATH": str(REPO), "EVALSWEEP_CACHE_DIR": str(tmp_path / "cache")}
        p = spawn(run_args(data, "ok-a", cfg, out), env)
        while not (out / "results.jsonl").exists() or len(rows(out)) < 40:
            assert p.poll() is None, p.stderr.read()  # type: ignore[union-attr]
            time.sleep(0.02)
        p.send_signal(signal.SIGSTOP)
        sent = srv.total
        time.sleep(4.0)  # frozen well past timeout_s; the calls in flight are answered meanwhile
        in_socket = srv.total - len(rows(out))
        p.send_signal(signal.SIGCONT)
        _, err = p.communicate(timeout=300)
    finally:
        srv.stop()
    assert p.returncode == 0, err
    assert in_socket > 0 and srv.total >= sent  # calls really were in flight (answered) while frozen
    got = rows(out)
    assert len(got) == N and all(r["error"] is None for r in got)
    assert srv.total == N, f"{srv.total} requests for {N} calls"  # none paid twice
    assert sum(r["attempts"] for r in got) == N


def test_patient_deadline_semantics():
    """In one process: a call never answered still times out; a loop blocked past the deadline while the
    answer arrived reads it; a cancellation from outside stays a cancellation."""
    import asyncio

    import pytest

    from providers.patience import Patient

    async def main() -> None:
        server = await asyncio.start_server(lambda r, w: None, "127.0.0.1", 0)  # accepts, never answers
        port = server.sockets[0].getsockname()[1]
        reader, writer = await asyncio.open_connection("127.0.0.1", port)
        with pytest.raises(TimeoutError):
            async with Patient(0.2):
                await reader.read(1)

        async def answer(r: asyncio.StreamReader, w: asyncio.StreamWriter) -> None:
            await r.readexactly(3)
            w.write(b"answer")
            await w.drain()

        quick = await asyncio.start_server(answer, "127.0.0.1", 0)
        r2, w2 = await asyncio.open_connection("127.0.0.1", quick.sockets[0].getsockname()[1])
        w2.write(b"ask")
        asyncio.get_running_loop().call_soon(time.sleep, 1.5)  # the loop frozen past the deadline
        async with Patient(0.2) as p:
            assert await r2.readexactly(6) == b"answer"
        assert p.forgiven == 1

        async def outer() -> None:
            async with Patient(10):
                await asyncio.sleep(10)

        t = asyncio.create_task(outer())
        await asyncio.sleep(0.01)
        t.cancel()
        with pytest.raises(asyncio.CancelledError):
            await t
        writer.close()
        w2.close()
        server.close()
        quick.close()

    asyncio.run(main())
