"""A test server's lifecycle: its aiohttp app on 127.0.0.1 (a free port) in a background thread with
its own event loop, so sync tests, async tests and the CLI in a subprocess can all call it alike."""

from __future__ import annotations

import asyncio
import threading
from typing import Any, TypeVar

from aiohttp import web

T = TypeVar("T", bound="Threaded")


class Threaded:
    """Subclasses build their `app()`; `start()` serves it and sets `port`, `stop()` ends it."""

    port: int = 0
    _loop: asyncio.AbstractEventLoop | None = None
    _thread: threading.Thread | None = None

    def app(self) -> web.Application:
        raise NotImplementedError

    def start(self: T) -> T:
        ready = threading.Event()

        def serve() -> None:
            loop = asyncio.new_event_loop()
            self._loop = loop
            asyncio.set_event_loop(loop)
            runner = web.AppRunner(self.app(), access_log=None)
            loop.run_until_complete(runner.setup())
            site = web.TCPSite(runner, "127.0.0.1", 0)
            loop.run_until_complete(site.start())
            server: Any = site._server
            self.port = server.sockets[0].getsockname()[1]
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
