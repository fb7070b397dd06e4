"""A real HTTP server on loopback for a handler class of ``http.server`` (in a thread):
for tests of clients against servers that are not this project's (a web page, a
stream without event ids)."""

from __future__ import annotations

import threading
from collections.abc import Iterator
from contextlib import contextmanager
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer


@contextmanager
def serving_handler(handler: type[BaseHTTPRequestHandler]) -> Iterator[str]:
    """Serve ``handler`` on 127.0.0.1 (a free port); yields ``http://127.0.0.1:<port>``."""
    server = ThreadingHTTPServer(("127.0.0.1", 0), handler)
    worker = threading.Thread(target=server.serve_forever, daemon=True)
    worker.start()
    try:
        yield f"http://127.0.0.1:{server.server_address[1]}"
    finally:
        server.shutdown()
        server.server_close()
        worker.join(timeout=10)


class QuietHandler(BaseHTTPRequestHandler):
    """A handler that logs nothing and reads the request body (``self.body``) first."""

    body = b""

    def read_body(self) -> bytes:
        self.body = self.rfile.read(int(self.headers.get("Content-Length") or 0))
        return self.body

    def log_message(self, format: str, *args: object) -> None:
        pass
