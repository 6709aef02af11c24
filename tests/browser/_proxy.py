"""A loopback TCP proxy the browser talks to, so a test can drop its connections (a network that
goes away) and refuse new ones for a while, with the service untouched behind it."""

from __future__ import annotations

import contextlib
import socket
import threading


class Proxy:
    """Forwards ``127.0.0.1:<port>`` to ``127.0.0.1:<target>``. ``cut()`` closes every open
    connection; while ``blocked``, new connections are closed as soon as they arrive."""

    def __init__(self, target: int) -> None:
        self.target = target
        self.blocked = False
        self._listener = socket.create_server(("127.0.0.1", 0))
        self.port = int(self._listener.getsockname()[1])
        self._open: set[socket.socket] = set()
        self._lock = threading.Lock()
        self._closed = False
        threading.Thread(target=self._accept, name="proxy-accept", daemon=True).start()

    @property
    def url(self) -> str:
        return f"http://127.0.0.1:{self.port}"

    def _accept(self) -> None:
        while not self._closed:
            try:
                client, _ = self._listener.accept()
            except OSError:
                return
            if self.blocked:
                client.close()
                continue
            try:
                upstream = socket.create_connection(("127.0.0.1", self.target), timeout=5)
            except OSError:
                client.close()
                continue
            upstream.settimeout(None)
            with self._lock:
                self._open.update((client, upstream))
            for a, b in ((client, upstream), (upstream, client)):
                threading.Thread(target=self._pump, args=(a, b), daemon=True).start()

    def _pump(self, source: socket.socket, sink: socket.socket) -> None:
        try:
            while chunk := source.recv(65536):
                sink.sendall(chunk)
        except OSError:
            pass
        finally:
            for s in (source, sink):
                self._drop(s)

    def _drop(self, s: socket.socket) -> None:
        with self._lock:
            self._open.discard(s)
        with contextlib.suppress(OSError):
            s.shutdown(socket.SHUT_RDWR)
        s.close()

    def cut(self) -> None:
        """Drop every open connection (both sides), as a lost network does."""
        with self._lock:
            sockets = list(self._open)
        for s in sockets:
            self._drop(s)

    def close(self) -> None:
        self._closed = True
        self.cut()
        self._listener.close()
