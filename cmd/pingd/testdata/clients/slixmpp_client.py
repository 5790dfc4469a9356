#!/usr/bin/python3
"""An XMPP client written with slixmpp (XEP-0030, XEP-0060), used the way
its documentation says, against pingd's pubsub component.

Usage: slixmpp_client.py CONFIG.json

The configuration names the server, the accounts, the component and the
HTTP addresses (pingd, and a control URL that adds items to the test's
feed). The script records what slixmpp sees and prints one JSON object on
stdout; the Go test holds the expectations. A step that fails records
{"error": ...} under its name and the script goes on where it can.
"""

import asyncio
import json
import logging
import sys
import traceback
import urllib.parse
import urllib.request

import slixmpp
from slixmpp.exceptions import IqError, IqTimeout
from slixmpp.plugins.xep_0004 import Form
from slixmpp.xmlstream import ET
from slixmpp.xmlstream.handler import Callback
from slixmpp.xmlstream.matcher import StanzaPath

ATOM = "http://www.w3.org/2005/Atom"
IQ_TIMEOUT = 10


class Client(slixmpp.ClientXMPP):
    """A logged-in account that queues the pubsub events and chat messages
    it receives."""

    def __init__(self, jid, password):
        super().__init__(jid, password)
        for plugin in ("xep_0030", "xep_0004", "xep_0060", "xep_0128"):
            self.register_plugin(plugin)
        self.events = asyncio.Queue()
        self.chats = asyncio.Queue()
        # Plain notifications: messages with a body and an XEP-0066 link.
        self.notes = asyncio.Queue()
        self.started = asyncio.get_event_loop().create_future()
        self.add_event_handler("session_start", self._on_start)
        self.add_event_handler("failed_auth", self._on_failed_auth)
        self.add_event_handler("message", self._on_message)
        # One handler for every pubsub event message: slixmpp's own
        # pubsub_publish event repeats a multi-item message once per item.
        self.register_handler(Callback("test pubsub events", StanzaPath("message/pubsub_event"), self._on_event))

    async def _on_start(self, _event):
        self.send_presence()
        await self.get_roster()
        if not self.started.done():
            self.started.set_result(True)

    def _on_failed_auth(self, _event):
        if not self.started.done():
            self.started.set_exception(RuntimeError("authentication failed for %s" % self.boundjid))

    def _on_message(self, msg):
        if msg["type"] in ("chat", "normal") and msg["body"]:
            rec = {"from": str(msg["from"]), "type": msg["type"], "body": msg["body"]}
            oob = msg.xml.find("{jabber:x:oob}x")
            if oob is not None:
                rec["url"] = oob.findtext("{jabber:x:oob}url") or ""
                rec["event"] = msg.xml.find("{http://jabber.org/protocol/pubsub#event}event") is not None
                self.notes.put_nowait(rec)
            else:
                self.chats.put_nowait(rec)

    def _on_event(self, msg):
        for child in msg["pubsub_event"].xml:
            kind = child.tag.split("}", 1)[-1]
            node = child.attrib.get("node", "")
            if kind == "items":
                for item in child:
                    tag = item.tag.split("}", 1)[-1]
                    rec = {"kind": "publish" if tag == "item" else tag, "node": node, "id": item.attrib.get("id", "")}
                    entry = item.find("{%s}entry" % ATOM)
                    if entry is not None:
                        rec["entry"] = entry_fields(entry)
                    self.events.put_nowait(rec)
            else:
                rec = {"kind": kind, "node": node}
                for name in ("jid", "subscription"):
                    if name in child.attrib:
                        rec[name] = child.attrib[name]
                self.events.put_nowait(rec)


def entry_fields(entry):
    """The Atom entry children a subscriber reads."""
    out = {"ns": entry.tag.split("}", 1)[0].lstrip("{")}
    for name in ("id", "title", "updated"):
        el = entry.find("{%s}%s" % (ATOM, name))
        if el is not None:
            out[name] = el.text or ""
    link = entry.find("{%s}link" % ATOM)
    if link is not None:
        out["link"] = link.attrib.get("href", "")
    return out


