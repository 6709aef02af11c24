"""A real HTTP/1.1 server on 127.0.0.1 for driver tests: answers every POST with a recorded JSON
body and keeps count of the TCP connections clients open and close (keep-alive connections stay
open until the client closes them, so a closed client is visible from the server)."""

from __future__ import annotations

import json
import threading
import time
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from typing import Any


class Loopback:
    def __init__(self, body: Callable[[str], dict[str, Any]]) -> None:
        self.body = body
        self.opened = 0
        self.closed = 0
        self.requests: list[str] = []
        self._lock = threading.Lock()
        loopback = self

        class Handler(BaseHTTPRequestHandler):
            protocol_version = "HTTP/1.1"

            def setup(self) -> None:
                super().setup()
                with loopback._lock:
                    loopback.opened += 1

            def finish(self) -> None:
                super().finish()
                with loopback._lock:
                    loopback.closed += 1

            def do_POST(self) -> None:
                length = int(self.headers.get("content-length") or 0)
                self.rfile.read(length)
                loopback.requests.append(self.path)
                data = json.dumps(loopback.body(self.path)).encode()
                self.send_response(200)
                self.send_header("content-type", "application/json")
                self.send_header("content-length", str(len(data)))
                self.end_headers()
                self.wfile.write(data)

            def log_message(self, format: str, *args: object) -> None:
                pass

        self.server = ThreadingHTTPServer(("127.0.0.1", 0), Handler)
        self.server.daemon_threads = True
        self.url = f"http://127.0.0.1:{self.server.server_address[1]}"

    @property
    def open_connections(self) -> int:
        with self._lock:
            return self.opened - self.closed

    def wait_closed(self, timeout: float = 5.0) -> bool:
        """Whether every connection a client opened is closed within ``timeout`` seconds."""
        deadline = time.monotonic() + timeout
        while time.monotonic() < deadline:
            if self.opened and self.open_connections == 0:
                return True
            time.sleep(0.01)
        return False


@contextmanager
def loopback(body: Callable[[str], dict[str, Any]]) -> Iterator[Loopback]:
    server = Loopback(body)
    thread = threading.Thread(target=server.server.serve_forever, daemon=True)
    thread.start()
    try:
        yield server
    finally:
        server.server.shutdown()
        server.server.server_close()
