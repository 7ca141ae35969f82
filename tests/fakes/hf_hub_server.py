# Copyright (c) 2026 aihost.llm_cluster contributors
# Apache License 2.0 (see LICENSE or https://www.apache.org/licenses/LICENSE-2.0)
"""A stand-in for the Hugging Face Hub's HTTP API, enough for the real huggingface_hub client's
``snapshot_download`` (pointed at it with ``HF_ENDPOINT``) to download one repository.

It serves the files of a local directory as the repository given on the command line, at one commit:

* ``GET /api/models/<repo>[/revision/<rev>]`` -> ``{"id", "sha", "siblings"}`` (the model's info);
* ``GET /api/models/<repo>/tree/<sha>?recursive=...`` -> one page of ``{"type": "file", "path", "size",
  "oid"}`` entries (no ``Link`` header: a single page);
* ``HEAD|GET /<repo>/resolve/<rev>/<path>`` -> the file, with ``X-Repo-Commit``, ``ETag`` and
  ``Content-Length``.

The field names and headers are the Hub's, as huggingface_hub 2.4.0 reads them; what the Hub sends
beyond them (LFS and Xet metadata, security status, redirects to a CDN, gated-repo checks) is not
reproduced. ``--fail-info N`` answers the first N model-info requests with 503 (the Hub's answer while
it is down), to prove that a caller retries. Every request is appended to ``--log`` as one line.

Usage: hf_hub_server.py --root DIR --repo OWNER/NAME --port-file FILE [--fail-info N] [--log FILE]
"""

from __future__ import annotations

import argparse
import hashlib
import json
import os
import threading
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from urllib.parse import unquote, urlsplit

SHA = "0123456789abcdef0123456789abcdef01234567"


def files_of(root):
    found = []
    for directory, dirnames, filenames in os.walk(root):
        dirnames.sort()
        for name in sorted(filenames):
            path = os.path.join(directory, name)
            found.append(os.path.relpath(path, root).replace(os.sep, "/"))
    return found


def oid(path):
    digest = hashlib.sha1()
    with open(path, "rb") as handle:
        data = handle.read()
    digest.update(b"blob %d\0" % len(data))
    digest.update(data)
    return digest.hexdigest()


def make_handler(args, state):
    class Handler(BaseHTTPRequestHandler):
        protocol_version = "HTTP/1.1"

        def log_message(self, format, *values):  # pylint: disable=redefined-builtin
            pass

        def record(self, status):
            if args.log:
                with state["lock"], open(args.log, "a", encoding="utf-8") as handle:
                    handle.write("%s %s %d\n" % (self.command, self.path, status))

        def send(self, status, body=b"", headers=None, content_type="application/json"):
            self.record(status)
            self.send_response(status)
            self.send_header("Content-Type", content_type)
            self.send_header("Content-Length", str(len(body)))
            for key, value in (headers or {}).items():
                self.send_header(key, value)
            self.end_headers()
            if self.command != "HEAD":
                self.wfile.write(body)

        def json(self, status, payload):
            self.send(status, json.dumps(payload).encode())

        def do_HEAD(self):
            self.do_GET()

        def do_GET(self):
            path = unquote(urlsplit(self.path).path)
            info = "/api/models/" + args.repo
            if path == info or path.startswith(info + "/revision/"):
                with state["lock"]:
                    state["info"] += 1
                    failing = state["info"] <= args.fail_info
                if failing:
                    self.json(503, {"error": "Service Unavailable"})
                    return
                self.json(200, {"id": args.repo, "modelId": args.repo, "sha": SHA, "private": False,
                                "siblings": [{"rfilename": name} for name in files_of(args.root)]})
            elif path.startswith(info + "/tree/"):
                self.json(200, [{"type": "file", "path": name, "size": os.path.getsize(os.path.join(args.root, name)),
                                 "oid": oid(os.path.join(args.root, name))} for name in files_of(args.root)])
            elif path.startswith("/%s/resolve/" % args.repo):
                name = path[len("/%s/resolve/" % args.repo):].split("/", 1)[1]
                full = os.path.join(args.root, name)
                if name not in files_of(args.root):
                    self.json(404, {"error": "Entry not found"})
                    return
                with open(full, "rb") as handle:
                    body = handle.read()
                self.send(200, body, {"X-Repo-Commit": SHA, "ETag": '"%s"' % oid(full)},
                          content_type="application/octet-stream")
            else:
                self.json(404, {"error": "Repository not found"})

    return Handler


def main():
    parser = argparse.ArgumentParser()
    parser.add_argument("--root", required=True)
    parser.add_argument("--repo", required=True)
    parser.add_argument("--port-file", required=True)
    parser.add_argument("--fail-info", type=int, default=0)
    parser.add_argument("--log", default="")
    args = parser.parse_args()
    state = {"info": 0, "lock": threading.Lock()}
    server = ThreadingHTTPServer(("127.0.0.1", 0), make_handler(args, state))
    with open(args.port_file + ".tmp", "w", encoding="utf-8") as handle:
        handle.write(str(server.server_address[1]))
    os.rename(args.port_file + ".tmp", args.port_file)
    server.serve_forever()


if __name__ == "__main__":
    main()
