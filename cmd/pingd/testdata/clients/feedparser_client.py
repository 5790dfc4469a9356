#!/usr/bin/python3
"""A feed reader with Python's feedparser against pingd's own feeds of a
node, and what such a reader does next with what the feed advertises:
register with the rssCloud <cloud>, subscribe at the rel="hub" link.

Usage: feedparser_client.py CONFIG.json

Prints one JSON object of what feedparser saw; the Go test holds the
expectations.
"""

import http.server
import json
import sys
import threading
import time
import urllib.error
import urllib.parse
import urllib.request

import feedparser

lock = threading.Lock()


class Receiver(http.server.BaseHTTPRequestHandler):
    """Callback endpoint: echoes WebSub and rssCloud challenges, records
    everything."""

    requests = []

    def log_message(self, *args):
        pass

    def _record(self, body):
        u = urllib.parse.urlsplit(self.path)
        with lock:
            Receiver.requests.append({
                "method": self.command, "path": u.path,
                "query": dict(urllib.parse.parse_qsl(u.query)),
                "content_type": self.headers.get("Content-Type", ""),
                "link": self.headers.get("Link", ""),
                "body": body.decode("utf-8", "replace"),
            })

    def do_GET(self):
        self._record(b"")
        q = dict(urllib.parse.parse_qsl(urllib.parse.urlsplit(self.path).query))
        body = q.get("hub.challenge", q.get("challenge", "")).encode()
        self.send_response(200)
        self.send_header("Content-Length", str(len(body)))
        self.end_headers()
        self.wfile.write(body)

    def do_POST(self):
        n = int(self.headers.get("Content-Length") or 0)
        self._record(self.rfile.read(min(n, 1 << 20)))
        self.send_response(200)
        self.send_header("Content-Length", "0")
        self.end_headers()


def received(path, method=None):
    with lock:
        return [r for r in Receiver.requests if r["path"] == path and (method is None or r["method"] == method)]


def summary(d):
    """What a reader takes from a parsed feed."""
    headers = {k.lower(): v for k, v in (d.get("headers") or {}).items()}
    return {
        "status": d.get("status"),
        "bozo": bool(d.get("bozo")),
        "bozo_exception": str(d.get("bozo_exception", "")),
        "version": d.get("version", ""),
        "etag": d.get("etag"),
        "modified": d.get("modified"),
        "headers": {k: headers[k] for k in ("content-type", "content-encoding", "im", "delta-base",
                                               "cache-control", "vary", "etag", "last-modified") if k in headers},
        "title": d.feed.get("title", ""),
        "links": [{"rel": l.get("rel"), "href": l.get("href")} for l in d.feed.get("links", [])],
        "cloud": dict(d.feed.get("cloud", {})),
        "entries": [{"id": e.get("id"), "title": e.get("title"), "link": e.get("link")} for e in d.entries],
    }


def post_form(url, fields):
    data = urllib.parse.urlencode(fields).encode()
    try:
        with urllib.request.urlopen(url, data=data, timeout=30) as resp:
            return resp.status, resp.read().decode("utf-8", "replace")
    except urllib.error.HTTPError as e:
        return e.code, e.read().decode("utf-8", "replace")


def websub_active(base, node, token):
    """Whether the admin API lists an active WebSub subscription of node."""
    req = urllib.request.Request("%s/api/nodes/%s/subscribers" % (base, urllib.parse.quote(node, safe="")),
                                 headers={"Authorization": "Bearer " + token})
    with urllib.request.urlopen(req, timeout=10) as resp:
        subs = json.load(resp).get("subscribers") or []
    return any(s.get("kind") == "websub" and s.get("state") == "active" for s in subs)


def wait_until(pred, limit):
    end = time.time() + limit
    while time.time() < end:
        if pred():
            return True
        time.sleep(0.1)
    return pred()


