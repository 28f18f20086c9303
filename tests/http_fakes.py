"""A local HTTP server for test doubles of HTTP APIs (an OpenAI-compatible provider, a proxy).

:class:`JSONHandler` is a quiet ``BaseHTTPRequestHandler`` with :meth:`JSONHandler.send_json`;
:func:`serve` runs a handler class on a free port of 127.0.0.1 in a daemon thread.

What it does not do: TLS, keep-alive tuning, or anything a test does not ask of it; call
``server.shutdown()`` when done.
"""

from __future__ import annotations

import threading
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from typing import Any


class JSONHandler(BaseHTTPRequestHandler):
    """A request handler that logs nothing and answers with JSON bytes."""

    def log_message(self, *a: Any) -> None:
        pass

    def send_json(self, code: int, data: bytes, headers: dict[str, str] | None = None) -> None:
        """Send status ``code``, any extra ``headers``, and ``data`` as ``application/json``."""
        self.send_response(code)
        for name, value in (headers or {}).items():
            self.send_header(name, value)
        self.send_header("content-type", "application/json")
        self.send_header("content-length", str(len(data)))
        self.end_headers()
        self.wfile.write(data)


def serve(handler: type[BaseHTTPRequestHandler]) -> tuple[ThreadingHTTPServer, str]:
    """Start ``handler`` on a free local port; returns the server and ``http://127.0.0.1:PORT``."""
    server = ThreadingHTTPServer(("127.0.0.1", 0), handler)
    threading.Thread(target=server.serve_forever, daemon=True).start()
    return server, f"http://127.0.0.1:{server.server_address[1]}"
