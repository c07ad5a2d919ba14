#!/usr/bin/env python3
"""A stand-in API for .ci/container-test: answers every request 200 with a JSON echo of the method, path and
the X-AppCheck-* headers the gateway added. Binds 0.0.0.0 on a free port (containers reach it through the
engine's host address) and writes the port to the file named by argv[1]."""
import json
import sys
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer


class Echo(BaseHTTPRequestHandler):
    protocol_version = "HTTP/1.1"

    def answer(self):
        length = int(self.headers.get("Content-Length") or 0)
        if length:
            self.rfile.read(length)
        body = json.dumps({
            "method": self.command,
            "path": self.path,
            "appcheck": {k.lower(): v for k, v in self.headers.items() if k.lower().startswith("x-appcheck-")},
        }).encode()
        self.send_response(200)
        self.send_header("Content-Type", "application/json")
        self.send_header("Content-Length", str(len(body)))
        self.end_headers()
        self.wfile.write(body)

    do_GET = do_POST = do_PUT = do_DELETE = do_PATCH = answer

    def log_message(self, *args):
        pass


server = ThreadingHTTPServer(("0.0.0.0", 0), Echo)
with open(sys.argv[1] + ".tmp", "w") as f:
    f.write(str(server.server_address[1]))
import os
os.replace(sys.argv[1] + ".tmp", sys.argv[1])
server.serve_forever()
