"""A TCP proxy in front of a real Redis that can lose one answer: the command reaches
the server and runs, then the client's connection is cut before the answer reaches it.
That is what a client sees when the network drops, or when Redis is restarted between
running a command and answering it: the client reconnects and sends the command again,
so whatever the first send changed is already there for the second.

``lose_answer_to(marker)`` arms it for the next command whose bytes contain ``marker``
(a key name, say); ``lost`` is set once that command has run and its connection is cut.
With ``down_s``, Redis then looks gone for that long, as during a restart: every
connection through the proxy is cut and new ones are closed as soon as they open; with
``refused``, it looks gone for that many new connections instead (a restart as short as
the client's own reconnection attempt).
Each client connection is served by its own thread; ``close()`` ends them all.
"""

from __future__ import annotations

import selectors
import socket
import threading
import time

DEADLINE_S = 10.0


class LossyProxy:
    def __init__(self, upstream_port: int) -> None:
        self.upstream = ("127.0.0.1", upstream_port)
        self._listener = socket.create_server(("127.0.0.1", 0))
        self._listener.settimeout(0.2)
        self.port = int(self._listener.getsockname()[1])
        self.lost = threading.Event()
        self._marker: bytes | None = None
        self._down_s = 0.0
        self._refuse_next = 0
        self._refusing = 0
        self._down_until = 0.0
        self._outages = 0  # a connection from before an outage is cut when one starts
        self._lock = threading.Lock()
        self._closed = threading.Event()
        self._threads: list[threading.Thread] = []
        self._accepting = threading.Thread(target=self._accept, daemon=True)
        self._accepting.start()

    def url(self, db: int = 0) -> str:
        return f"redis://127.0.0.1:{self.port}/{db}"

    def lose_answer_to(self, marker: bytes, *, down_s: float = 0.0, refused: int = 0) -> None:
        with self._lock:
            self._marker = marker
            self._down_s = down_s
            self._refuse_next = refused
        self.lost.clear()

    def _down(self) -> bool:
        """Whether a connection opening now finds Redis gone."""
        with self._lock:
            if self._refusing > 0:
                self._refusing -= 1
                return True
        return time.monotonic() < self._down_until

    def _take(self, data: bytes) -> bool:
        """Whether this command is the one to lose (disarmed once taken)."""
        with self._lock:
            if self._marker is not None and self._marker in data:
                self._marker = None
                if self._down_s or self._refuse_next:
                    self._down_until = time.monotonic() + self._down_s
                    self._refusing = self._refuse_next
                    self._outages += 1
                return True
        return False

    def _accept(self) -> None:
        while not self._closed.is_set():
            try:
                client, _ = self._listener.accept()
            except TimeoutError:
                continue
            except OSError:
                return
            if self._down():
                client.close()
                continue
            thread = threading.Thread(target=self._serve, args=(client,), daemon=True)
            self._threads.append(thread)
            thread.start()

    def _serve(self, client: socket.socket) -> None:
        server = socket.create_connection(self.upstream, timeout=DEADLINE_S)
        outages = self._outages
        with client, server, selectors.DefaultSelector() as selector:
            selector.register(client, selectors.EVENT_READ, server)
            selector.register(server, selectors.EVENT_READ, client)
            while not self._closed.is_set() and self._outages == outages:
                for key, _ in selector.select(timeout=0.2):
                    source: socket.socket = key.fileobj  # type: ignore[assignment]
                    data = source.recv(65536)
                    if not data:
                        return
                    if source is client and self._take(data):
                        server.sendall(data)
                        server.settimeout(DEADLINE_S)
                        server.recv(65536)  # the answer: the command has run
                        self.lost.set()
                        return  # both connections close here, the answer unsent
                    key.data.sendall(data)

    def close(self) -> None:
        self._closed.set()
        self._listener.close()
        self._accepting.join(timeout=DEADLINE_S)
        for thread in self._threads:
            thread.join(timeout=DEADLINE_S)
