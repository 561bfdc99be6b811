"""A recording stand-in for the Hugging Face Hub's HTTP API (just what an upload calls).

It answers repository creation, the card's YAML check, the pre-upload query (every file
"regular", so contents travel inside the commit) and the commit, and records each request
(method, path, headers, body) so a test can compare the upload with what it expects.
"""

from __future__ import annotations

import json
import threading
from dataclasses import dataclass
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from typing import Any


@dataclass
class Request:
    method: str
    path: str
    headers: dict[str, str]
    body: bytes


class HubStub:
    """``with HubStub() as hub: ... hub.url ... hub.requests``."""

    def __init__(self) -> None:
        self.requests: list[Request] = []
        stub = self

        class Handler(BaseHTTPRequestHandler):
            def _reply(self, obj: Any, code: int = 200) -> None:
                body = json.dumps(obj).encode()
                self.send_response(code)
                self.send_header("Content-Type", "application/json")
                self.send_header("Content-Length", str(len(body)))
                self.end_headers()
                self.wfile.write(body)

            def handle_any(self) -> None:
                size = int(self.headers.get("Content-Length") or 0)
                body = self.rfile.read(size) if size else b""
                stub.requests.append(Request(self.command, self.path, dict(self.headers), body))
                self._reply(*stub.answer(self.path, body))

            do_GET = do_POST = do_PUT = handle_any

            def log_message(self, *args: Any) -> None:
                pass

        self._server = ThreadingHTTPServer(("127.0.0.1", 0), Handler)
        self.url = f"http://127.0.0.1:{self._server.server_port}"

    def answer(self, path: str, body: bytes) -> tuple[Any, int]:
        if path.startswith("/api/repos/create"):
            kind = json.loads(body).get("type", "model")
            name = json.loads(body)["name"]
            org = json.loads(body).get("organization")
            prefix = "" if kind == "model" else f"{kind}s/"
            return {"url": f"{self.url}/{prefix}{org}/{name}"}, 200
        if path == "/api/validate-yaml":
            return {"errors": [], "warnings": []}, 200
        if "/preupload/" in path:
            files = json.loads(body)["files"]
            modes = [
                {"path": f["path"], "uploadMode": "regular", "shouldIgnore": False} for f in files
            ]
            return {"files": modes}, 200
        if "/commit/" in path:  # /api/{type}s/{org}/{name}/commit/{revision}
            repo = path.removeprefix("/api/").split("/commit/")[0].removeprefix("models/")
            return {"commitUrl": f"{self.url}/{repo}/commit/abc123", "commitOid": "abc123"}, 200
        return {"error": "not found"}, 404

    def __enter__(self) -> HubStub:
        threading.Thread(target=self._server.serve_forever, daemon=True).start()
        return self

    def __exit__(self, *exc: object) -> None:
        self._server.shutdown()
        self._server.server_close()
