"""A TCP forwarder on 127.0.0.1 whose connections a test can cut, and whose target it can move
(to a restarted server on another port): a dropped connection, made on purpose."""

from __future__ import annotations

import contextlib
import socket
import threading

__all__ = ["CutProxy"]


class CutProxy:
    """Forwards each connection on ``url`` to 127.0.0.1:``target``; ``cut()`` ends every open
    one (both sides), ``retarget(port)`` sends new ones elsewhere."""

    def __init__(self, target: int) -> None:
        self.target = target
        self.accepted = 0  # connections made through the proxy so far
        self._pairs: list[tuple[socket.socket, socket.socket]] = []
        self._lock = threading.Lock()
        self._listener = socket.create_server(("127.0.0.1", 0))
        self.url = f"http://127.0.0.1:{self._listener.getsockname()[1]}"
        self._closed = False
        threading.Thread(target=self._accept, name="cut-proxy", daemon=True).start()

    def _accept(self) -> None:
        while not self._closed:
            try:
                client, _ = self._listener.accept()
            except OSError:
                return
            try:
                upstream = socket.create_connection(("127.0.0.1", self.target), timeout=5)
                upstream.settimeout(None)
            except OSError:
                client.close()
                continue
            with self._lock:
                self._pairs.append((client, upstream))
                self.accepted += 1
            for a, b in ((client, upstream), (upstream, client)):
                threading.Thread(target=self._pump, args=(a, b), daemon=True).start()

    @staticmethod
    def _pump(src: socket.socket, dst: socket.socket) -> None:
        try:
            while data := src.recv(65536):
                dst.sendall(data)
        except OSError:
            pass
        finally:
            for s in (src, dst):
                with contextlib.suppress(OSError):
                    s.shutdown(socket.SHUT_RDWR)

    def cut(self) -> int:
        """End every open connection; how many were open."""
        with self._lock:
            pairs, self._pairs = self._pairs, []
        for pair in pairs:
            for s in pair:
                with contextlib.suppress(OSError):
                    s.shutdown(socket.SHUT_RDWR)
                s.close()
        return len(pairs)

    def retarget(self, port: int) -> None:
        self.target = port

    def close(self) -> None:
        self._closed = True
        self._listener.close()
        self.cut()

    def __enter__(self) -> CutProxy:
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()
