#!/usr/bin/python3
"""A subscriber's callback endpoint written with Python's http.server, as
someone following the WebSub, GetPingd, rssCloud or CNWS documents would
write it.

Usage: callback_server.py

Listens on 127.0.0.1 (a free port). Prints "LISTENING <base URL>" first,
then one JSON line per request it receives. It confirms verifications of
intent by echoing hub.challenge (WebSub, GetPingd) or challenge (rssCloud),
answers CNWS notifications (paths under /cnws) with status true, and
every other request with 204. It stops when its standard input closes.
"""

import http.server
import json
import sys
import threading
import urllib.parse

MAX_BODY = 1 << 20
CNWS_TRUE = (b'<?xml version="1.0"?><notification version="1.0" '
             b'xmlns="http://www.owlfish.com/thoughts/cnws-2003-04-08.html">'
             b'<result><status>true</status></result></notification>')

lock = threading.Lock()


class Handler(http.server.BaseHTTPRequestHandler):
    protocol_version = "HTTP/1.1"

    def log_message(self, *args):
        pass  # the JSON lines are the log

    def record(self, body):
        u = urllib.parse.urlsplit(self.path)
        line = json.dumps({
            "method": self.command,
            "path": u.path,
            "query": dict(urllib.parse.parse_qsl(u.query, keep_blank_values=True)),
            "headers": {k.lower(): v for k, v in self.headers.items()},
            "body": body.decode("utf-8", "replace"),
        })
        with lock:
            sys.stdout.write(line + "\n")
            sys.stdout.flush()

    def answer(self, status, body=b"", content_type="text/plain"):
        self.send_response(status)
        self.send_header("Content-Type", content_type)
        self.send_header("Content-Length", str(len(body)))
        self.end_headers()
        if self.command != "HEAD":
            self.wfile.write(body)

    def do_GET(self):
        self.record(b"")
        q = dict(urllib.parse.parse_qsl(urllib.parse.urlsplit(self.path).query))
        challenge = q.get("hub.challenge", q.get("challenge", ""))
        self.answer(200, challenge.encode())

    def read_body(self):
        n = int(self.headers.get("Content-Length") or 0)
        return self.rfile.read(min(n, MAX_BODY))

    def do_POST(self):
        body = self.read_body()
        self.record(body)
        if self.path.startswith("/cnws"):
            self.answer(200, CNWS_TRUE, "text/xml")
        else:
            self.answer(204)

    # GetPingd webhooks may be delivered with NOTIFY.
    do_NOTIFY = do_POST
    do_PUT = do_POST


def main():
    srv = http.server.ThreadingHTTPServer(("127.0.0.1", 0), Handler)
    srv.daemon_threads = True
    threading.Thread(target=srv.serve_forever, daemon=True).start()
    sys.stdout.write("LISTENING http://127.0.0.1:%d\n" % srv.server_address[1])
    sys.stdout.flush()
    sys.stdin.read()  # until the test closes our standard input
    srv.shutdown()


if __name__ == "__main__":
    main()
