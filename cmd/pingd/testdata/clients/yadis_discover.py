#!/usr/bin/python3
"""Yadis discovery of a GetPingd descriptor with python-openid, as an
OpenID-era consumer would do it.

Usage: yadis_discover.py URL

Runs openid.yadis.discover three ways — as the library sends it (Accept
prefers application/xrds+xml), as a plain browser-like client (Accept:
text/html, so the X-XRDS-Location header must lead to the document), and
from the HTML alone (the <meta http-equiv> tag python-openid falls back
to) — and prints what it found as one JSON object.
"""

import html.parser
import io
import json
import sys

from openid import fetchers
from openid.yadis import discover as yadis
from openid.yadis import etxrd
from openid.yadis.constants import YADIS_CONTENT_TYPE
from openid.yadis.parsehtml import MetaNotFound, findHTMLMeta

NS_GETPINGD = "http://getpingd.com/core/getpingd-1.0"
NS_GETPINGD_XMPP = "http://getpingd.com/extensions/xmpp/getpingd-1.0"
NS_XRD = "xri://$xrd*($v*2.0)"


def services(text):
    """The services of an XRDS document, parsed by python-openid."""
    tree = etxrd.parseXRDS(text)
    out = []
    for svc in etxrd.iterServices(tree):
        s = {
            "types": etxrd.getTypeURIs(svc),
            "uris": [{"uri": u.text, "method": u.get("{%s}http-method" % NS_GETPINGD)}
                     for u in svc.findall("{%s}URI" % NS_XRD)],
            "accept": [{"type": a.get("type"),
                        "diffs": [d.get("type") for d in a.findall("{%s}SupportsDiff" % NS_GETPINGD)]}
                       for a in svc.findall("{%s}Accept" % NS_GETPINGD)],
            "pubsub": [dict(p.attrib) for p in svc.findall("{%s}PubSub" % NS_GETPINGD_XMPP)],
        }
        out.append(s)
    return out


def run_discover(url):
    try:
        r = yadis.discover(url)
    except Exception as e:
        return {"error": "%s: %s" % (type(e).__name__, e)}
    out = {
        "normalized_uri": r.normalized_uri,
        "xrds_uri": r.xrds_uri,
        "content_type": r.content_type,
        "is_xrds": r.isXRDS(),
        "used_yadis_location": r.usedYadisLocation(),
    }
    try:
        out["services"] = services(r.response_text)
    except Exception as e:
        out["parse_error"] = "%s: %s" % (type(e).__name__, e)
    return out


class Links(html.parser.HTMLParser):
    def __init__(self):
        super().__init__()
        self.links = []

    def handle_starttag(self, tag, attrs):
        a = dict(attrs)
        if tag == "link" and "rel" in a:
            self.links.append({"rel": a["rel"], "href": a.get("href")})


def main():
    url = sys.argv[1]
    report = {}

    # 1. As python-openid sends it.
    report["library_accept"] = yadis.YADIS_ACCEPT_HEADER
    report["discover"] = run_discover(url)

    # 2. A client that asks for HTML: the header must lead to the XRDS.
    yadis.YADIS_ACCEPT_HEADER = "text/html"
    report["discover_html_first"] = run_discover(url)

    # 3. The HTML page itself: the <meta http-equiv> python-openid reads
    #    when the header is missing, and the GetPingd <link>.
    resp = fetchers.fetch(url, headers={"Accept": "text/html"})
    body = resp.body.decode("utf-8") if isinstance(resp.body, bytes) else resp.body
    page = {"status": resp.status, "content_type": resp.headers.get("content-type"),
            "x_xrds_location": resp.headers.get("x-xrds-location")}
    try:
        page["meta_xrds_location"] = findHTMLMeta(io.StringIO(body))
    except MetaNotFound:
        page["meta_xrds_location"] = None
    links = Links()
    links.feed(body)
    page["links"] = links.links
    report["page"] = page
    report["yadis_content_type"] = YADIS_CONTENT_TYPE

    json.dump(report, sys.stdout, indent=1, sort_keys=True)
    sys.stdout.write("\n")


if __name__ == "__main__":
    main()
