#!/usr/bin/python3
"""Weblog and rssCloud pings with Python's xmlrpc.client, and rssCloud
receivers written with http.server and xmlrpc.server, against pingd's
/RPC2.

Usage: xmlrpc_client.py CONFIG.json

Prints one JSON object: what each call returned, or the Fault (code and
string) xmlrpc.client raised; the Go test holds the expectations.
"""

import http.server
import json
import sys
import threading
import time
import traceback
import urllib.parse
import urllib.request
import xmlrpc.client
import xmlrpc.server

lock = threading.Lock()


class Recorder(http.server.BaseHTTPRequestHandler):
    """An rssCloud http-post receiver: records requests, echoes challenges."""

    requests = []

    def log_message(self, *args):
        pass

    def _record(self, body):
        u = urllib.parse.urlsplit(self.path)
        with lock:
            Recorder.requests.append({
                "method": self.command, "path": u.path,
                "query": dict(urllib.parse.parse_qsl(u.query)),
                "form": dict(urllib.parse.parse_qsl(body.decode("utf-8", "replace"))),
                "content_type": self.headers.get("Content-Type", ""),
            })

    def do_GET(self):
        self._record(b"")
        q = dict(urllib.parse.parse_qsl(urllib.parse.urlsplit(self.path).query))
        body = q.get("challenge", "").encode()
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


def recorded():
    with lock:
        return list(Recorder.requests)


def serve(server):
    threading.Thread(target=server.serve_forever, daemon=True).start()
    return server.server_address[1]


class XMLRPCReceiver:
    """An rssCloud xml-rpc receiver: the notify procedure returns true."""

    def __init__(self):
        self.calls = []

    def notify(self, url):
        with lock:
            self.calls.append(url)
        return True

    def snapshot(self):
        with lock:
            return list(self.calls)


def call(proxy, method, *args):
    """A call's result, or the Fault xmlrpc.client raised."""
    try:
        return {"result": getattr(proxy, method)(*args)}
    except xmlrpc.client.Fault as f:
        return {"fault": {"code": f.faultCode, "string": f.faultString}}
    except Exception as e:
        return {"error": "%s: %s" % (type(e).__name__, e), "trace": traceback.format_exc()}


