"""A stand-in for the Hugging Face Hub's file API on 127.0.0.1 (this machine cannot reach the
Hub): `HEAD`/`GET /datasets/{owner}/{name}/resolve/{revision}/{path}` answer with the headers
`huggingface_hub` reads (`X-Repo-Commit`, `ETag`, `Content-Length`) and the file, from one local
directory per repository; a gated repository answers 403 `X-Error-Code: GatedRepo`, a missing
file 404 `EntryNotFound`. Every request is logged in order; `GET /__stage/NAME` adds a marker,
so a client can say where one step ends."""

import hashlib
import threading
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from pathlib import Path
from typing import Dict, List, Set, Tuple
from urllib.parse import unquote

COMMIT = "0123456789abcdef0123456789abcdef01234567"


class Hub:
    def __init__(self, repos: Dict[str, Path], gated: Set[str]) -> None:
        self.repos, self.gated = repos, gated
        self.log: List[Tuple[str, str]] = []
        hub = self

        class Handler(BaseHTTPRequestHandler):
            protocol_version = "HTTP/1.1"

            def log_message(self, *args):  # quiet
                pass

            def do_HEAD(self):
                hub._answer(self, body=False)

            def do_GET(self):
                hub._answer(self, body=True)

        self.server = ThreadingHTTPServer(("127.0.0.1", 0), Handler)
        self.url = f"http://127.0.0.1:{self.server.server_address[1]}"
        threading.Thread(target=self.server.serve_forever, daemon=True).start()

    def close(self) -> None:
        self.server.shutdown()
        self.server.server_close()

    def stages(self) -> Dict[str, List[Tuple[str, str]]]:
        """The requests between markers: `{marker: requests after the previous one}`."""
        out, cur = {}, []
        for method, path in self.log:
            if path.startswith("/__stage/"):
                out[path[len("/__stage/"):]] = cur
                cur = []
            else:
                cur.append((method, path))
        out["rest"] = cur
        return out

    def _answer(self, h: BaseHTTPRequestHandler, body: bool) -> None:
        path = unquote(h.path.split("?")[0])
        self.log.append((h.command, path))
        if path.startswith("/__stage/"):
            return self._send(h, 200, b"", {}, body)
        parts = path.split("/")
        # ['', 'datasets', owner, name, 'resolve', revision, *file]
        if len(parts) < 7 or parts[1] != "datasets" or parts[4] != "resolve":
            return self._send(h, 404, b"", {"X-Error-Code": "RepoNotFound"}, body)
        repo, file = f"{parts[2]}/{parts[3]}", "/".join(parts[6:])
        if repo in self.gated:
            return self._send(h, 403, b"", {"X-Error-Code": "GatedRepo",
                                            "X-Error-Message": f"Access to dataset {repo} is restricted."}, body)
        root = self.repos.get(repo)
        if root is None:
            return self._send(h, 401, b"", {"X-Error-Code": "RepoNotFound"}, body)
        f = root / file
        if ".." in parts or not f.is_file():
            return self._send(h, 404, b"", {"X-Error-Code": "EntryNotFound", "X-Repo-Commit": COMMIT}, body)
        data = f.read_bytes()
        etag = hashlib.sha256(data).hexdigest()
        self._send(h, 200, data, {"X-Repo-Commit": COMMIT, "ETag": f'"{etag}"'}, body)

    @staticmethod
    def _send(h, status: int, data: bytes, headers: Dict[str, str], body: bool) -> None:
        h.send_response(status)
        for k, v in headers.items():
            h.send_header(k, v)
        h.send_header("Content-Length", str(len(data)))
        h.end_headers()
        if body:
            h.wfile.write(data)