def form_values(form):
    """A data form's values as slixmpp reads them, one string per field
    (slixmpp gives hidden fields as lists)."""
    out = {}
    for var, f in form.get_fields().items():
        v = f.get_value(convert=False)
        out[var] = v[0] if isinstance(v, list) and len(v) == 1 else v
    return out


def iq_error(e):
    """What slixmpp tells an application about an error answer."""
    err = e.iq["error"]
    pubsub_condition = err["pubsub"]["condition"]
    if not pubsub_condition:
        # slixmpp 1.8 knows no precondition-not-met (XEP-0060 §7.1.5):
        # read the element itself.
        for child in err.xml:
            if child.tag.startswith("{http://jabber.org/protocol/pubsub#errors}"):
                pubsub_condition = child.tag.split("}", 1)[1]
    return {
        "error_type": err["type"],
        "condition": err["condition"],
        "pubsub_condition": pubsub_condition,
        "unsupported": err["pubsub"]["unsupported"],
        "text": err["text"],
    }


async def collect(queue, want, wait, quiet):
    """Events until `want` arrived (then `quiet` more seconds), or `wait` ends."""
    got = []
    loop = asyncio.get_event_loop()
    deadline = loop.time() + wait
    settle = None
    while True:
        if len(got) >= want and settle is None:
            settle = loop.time() + quiet
        end = deadline if settle is None else min(deadline, settle)
        left = end - loop.time()
        if left <= 0:
            return got
        try:
            got.append(await asyncio.wait_for(queue.get(), left))
        except asyncio.TimeoutError:
            return got


def drain(queue):
    while not queue.empty():
        queue.get_nowait()


def http_post(url, fields):
    data = urllib.parse.urlencode(fields).encode()
    with urllib.request.urlopen(url, data=data, timeout=10) as resp:
        return resp.status


def http_get(url):
    with urllib.request.urlopen(url, timeout=10) as resp:
        return resp.read().decode("utf-8", "replace")


async def in_thread(fn, *args):
    return await asyncio.get_event_loop().run_in_executor(None, fn, *args)


