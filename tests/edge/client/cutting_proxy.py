"""A TCP proxy on 127.0.0.1 that can cut its connections: a dropped link between a ground station and the server."""

from __future__ import annotations

import socket
import threading


class CuttingProxy:
    """Forwards 127.0.0.1:``port`` to 127.0.0.1:``target``. ``cut_after(n)``: once ``n`` more client->server bytes
    have passed, every open connection is closed (once). ``cut_now()``: close them now. ``cuts`` counts cuts."""

    def __init__(self, target: int):
        self.target = target
        self.server = socket.socket()
        self.server.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
        self.server.bind(("127.0.0.1", 0))
        self.server.listen(16)
        self.port = self.server.getsockname()[1]
        self.lock = threading.Lock()
        self.conns: list[socket.socket] = []
        self.budget: int | None = None
        self.cuts = 0
        self.running = True
        threading.Thread(target=self._accept, daemon=True).start()

    def cut_after(self, n_bytes: int) -> None:
        with self.lock:
            self.budget = n_bytes

    def cut_now(self) -> None:
        with self.lock:
            conns, self.conns = self.conns, []
            self.cuts += 1
        for c in conns:
            try:
                c.shutdown(socket.SHUT_RDWR)
            except OSError:
                pass
            c.close()

    def close(self) -> None:
        self.running = False
        self.server.close()
        self.cut_now()

    def _accept(self) -> None:
        while self.running:
            try:
                client, _ = self.server.accept()
            except OSError:
                return
            try:
                upstream = socket.create_connection(("127.0.0.1", self.target))
            except OSError:
                client.close()
                continue
            with self.lock:
                self.conns += [client, upstream]
            threading.Thread(target=self._pipe, args=(client, upstream, True), daemon=True).start()
            threading.Thread(target=self._pipe, args=(upstream, client, False), daemon=True).start()

    def _pipe(self, src: socket.socket, dst: socket.socket, upstream: bool) -> None:
        try:
            while data := src.recv(65536):
                cut = False
                if upstream:
                    with self.lock:
                        if self.budget is not None:
                            if len(data) >= self.budget:
                                data, self.budget, cut = data[: self.budget], None, True
                            else:
                                self.budget -= len(data)
                dst.sendall(data)
                if cut:
                    self.cut_now()
                    return
        except OSError:
            pass
        finally:
            for s in (src, dst):
                try:
                    s.close()
                except OSError:
                    pass
