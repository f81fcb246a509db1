"""The mock's arrival stamps are the client's sending times, however late its thread reads a request
(tests.threaded): the rate-limit tests judge the runner's pacing on them, on a loaded machine too."""

from __future__ import annotations

import socket
import threading
import time

import orjson

from tests.mock_openai import MockServer


def test_a_request_read_late_is_stamped_when_it_was_sent():
    """The mock's thread is held until the request is in the kernel: its stamp is still from before."""
    srv = MockServer().start()
    held, go = threading.Event(), threading.Event()

    def hold() -> None:
        held.set()
        go.wait(30)

    try:
        assert srv._loop is not None
        srv._loop.call_soon_threadsafe(hold)
        held.wait(30)
        body = orjson.dumps({"model": "ok-a", "messages": [{"role": "user", "content": "late?"}]})
        head = (f"POST /v1/chat/completions HTTP/1.1\r\nHost: 127.0.0.1\r\nContent-Type: application/json\r\n"
                f"Content-Length: {len(body)}\r\nConnection: close\r\n\r\n").encode()
        with socket.create_connection(("127.0.0.1", srv.port)) as c:
            before = time.monotonic()
            c.sendall(head + body)
            after = time.monotonic()  # the server's thread has not run since `held`
            time.sleep(0.1)  # ... nor for a while yet: a stamp taken when read would be >= after + 0.1
            go.set()
            answer = b""
            while chunk := c.recv(65536):
                answer += chunk
        assert answer.startswith(b"HTTP/1.1 200")
        (stamp, _, prompt, _), = srv.arrivals
        assert prompt == "late?"
        assert before - 1e-3 <= stamp <= after + 1e-3, (stamp - before, after - before)
    finally:
        go.set()
        srv.stop()


def test_rate_windows_judge_stamps_read_out_of_order():
    """120 RPM (2 in any second (t-1, t]): a request sent at 1.25 but read after one sent at 1.3 is
    admitted, and so is 2.28 (its window holds 1.3 and 2.28: the old log, kept in reading order, still
    counted 1.25 and refused it); 2.29 is refused (1.3, 2.28, 2.29), 2.31 admitted, and 2.27 read after
    them refused: the window ending at 2.28, after it, would hold three."""
    srv = MockServer(rpm_per_key=120)
    verdicts = [srv._over_limit("k", t) for t in (0.2, 1.3, 1.25, 2.28, 2.29, 2.31, 2.27)]
    assert verdicts == [False, False, False, False, True, False, True]
