"""A reverse proxy on 127.0.0.1 that records every request body on its way to a reward server.

The real-model tests check what the reward server *received* from a trainer (the chat-templated
prompt, the query, the labels), which no client-side spy shows for OpenRLHF: its requests leave
from Ray worker processes. The proxy forwards each POST unchanged and returns the server's answer
unchanged; it is an observer, not a stand-in for anything.
"""

from __future__ import annotations

import json
import threading
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer

import httpx


class RecordingProxy:
    """`with RecordingProxy(upstream) as proxy:` point a client at `proxy.url`; afterwards
    `proxy.records` holds (path with its query string, JSON body) of every POST, in arrival
    order."""

    def __init__(self, upstream: str) -> None:
        self.upstream = upstream.rstrip("/")
        self.records: list[tuple[str, dict]] = []
        self._lock = threading.Lock()
        client = httpx.Client(timeout=300)
        proxy = self

        class Handler(BaseHTTPRequestHandler):
            protocol_version = "HTTP/1.1"  # keep-alive, as the trainers' pooled clients expect

            def do_POST(self) -> None:
                body = self.rfile.read(int(self.headers.get("Content-Length", 0)))
                with proxy._lock:
                    proxy.records.append((self.path, json.loads(body)))
                headers = {k: v for k, v in self.headers.items() if k.lower() == "authorization"}
                answer = client.post(
                    proxy.upstream + self.path,
                    content=body,
                    headers={**headers, "Content-Type": "application/json"},
                )
                self.send_response(answer.status_code)
                self.send_header("Content-Type", "application/json")
                self.send_header("Content-Length", str(len(answer.content)))
                self.end_headers()
                self.wfile.write(answer.content)

            def log_message(self, *_) -> None:  # quiet: the records are the log
                pass

        self._server = ThreadingHTTPServer(("127.0.0.1", 0), Handler)
        self._server.daemon_threads = True
        self._client = client
        self.url = f"http://127.0.0.1:{self._server.server_address[1]}"
        self._thread = threading.Thread(target=self._server.serve_forever, daemon=True)

    def __enter__(self) -> RecordingProxy:
        self._thread.start()
        return self

    def __exit__(self, *exc: object) -> None:
        self._server.shutdown()
        self._server.server_close()
        self._client.close()

    def samples(self, route: str = "/get_reward") -> list[tuple[str, str, object]]:
        """(query, prompt, label) of every sample sent to `route`, in arrival order."""
        out = []
        with self._lock:
            for path, body in self.records:
                if path.split("?")[0] == route:
                    out += list(zip(body["query"], body["prompts"], body["labels"], strict=True))
        return out
