"""A stand-in for the Hugging Face hub on 127.0.0.1, serving models' config.json the way
`huggingface_hub.hf_hub_download` reads it (a HEAD with the commit and ETag headers, then a GET).
No test reaches the real hub, so this is where `gtpo-openrlhf`'s fetch of a config
(gtpo.openrlhf.plan.fetch_failure) meets a hub: a public model, a gated one that needs the token
`GOOD_TOKEN`, and any other id, which is not found.

It could hide: the real hub's redirects to its CDN, rate limits (429), proxies, and what a
token the real hub half-accepts looks like; the answers here carry the error codes
huggingface_hub 1.x maps to GatedRepoError and RepositoryNotFoundError.
"""

from __future__ import annotations

import hashlib
import json
import threading
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer

GOOD_TOKEN = "hf_stand_in_token"


class HubOnLoopback:
    """`with HubOnLoopback({"org/name": config}, gated={"org/gated"}) as hub:` serves at
    `hub.url`; `hub.requests` lists (method, path, Authorization header) as they came."""

    def __init__(self, models: dict[str, dict], gated: set[str] | frozenset[str] = frozenset()):
        self.models, self.gated = models, set(gated)
        self.requests: list[tuple[str, str, str | None]] = []
        self.server = ThreadingHTTPServer(("127.0.0.1", 0), self._handler())
        self.url = f"http://127.0.0.1:{self.server.server_address[1]}"

    def _handler(self) -> type[BaseHTTPRequestHandler]:
        hub = self

        class Handler(BaseHTTPRequestHandler):
            def log_message(self, *args) -> None:
                pass

            def do_HEAD(self) -> None:
                self._answer(with_body=False)

            def do_GET(self) -> None:
                self._answer(with_body=True)

            def _answer(self, with_body: bool) -> None:
                token = self.headers.get("Authorization")
                hub.requests.append((self.command, self.path, token))
                parts = self.path.split("?")[0].strip("/").split("/")
                repo = "/".join(parts[:2])
                if repo in hub.gated and token != f"Bearer {GOOD_TOKEN}":
                    return self._error(401, "GatedRepo", "Access to this model is restricted.")
                if repo not in hub.models or parts[2:] != ["resolve", "main", "config.json"]:
                    return self._error(404, "RepoNotFound", "Repository not found.")
                body = json.dumps(hub.models[repo]).encode()
                self.send_response(200)
                self.send_header("X-Repo-Commit", hashlib.sha1(repo.encode()).hexdigest())
                self.send_header("ETag", f'"{hashlib.sha1(body).hexdigest()}"')
                self.send_header("Content-Length", str(len(body)))
                self.end_headers()
                if with_body:
                    self.wfile.write(body)

            def _error(self, status: int, code: str, message: str) -> None:
                self.send_response(status)
                self.send_header("X-Error-Code", code)
                self.send_header("X-Error-Message", message)
                self.send_header("Content-Length", "0")
                self.end_headers()

        return Handler

    def __enter__(self) -> HubOnLoopback:
        threading.Thread(target=self.server.serve_forever, daemon=True).start()
        return self

    def __exit__(self, *exc: object) -> None:
        self.server.shutdown()
        self.server.server_close()