class Scenario:
    def __init__(self, cfg):
        self.cfg = cfg
        self.report = {}
        self.comp = cfg["component"]

    async def step(self, name, coro):
        """Runs one step; its result (or the error slixmpp raised) is recorded."""
        try:
            self.report[name] = await coro
        except IqError as e:
            self.report[name] = {"iq_error": iq_error(e)}
        except IqTimeout:
            self.report[name] = {"error": "timeout"}
        except Exception as e:  # recorded, so the Go test says which step broke
            self.report[name] = {"error": "%s: %s" % (type(e).__name__, e), "trace": traceback.format_exc()}
        return self.report[name]

    async def change_feed(self, guid, title):
        """Adds an item to the test's feed and pings pingd about it."""
        await in_thread(http_post, self.cfg["control_url"], {"guid": guid, "title": title})
        return await in_thread(http_post, self.cfg["pingd_url"] + "/ping", {"url": self.cfg["feed_url"]})

    async def wait_in_atom(self, node, title):
        """Waits until pingd's own Atom feed of node holds title: the change
        was processed, so a missing notification is really missing."""
        url = self.cfg["pingd_url"] + "/atom/" + urllib.parse.quote(node, safe="")
        for _ in range(150):
            if title in await in_thread(http_get, url):
                return True
            await asyncio.sleep(0.1)
        return False

    async def run(self):
        cfg = self.cfg
        clients = {}
        for name, account in cfg["accounts"].items():
            c = Client(account["jid"] + "/slixmpp", account["password"])
            host, port = cfg["c2s"].rsplit(":", 1)
            c.connect(address=(host, int(port)), force_starttls=False, disable_starttls=True)
            clients[name] = c
        await asyncio.wait_for(asyncio.gather(*(c.started for c in clients.values())), 20)
        reader, owner, other = clients["reader"], clients["owner"], clients["other"]
        try:
            await self.discovery(reader)
            await self.subscriber(reader)
            await self.closed_node(reader)
            await self.owner_cases(owner, reader, other)
            await self.chat(other)
            await self.whitelist_by_owner(owner, other)
        finally:
            await asyncio.gather(*(c.disconnect() for c in clients.values()), return_exceptions=True)
        return self.report

    async def discovery(self, c):
        disco = c["xep_0030"]
        comp = self.comp

        async def info():
            r = await disco.get_info(jid=comp, cached=False, timeout=IQ_TIMEOUT)
            q = r["disco_info"]
            return {"identities": [[i[0], i[1], i[3]] for i in q["identities"]], "features": sorted(q["features"])}

        async def items():
            r = await disco.get_items(jid=comp, timeout=IQ_TIMEOUT)
            return [list(i) for i in r["disco_items"]["items"]]

        async def node_info():
            r = await disco.get_info(jid=comp, node=self.cfg["open_node"], cached=False, timeout=IQ_TIMEOUT)
            q = r["disco_info"]
            form = q["form"]
            return {"node": q["node"], "identities": [[i[0], i[1], i[3]] for i in q["identities"]],
                    "features": sorted(q["features"]), "form_type": form["type"], "fields": form_values(form)}

        async def unknown_node():
            await disco.get_info(jid=comp, node="no-such-node", cached=False, timeout=IQ_TIMEOUT)
            return "answered"

        await self.step("disco_info", info())
        await self.step("disco_items", items())
        await self.step("disco_info_node", node_info())
        await self.step("disco_info_unknown_node", unknown_node())

    async def subscriber(self, c):
        ps = c["xep_0060"]
        comp, node = self.comp, self.cfg["open_node"]

        async def subscribe():
            r = await ps.subscribe(comp, node, timeout=IQ_TIMEOUT)
            s = r["pubsub"]["subscription"]
            return {"node": s["node"], "jid": str(s["jid"]), "subid": s["subid"], "subscription": s["subscription"]}

        async def subscriptions():
            r = await ps.get_subscriptions(comp, timeout=IQ_TIMEOUT)
            return [{"node": s["node"], "jid": str(s["jid"]), "subid": s["subid"], "subscription": s["subscription"]}
                    for s in r["pubsub"]["subscriptions"]]

        async def subscribe_unknown():
            await ps.subscribe(comp, "no-such-node", timeout=IQ_TIMEOUT)
            return "subscribed"

        async def subscribe_someone_else():
            await ps.subscribe(comp, node, subscribee="someone-else@" + c.boundjid.domain, timeout=IQ_TIMEOUT)
            return "subscribed"

        await self.step("subscribe_unknown_node", subscribe_unknown())
        await self.step("subscribe_someone_else", subscribe_someone_else())
        await self.step("subscribe", subscribe())
        await self.step("subscribe_again", subscribe())
        await self.step("subscriptions", subscriptions())

        def form_in(iq):
            x = iq.xml.find(".//{jabber:x:data}x")
            if x is None:
                return {"error": "no data form in the answer"}
            form = Form(xml=x)
            return {"form_type": form["type"], "fields": form_values(form)}

        async def options():
            r = await ps.get_subscription_options(comp, node, user_jid=c.boundjid.bare, timeout=IQ_TIMEOUT)
            return form_in(r)

        async def set_options():
            # slixmpp 1.8's set_subscription_options sends a get: build the set.
            form = Form()
            form["type"] = "submit"
            form.add_field(var="FORM_TYPE", ftype="hidden", value="http://jabber.org/protocol/pubsub#subscribe_options")
            form.add_field(var="pubsub#include_body", ftype="boolean", value=False)
            iq = c.Iq(sto=comp, stype="set")
            iq["pubsub"]["options"]["node"] = node
            iq["pubsub"]["options"]["jid"] = c.boundjid.bare
            iq["pubsub"]["options"]["options"] = form
            await iq.send(timeout=IQ_TIMEOUT)
            r = await ps.get_subscription_options(comp, node, user_jid=c.boundjid.bare, timeout=IQ_TIMEOUT)
            return form_in(r)

        async def default_options():
            r = await ps.get_subscription_options(comp, node, timeout=IQ_TIMEOUT)
            return form_in(r)

        await self.step("subscription_options", options())
        await self.step("subscription_options_set", set_options())
        await self.step("subscription_options_default", default_options())

        async def notified():
            drain(c.events)
            await self.change_feed("slix-1", "Slix one")
            await self.change_feed("slix-2", "Slix two")
            return await collect(c.events, 2, 20, 1.0)

        await self.step("notifications", notified())

        async def items(**kw):
            r = await ps.get_items(comp, node, timeout=IQ_TIMEOUT, **kw)
            out = []
            for it in r["pubsub"]["items"]:
                rec = {"id": it["id"]}
                entry = it.xml.find("{%s}entry" % ATOM)
                if entry is not None:
                    rec["entry"] = entry_fields(entry)
                out.append(rec)
            return out

        await self.step("items_all", items())
        await self.step("items_max_1", items(max_items=1))
        await self.step("items_by_id", items(item_ids=["slix-1"]))

        async def items_page():
            # What StanzaJS sends by default: an XEP-0059 <set/> beside
            # <items/>, built by hand as slixmpp's get_items has no RSM.
            iq = c.Iq(sto=comp, stype="get")
            iq.append(ET.fromstring(
                '<pubsub xmlns="http://jabber.org/protocol/pubsub"><items node="%s"/>'
                '<set xmlns="http://jabber.org/protocol/rsm"><max>1</max></set></pubsub>' % node))
            r = await iq.send(timeout=IQ_TIMEOUT)
            rsm = "{http://jabber.org/protocol/rsm}"
            s = r.xml.find(".//%sset" % rsm)
            return {
                "ids": [it.get("id") for it in r.xml.iter("{http://jabber.org/protocol/pubsub}item")],
                "first": s.findtext(rsm + "first") if s is not None else None,
                "count": s.findtext(rsm + "count") if s is not None else None,
            }

        await self.step("items_page", items_page())

        async def item_ids():
            r = await c["xep_0030"].get_items(jid=comp, node=node, timeout=IQ_TIMEOUT)
            return [list(i) for i in r["disco_items"]["items"]]

        await self.step("disco_items_node", item_ids())

        async def unsubscribe():
            await ps.unsubscribe(comp, node, timeout=IQ_TIMEOUT)
            return "ok"

        await self.step("unsubscribe", unsubscribe())

        async def after_unsubscribe():
            drain(c.events)
            await self.change_feed("slix-3", "Slix three")
            if not await self.wait_in_atom(node, "Slix three"):
                return {"error": "the change never reached the node"}
            return await collect(c.events, 1, 1.5, 0)

        await self.step("notifications_after_unsubscribe", after_unsubscribe())
        await self.step("subscriptions_after_unsubscribe", subscriptions())

    async def closed_node(self, c):
        async def sub():
            await c["xep_0060"].subscribe(self.comp, self.cfg["whitelist_node"], timeout=IQ_TIMEOUT)
            return "subscribed"

        await self.step("closed_node_subscribe", sub())

        async def items():
            await c["xep_0060"].get_items(self.comp, self.cfg["whitelist_node"], timeout=IQ_TIMEOUT)
            return "answered"

        await self.step("closed_node_items", items())

    async def owner_cases(self, owner, reader, other):
        ps, rps = owner["xep_0060"], reader["xep_0060"]
        comp, node = self.comp, "slix-owned"
        reader_bare = reader.boundjid.bare

        async def create():
            form = owner["xep_0004"].make_form(ftype="submit")
            form.add_field(var="pubsub#title", value="Owned by slixmpp")
            form.add_field(var="pubsub#access_model", value="whitelist")
            r = await ps.create_node(comp, node, config=form, timeout=IQ_TIMEOUT)
            return {"node": r["pubsub"]["create"]["node"] or node}

        await self.step("owner_create", create())

        async def create_by_other():
            await other["xep_0060"].create_node(comp, "not-allowed-to-create", timeout=IQ_TIMEOUT)
            return "created"

        await self.step("other_create", create_by_other())

        async def get_config():
            r = await ps.get_node_config(comp, node, timeout=IQ_TIMEOUT)
            form = r["pubsub_owner"]["configure"]["form"]
            return {"form_type": form["type"], "fields": form_values(form)}

        await self.step("owner_config_get", get_config())

        async def set_config():
            form = owner["xep_0004"].make_form(ftype="submit")
            form.add_field(var="FORM_TYPE", ftype="hidden", value="http://jabber.org/protocol/pubsub#node_config")
            form.add_field(var="pubsub#title", value="Renamed by slixmpp")
            form.add_field(var="pubsub#max_items", value="7")
            await ps.set_node_config(comp, node, form, timeout=IQ_TIMEOUT)
            return "ok"

        async def default_config():
            r = await ps.get_node_config(comp, timeout=IQ_TIMEOUT)
            form = r["pubsub_owner"]["default"]["form"]
            return {"form_type": form["type"], "fields": form_values(form)}

        await self.step("owner_default_config", default_config())

        async def instant_node():
            r = await ps.create_node(comp, None, timeout=IQ_TIMEOUT)
            name = r["pubsub"]["create"]["node"]
            listed = await owner["xep_0030"].get_items(jid=comp, timeout=IQ_TIMEOUT)
            nodes = [i[1] for i in listed["disco_items"]["items"]]
            if name:
                await ps.delete_node(comp, name, timeout=IQ_TIMEOUT)
            return {"node": name, "listed": name in nodes}

        await self.step("owner_instant_node", instant_node())
        await self.step("owner_config_set", set_config())
        await self.step("owner_config_after_set", get_config())

        async def set_config_max():
            # XEP-0060 config-node-max: "max" stands for the largest value.
            form = owner["xep_0004"].make_form(ftype="submit")
            form.add_field(var="FORM_TYPE", ftype="hidden", value="http://jabber.org/protocol/pubsub#node_config")
            form.add_field(var="pubsub#max_items", value="max")
            await ps.set_node_config(comp, node, form, timeout=IQ_TIMEOUT)
            return (await get_config())["fields"].get("pubsub#max_items")

        await self.step("owner_config_max", set_config_max())

        async def affiliations():
            r = await ps.get_node_affiliations(comp, node, timeout=IQ_TIMEOUT)
            return sorted([str(a["jid"]), a["affiliation"]] for a in r["pubsub_owner"]["affiliations"])

        async def set_affiliation(aff):
            await ps.modify_affiliations(comp, node, [(reader_bare, aff)], timeout=IQ_TIMEOUT)
            return "ok"

        async def reader_subscribe():
            r = await rps.subscribe(comp, node, timeout=IQ_TIMEOUT)
            return r["pubsub"]["subscription"]["subscription"]

        await self.step("owned_subscribe_before_member", reader_subscribe())
        await self.step("owner_affiliation_member", set_affiliation("member"))
        await self.step("owner_affiliations", affiliations())
        await self.step("owned_subscribe_as_member", reader_subscribe())

        async def own_affiliations():
            r = await rps.get_affiliations(comp, timeout=IQ_TIMEOUT)
            return sorted([a["node"], a["affiliation"]] for a in r["pubsub"]["affiliations"])

        await self.step("member_own_affiliations", own_affiliations())

        async def admin_config_of_api_node():
            r = await ps.get_node_config(comp, self.cfg["open_node"], timeout=IQ_TIMEOUT)
            return {"form_type": r["pubsub_owner"]["configure"]["form"]["type"],
                    "fields": form_values(r["pubsub_owner"]["configure"]["form"])}

        # The admin owns nodes it did not create (made over the HTTP API).
        await self.step("admin_config_of_api_node", admin_config_of_api_node())

        def payload(item_id, title):
            entry = ET.Element("{%s}entry" % ATOM)
            for name, text in (("id", "urn:test:" + item_id), ("title", title), ("updated", "2030-01-01T00:00:00Z")):
                ET.SubElement(entry, "{%s}%s" % (ATOM, name)).text = text
            ET.SubElement(entry, "{%s}link" % ATOM, {"href": "http://127.0.0.1/" + item_id})
            return entry

        async def publish(item_id, title):
            drain(reader.events)
            r = await ps.publish(comp, node, id=item_id, payload=payload(item_id, title), timeout=IQ_TIMEOUT)
            ids = [it["id"] for it in r["pubsub"]["publish"]]
            events = await collect(reader.events, 1, 10, 0.5)
            return {"ids": ids, "events": events}

        async def items():
            r = await ps.get_items(comp, node, timeout=IQ_TIMEOUT)
            return [it["id"] for it in r["pubsub"]["items"]]

        await self.step("owner_publish", publish("p1", "Published by slixmpp"))
        await self.step("owner_items_after_publish", items())

        async def publish_with_precondition(item_id, same):
            # XEP-0060 §7.1.5: publish only if the node's access model is
            # the one it has (same) or the other one.
            r = await ps.get_node_config(comp, node, timeout=IQ_TIMEOUT)
            model = form_values(r["pubsub_owner"]["configure"]["form"])["pubsub#access_model"]
            if not same:
                model = "open" if model == "whitelist" else "whitelist"
            form = Form()
            form["type"] = "submit"
            form.add_field(var="FORM_TYPE", ftype="hidden", value="http://jabber.org/protocol/pubsub#publish-options")
            form.add_field(var="pubsub#access_model", value=model)
            drain(reader.events)
            r = await ps.publish(comp, node, id=item_id, payload=payload(item_id, "With a precondition"),
                                 options=form, timeout=IQ_TIMEOUT)
            ids = [it["id"] for it in r["pubsub"]["publish"]]
            # Leave the node as the later steps expect it.
            await collect(reader.events, 1, 10, 0.5)
            await ps.retract(comp, node, item_id, timeout=IQ_TIMEOUT)
            await collect(reader.events, 1, 10, 0.3)
            return {"ids": ids}

        await self.step("owner_publish_options", publish_with_precondition("po1", True))
        await self.step("owner_publish_options_unmet", publish_with_precondition("po2", False))

        async def publish_without_id():
            drain(reader.events)
            r = await ps.publish(comp, node, payload=payload("no-id", "Without an id"), timeout=IQ_TIMEOUT)
            ids = [it["id"] for it in r["pubsub"]["publish"]]
            events = await collect(reader.events, 1, 10, 0.5)
            if ids and ids[0]:
                await ps.retract(comp, node, ids[0], timeout=IQ_TIMEOUT)
                await collect(reader.events, 1, 10, 0.3)
            return {"ids": ids, "events": events}

        await self.step("owner_publish_without_id", publish_without_id())

        async def retract():
            drain(reader.events)
            await ps.retract(comp, node, "p1", notify=True, timeout=IQ_TIMEOUT)
            return await collect(reader.events, 1, 10, 0.5)

        await self.step("owner_retract", retract())
        await self.step("owner_items_after_retract", items())

        async def retract_unknown():
            await ps.retract(comp, node, "no-such-item", timeout=IQ_TIMEOUT)
            return "ok"

        await self.step("owner_retract_unknown", retract_unknown())

        async def purge():
            await publish("p2", "Second")
            await publish("p3", "Third")
            drain(reader.events)
            await ps.purge(comp, node, timeout=IQ_TIMEOUT)
            return await collect(reader.events, 1, 10, 0.5)

        await self.step("owner_purge", purge())
        await self.step("owner_items_after_purge", items())

        async def publish_by_reader():
            await rps.publish(comp, node, id="r1", payload=payload("r1", "Not mine to publish"), timeout=IQ_TIMEOUT)
            return "published"

        await self.step("member_publish", publish_by_reader())
        await self.step("owner_affiliation_publisher", set_affiliation("publisher"))

        async def publish_as_publisher():
            drain(reader.events)
            r = await rps.publish(comp, node, id="r2", payload=payload("r2", "By a publisher"), timeout=IQ_TIMEOUT)
            # The publisher is subscribed too: its own item comes back.
            events = await collect(reader.events, 1, 10, 0.5)
            return {"ids": [it["id"] for it in r["pubsub"]["publish"]], "events": events}

        await self.step("publisher_publish", publish_as_publisher())
        await self.step("owner_items_after_publisher", items())

        async def owner_subscriptions():
            r = await ps.get_node_subscriptions(comp, node, timeout=IQ_TIMEOUT)
            return sorted([str(s["jid"]).split("/")[0], s["subscription"]] for s in r["pubsub_owner"]["subscriptions"])

        await self.step("owner_subscriptions", owner_subscriptions())
        async def revoke():
            drain(reader.events)
            await set_affiliation("none")
            return await collect(reader.events, 1, 10, 0.5)

        await self.step("owner_affiliation_none", revoke())
        await self.step("owner_affiliations_after_none", affiliations())
        await self.step("owner_subscriptions_after_none", owner_subscriptions())

        async def outcast():
            await set_affiliation("outcast")
            return await reader_subscribe()

        await self.step("outcast_subscribe", outcast())

        async def delete():
            await self.step("owned_resubscribe_for_delete", set_affiliation("member"))
            await rps.subscribe(comp, node, timeout=IQ_TIMEOUT)
            # A new subscription is sent the node's newest item at once.
            newest = await collect(reader.events, 1, 10, 0.3)
            drain(reader.events)
            await ps.delete_node(comp, node, timeout=IQ_TIMEOUT)
            events = await collect(reader.events, 1, 10, 0.5)
            r = await owner["xep_0030"].get_items(jid=comp, timeout=IQ_TIMEOUT)
            nodes = [i[1] for i in r["disco_items"]["items"]]
            return {"newest": newest, "events": events, "still_listed": node in nodes}

        await self.step("owner_delete", delete())

        async def delete_again():
            await ps.delete_node(comp, node, timeout=IQ_TIMEOUT)
            return "deleted"

        await self.step("owner_delete_again", delete_again())

    async def whitelist_by_owner(self, owner, member):
        """The admin puts a JID on a whitelist node made over HTTP."""
        node = self.cfg["whitelist_node"]

        async def add():
            await owner["xep_0060"].modify_affiliations(self.comp, node, [(member.boundjid.bare, "member")], timeout=IQ_TIMEOUT)
            r = await member["xep_0060"].subscribe(self.comp, node, timeout=IQ_TIMEOUT)
            return r["pubsub"]["subscription"]["subscription"]

        await self.step("whitelist_member_subscribe", add())

    async def chat(self, c):
        async def command(body):
            drain(c.chats)
            c.send_message(mto=self.comp, mbody=body, mtype="chat")
            got = await collect(c.chats, 1, 10, 0.3)
            return got

        for name, body in (("help", "help"), ("nodes", "nodes"), ("list_empty", "list"),
                           ("subscribe", "subscribe " + self.cfg["open_node"]),
                           ("subscribe_again", "subscribe " + self.cfg["open_node"]),
                           ("list", "list"), ("last", "last %s 2" % self.cfg["open_node"]),
                           ("last_closed", "last " + self.cfg["whitelist_node"]),
                           ("subscribe_closed", "subscribe " + self.cfg["whitelist_node"]),
                           ("unknown_node", "subscribe no-such-node"),
                           ("unsubscribe", "unsubscribe " + self.cfg["open_node"]),
                           ("list_after", "list"), ("gibberish", "what is this")):
            await self.step("chat_" + name, command(body))

        async def subscriptions():
            r = await c["xep_0060"].get_subscriptions(self.comp, timeout=IQ_TIMEOUT)
            return [s["node"] for s in r["pubsub"]["subscriptions"]]

        # A chat subscription is a pubsub subscription like any other.
        drain(c.notes)  # what the first chat subscription was sent
        c.send_message(mto=self.comp, mbody="subscribe " + self.cfg["open_node"], mtype="chat")
        await collect(c.chats, 1, 10, 0)
        # The node's newest entry follows the answer, as a plain message.
        await self.step("chat_subscribe_newest", collect(c.notes, 1, 10, 0.3))
        await self.step("chat_subscription_in_pubsub", subscriptions())

        async def notified():
            # A chat subscription gets plain chat messages, not events.
            drain(c.events)
            drain(c.notes)
            await self.change_feed("chat-1", "For the chat subscriber")
            notes = await collect(c.notes, 1, 20, 0.5)
            return {"notes": notes, "events": await collect(c.events, 0, 0, 0)}

        await self.step("chat_subscriber_notified", notified())


def main():
    logging.basicConfig(level=logging.WARNING, stream=sys.stderr, format="%(levelname)s %(name)s: %(message)s")
    with open(sys.argv[1]) as f:
        cfg = json.load(f)
    loop = asyncio.new_event_loop()
    asyncio.set_event_loop(loop)
    report = loop.run_until_complete(asyncio.wait_for(Scenario(cfg).run(), cfg.get("timeout", 120)))
    # slixmpp leaves its stream filter tasks pending after a disconnect.
    pending = asyncio.all_tasks(loop)
    for task in pending:
        task.cancel()
    loop.run_until_complete(asyncio.gather(*pending, return_exceptions=True))
    loop.close()
    json.dump(report, sys.stdout, indent=1, sort_keys=True)
    sys.stdout.write("\n")


if __name__ == "__main__":
    main()
