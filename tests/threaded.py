"""A test server's lifecycle: its aiohttp app on 127.0.0.1 (a free port) in a background thread with
its own event loop, so sync tests, async tests and the CLI in a subprocess can all call it alike.

Arrival times come from the kernel (`arrived`): on a loaded machine this thread may get the CPU tens of
milliseconds after a request came in, and requests read late would be stamped late, bunched together (a
rate limit judged on them refuses calls the client spaced well). On 127.0.0.1 the kernel stamps a segment
as the client sends it (SO_TIMESTAMPNS), whenever this thread reads it."""

from __future__ import annotations

import asyncio
import socket
import struct
import threading
import time
import weakref
from typing import Any, TypeVar

from aiohttp import web

T = TypeVar("T", bound="Threaded")

SO_TIMESTAMPNS = getattr(socket, "SO_TIMESTAMPNS", 35)  # Linux's value (x86-64, arm64); Python 3.11 lacks the name
_TIMESPEC = struct.Struct("@ll")


class _Stamped(socket.socket):
    """A connection that keeps the kernel's stamp (time.time's clock) of the first bytes it read since it
    last sent: a client on HTTP/1.1 sends its next request only once it has read the whole answer, so
    that is when the request being handled was sent."""

    first: float | None = None

    def recv(self, n: int, flags: int = 0) -> bytes:
        data, anc, _, _ = self.recvmsg(n, socket.CMSG_SPACE(_TIMESPEC.size), flags)
        if data and self.first is None:
            stamps = [d for lvl, typ, d in anc if lvl == socket.SOL_SOCKET and typ == SO_TIMESTAMPNS]
            if stamps and len(stamps[0]) >= _TIMESPEC.size:
                sec, ns = _TIMESPEC.unpack_from(stamps[0])
                self.first = sec + ns / 1e9
            else:  # no stamp from the kernel: when this thread read it
                self.first = time.time()
        return data

    def send(self, data: Any, flags: int = 0) -> int:
        self.first = None
        return super().send(data, flags)

    def sendmsg(self, *args: Any) -> int:  # type: ignore[override]
        self.first = None
        return super().sendmsg(*args)


class _Listening(socket.socket):
    """Accepts `_Stamped` connections (the option is inherited from this socket) and finds them by peer."""

    def __init__(self) -> None:
        super().__init__(socket.AF_INET, socket.SOCK_STREAM)
        self.conns: weakref.WeakValueDictionary[Any, _Stamped] = weakref.WeakValueDictionary()
        try:
            self.setsockopt(socket.SOL_SOCKET, SO_TIMESTAMPNS, 1)
        except OSError:  # not Linux: stamps taken when read
            pass

    def accept(self) -> tuple[socket.socket, Any]:
        fd, addr = self._accept()  # type: ignore[attr-defined]
        conn = _Stamped(self.family, self.type, self.proto, fileno=fd)
        if socket.getdefaulttimeout() is None and self.gettimeout():
            conn.setblocking(True)
        self.conns[addr] = conn
        return conn, addr


class Threaded:
    """Subclasses build their `app()`; `start()` serves it and sets `port`, `stop()` ends it."""

    port: int = 0
    _loop: asyncio.AbstractEventLoop | None = None
    _thread: threading.Thread | None = None
    _listening: _Listening | None = None

    def app(self) -> web.Application:
        raise NotImplementedError

    def arrived(self, request: Any) -> float:
        """When the client sent `request` (time.monotonic's clock), by the kernel's stamp of its first
        bytes; now, when there is none."""
        transport = getattr(request, "transport", None)
        peer = transport.get_extra_info("peername") if transport is not None else None
        conn = self._listening.conns.get(peer) if self._listening is not None and peer is not None else None
        if conn is None or conn.first is None:
            return time.monotonic()
        return conn.first - (time.time() - time.monotonic())

    def start(self: T) -> T:
        ready = threading.Event()

        def serve() -> None:
            loop = asyncio.new_event_loop()
            self._loop = loop
            asyncio.set_event_loop(loop)
            runner = web.AppRunner(self.app(), access_log=None)
            loop.run_until_complete(runner.setup())
            sock = _Listening()
            sock.bind(("127.0.0.1", 0))
            self._listening = sock
            site = web.SockSite(runner, sock)
            loop.run_until_complete(site.start())
            self.port = sock.getsockname()[1]
            ready.set()
            loop.run_forever()
            loop.run_until_complete(runner.cleanup())
            loop.close()

        self._thread = threading.Thread(target=serve, daemon=True)
        self._thread.start()
        ready.wait(10)
        return self

    def stop(self) -> None:
        if self._loop is not None:
            self._loop.call_soon_threadsafe(self._loop.stop)
        if self._thread is not None:
            self._thread.join(10)