def main():
    with open(sys.argv[1]) as f:
        cfg = json.load(f)
    base, node = cfg["pingd_url"], cfg["node"]
    urls = {fmt: "%s/%s/%s" % (base, fmt, urllib.parse.quote(node, safe="")) for fmt in ("atom", "rss")}
    report = {}

    first = {}
    for fmt, url in urls.items():
        d = feedparser.parse(url)
        first[fmt] = d
        report[fmt] = summary(d)
        # Conditional requests with what feedparser kept.
        report[fmt + "_etag_modified"] = summary(feedparser.parse(url, etag=d.get("etag"), modified=d.get("modified")))
        report[fmt + "_etag"] = summary(feedparser.parse(url, etag=d.get("etag")))
        report[fmt + "_modified"] = summary(feedparser.parse(url, modified=d.get("modified")))

    # A whitelist node's feed, without and with its token.
    private = "%s/atom/%s" % (base, urllib.parse.quote(cfg["whitelist_node"], safe=""))
    report["private_no_token"] = summary(feedparser.parse(private))
    report["private_token"] = summary(feedparser.parse(private, request_headers={"Authorization": "Bearer " + cfg["token"]}))

    # What the feeds advertise, used as a stranger would.
    srv = http.server.ThreadingHTTPServer(("127.0.0.1", 0), Receiver)
    threading.Thread(target=srv.serve_forever, daemon=True).start()
    port = srv.server_address[1]
    callback = "http://127.0.0.1:%d" % port

    cloud = first["rss"].feed.get("cloud", {})
    if cloud:
        register = "http://%s:%s%s" % (cloud.get("domain"), cloud.get("port"), cloud.get("path"))
        status, body = post_form(register, {"notifyProcedure": "", "port": str(port), "path": "/cloud",
                                            "protocol": cloud.get("protocol", ""), "url1": urls["rss"]})
        report["cloud_register"] = {"url": register, "status": status, "body": body}
    hubs = [l["href"] for l in first["atom"].feed.get("links", []) if l.get("rel") == "hub"]
    selfs = [l["href"] for l in first["atom"].feed.get("links", []) if l.get("rel") == "self"]
    if hubs and selfs:
        status, body = post_form(hubs[0], {"hub.mode": "subscribe", "hub.topic": selfs[0],
                                           "hub.callback": callback + "/websub"})
        verified = wait_until(lambda: received("/websub", "GET"), 20)
        report["websub_subscribe"] = {"hub": hubs[0], "topic": selfs[0], "status": status, "body": body,
                                      "verifications": received("/websub", "GET"), "verified": verified}
        # The change must come after the verified subscription is stored.
        report["websub_active"] = wait_until(lambda: websub_active(base, node, cfg["admin_token"]), 20)

    # A change: a conditional GET now gets the delta, the receivers a notification.
    cloud_before = len(received("/cloud", "POST"))
    report["cloud_register_requests"] = received("/cloud")
    urllib.request.urlopen(cfg["control_url"], data=urllib.parse.urlencode(
        {"guid": "fp-1", "title": "Seen by feedparser"}).encode(), timeout=10).read()
    post_form(base + "/ping", {"url": cfg["feed_url"]})

    def in_atom():
        with urllib.request.urlopen(urls["atom"], timeout=10) as resp:
            return b"Seen by feedparser" in resp.read()

    report["change_seen"] = wait_until(in_atom, 20)
    for fmt, url in urls.items():
        d = first[fmt]
        report[fmt + "_after_change"] = summary(feedparser.parse(url, etag=d.get("etag"), modified=d.get("modified")))
    wait_until(lambda: len(received("/cloud", "POST")) > cloud_before and received("/websub", "POST"), 20)
    time.sleep(0.5)
    report["cloud_notifications"] = received("/cloud", "POST")[cloud_before:]
    posts = received("/websub", "POST")
    report["websub_posts"] = [{"content_type": p["content_type"], "link": p["link"],
                               "feed": summary(feedparser.parse(p["body"]))} for p in posts]
    srv.shutdown()

    json.dump(report, sys.stdout, indent=1, sort_keys=True, default=str)
    sys.stdout.write("\n")


if __name__ == "__main__":
    main()