def raw_call(url, body):
    """Posts a body xmlrpc.client would never send; reads the answer with
    xmlrpc.client's own parser."""
    req = urllib.request.Request(url, data=body, headers={"Content-Type": "text/xml"})
    with urllib.request.urlopen(req, timeout=10) as resp:
        text = resp.read()
        status = resp.status
    try:
        params, _ = xmlrpc.client.loads(text)
        return {"status": status, "result": params[0] if params else None}
    except xmlrpc.client.Fault as f:
        return {"status": status, "fault": {"code": f.faultCode, "string": f.faultString}}


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
    rpc_url = cfg["pingd_url"] + "/RPC2"
    feed = cfg["feed_url"]
    proxy = xmlrpc.client.ServerProxy(rpc_url, allow_none=False)
    report = {}

    # Pings.
    report["ping"] = call(proxy, "weblogUpdates.ping", "Test blog", feed)
    report["extended_ping"] = call(proxy, "weblogUpdates.extendedPing", "Test blog",
                                   "http://127.0.0.1/site", "http://127.0.0.1/site/changed", feed)
    report["extended_ping_tags"] = call(proxy, "weblogUpdates.extendedPing", "Test blog",
                                        "http://127.0.0.1/site", "http://127.0.0.1/site/changed", feed, "a|b")
    report["cloud_ping"] = call(proxy, "rssCloud.ping", feed)

    # The seed's own sample: untyped <value>s are strings (XML-RPC spec).
    report["untyped_ping"] = raw_call(rpc_url, (
        "<?xml version=\"1.0\"?><methodCall><methodName>weblogUpdates.ping</methodName><params>"
        "<param><value>Test blog</value></param><param><value>%s</value></param>"
        "</params></methodCall>" % feed).encode())
    # WordPress pings extendedPing(name, home, feed) first and falls back to
    # ping(name, home) on a fault; the home page is matched to the sources
    # that link to it.
    report["wordpress_extended_ping"] = call(proxy, "weblogUpdates.extendedPing", "Test blog", cfg["site_url"], feed)
    report["wordpress_fallback_ping"] = call(proxy, "weblogUpdates.ping", "Test blog", cfg["site_url"])

    # Bad calls.
    report["fault_no_params"] = call(proxy, "weblogUpdates.ping")
    report["fault_wrong_types"] = call(proxy, "weblogUpdates.ping", 1, 2)
    report["fault_unknown_method"] = call(proxy, "no.such.method", "x")
    report["fault_cloud_ping_not_http"] = call(proxy, "rssCloud.ping", "ftp://127.0.0.1/feed")
    report["fault_please_notify_port"] = call(proxy, "rssCloud.pleaseNotify", "", 0, "/x", "http-post", [feed])
    report["fault_please_notify_short"] = call(proxy, "rssCloud.pleaseNotify", "", 80)
    report["fault_not_xml"] = raw_call(rpc_url, b"this is not XML")
    report["fault_truncated"] = raw_call(rpc_url, b"<?xml version='1.0'?><methodCall><methodName>rssCloud.ping</methodName>")

    # rssCloud registrations, each with a receiver of this script.
    http_port = serve(http.server.ThreadingHTTPServer(("127.0.0.1", 0), Recorder))
    receiver = XMLRPCReceiver()
    rpc_srv = xmlrpc.server.SimpleXMLRPCServer(("127.0.0.1", 0), logRequests=False, allow_none=False)
    rpc_srv.register_function(receiver.notify, "myCloud.notify")
    rpc_port = serve(rpc_srv)

    report["please_notify_http_post"] = call(proxy, "rssCloud.pleaseNotify", "", http_port, "/notify", "http-post", [feed])
    report["please_notify_http_post_requests"] = recorded()
    before = len(recorded())
    report["please_notify_domain"] = call(proxy, "rssCloud.pleaseNotify", "", http_port, "/verified", "http-post", [feed], "127.0.0.1")
    report["please_notify_domain_requests"] = recorded()[before:]
    report["please_notify_xml_rpc"] = call(proxy, "xmlStorageSystem.rssPleaseNotify", "myCloud.notify", rpc_port, "/RPC2", "xml-rpc", [feed])
    report["please_notify_xml_rpc_calls"] = receiver.snapshot()
    # A port where nobody listens: the registration cannot be verified.
    dead = http.server.HTTPServer(("127.0.0.1", 0), Recorder)
    dead_port = dead.server_address[1]
    dead.server_close()
    report["please_notify_unreachable"] = call(proxy, "rssCloud.pleaseNotify", "", dead_port, "/nobody", "http-post", [feed])

    # A change, pinged over XML-RPC, reaches both receivers.
    notified_http = len([r for r in recorded() if r["method"] == "POST"])
    notified_rpc = len(receiver.snapshot())
    data = urllib.parse.urlencode({"guid": "rpc-1", "title": "After an XML-RPC ping"}).encode()
    urllib.request.urlopen(cfg["control_url"], data=data, timeout=10).read()
    report["change_ping"] = call(proxy, "weblogUpdates.ping", "Test blog", feed)
    wait_until(lambda: len([r for r in recorded() if r["method"] == "POST"]) > notified_http + 1
               and len(receiver.snapshot()) > notified_rpc, 20)
    time.sleep(0.5)
    report["change_http_post"] = [r for r in recorded() if r["method"] == "POST"][notified_http:]
    report["change_xml_rpc"] = receiver.snapshot()[notified_rpc:]

    json.dump(report, sys.stdout, indent=1, sort_keys=True)
    sys.stdout.write("\n")


if __name__ == "__main__":
    main()
