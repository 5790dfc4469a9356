"""Runs Gajim and does, in its own windows, what a reader does.

TestGajimShowsEntries (e2e_gui_clients_test.go) starts this under Xvfb
with a private D-Bus. It configures one account on a plain connection
(Gajim takes that only from its settings), starts Gajim, and once the
account is connected:

1. opens Discover Services on pingd's JID and clicks Subscribe on a node
   (a plain XEP-0060 subscribe from Gajim's full JID);
2. opens pingd's `?roster` URI as the desktop hands it to Gajim, and
   presses Next and Add Contact in the dialog that opens;
3. opens pingd's `?message;body=subscribe NODE` URI, picks pingd in the
   Start Chat dialog that opens, and presses Enter in the chat.

Every second it writes what Gajim holds (connected, pingd's presence) to
status.json and a screenshot of the whole screen to screen.png.
"""

import json
import os
import subprocess
import sys
import traceback

from gi.repository import GLib

CFG = json.loads(os.environ["PINGD_GAJIM_TEST"])
OUT = CFG["out"]
ACCOUNT = "reader"
STATUS = {"step": "start", "done": [], "errors": []}


def write_status():
    tmp = os.path.join(OUT, "status.json.tmp")
    with open(tmp, "w") as f:
        json.dump(STATUS, f)
    os.replace(tmp, os.path.join(OUT, "status.json"))


def screenshot():
    tmp = os.path.join(OUT, "screen.tmp.png")
    r = subprocess.run(["import", "-window", "root", tmp], capture_output=True)
    if r.returncode == 0:
        os.replace(tmp, os.path.join(OUT, "screen.png"))


from gajim.common import passwords  # noqa: E402
from gajim.gtk import application as gtkapp  # noqa: E402

_passwords_init = passwords.init


def passwords_init():
    # Gajim calls this right after reading its settings, before it makes a
    # client for each active account: the account is written here.
    configure()
    _passwords_init()


passwords.init = passwords_init

_startup = gtkapp.GajimApplication._startup


def startup(self):
    try:
        _startup(self)
        GLib.timeout_add(500, tick)
        GLib.timeout_add(1000, shoot)
    except Exception:
        traceback.print_exc()
        raise


gtkapp.GajimApplication._startup = startup


def configure():
    from gajim.common import app

    app.settings.set("use_keyring", False)
    app.settings.set("check_for_update", False)
    app.settings.set("show_help_start_chat", False)
    if ACCOUNT not in app.settings.get_accounts():
        app.settings.add_account(ACCOUNT)
        user, domain = CFG["jid"].split("@")
        for k, v in {
            "name": user,
            "hostname": domain,
            "password": CFG["password"],
            "savepass": True,
            "resource": "gajim",
            "use_custom_host": True,
            "custom_host": CFG["host"],
            "custom_port": int(CFG["port"]),
            "custom_type": "PLAIN",
            "use_plain_connection": True,
            "confirm_unencrypted_connection": False,
            "active": True,
            "autoconnect": True,
        }.items():
            app.settings.set_account_setting(ACCOUNT, k, v)


STEPS = []
STATE = {}


def step(fn):
    STEPS.append(fn)
    return fn


def find_window(name):
    from gajim.common import app

    for w in app.app.get_windows():
        if type(w).__name__ == name:
            return w
    return None


@step
def connected():
    from gajim.common import app

    return app.account_is_connected(ACCOUNT)


@step
def browse_and_subscribe():
    """Discover Services → pingd → select the node → Subscribe."""
    from gajim.common import app
    from gajim.gtk.discovery import ServiceDiscoveryWindow

    if "disco" not in STATE:
        # As the account menu's Discover Services does, with pingd's address
        # in its address bar.
        app.interface.instances.setdefault(ACCOUNT, {"disco": {}})
        STATE["disco"] = ServiceDiscoveryWindow(ACCOUNT, jid=CFG["service"], address_entry=True)
        return False
    win = STATE["disco"]
    b = win.browser
    if b is None or getattr(b, "subscribe_button", None) is None:
        return False
    tv = win.services_treeview
    model = tv.get_model()
    it = model.get_iter_first() if model is not None else None
    while it is not None:
        if model.get_value(it, 1) == CFG["browse_node"]:
            tv.get_selection().select_iter(it)
            if not b.subscribe_button.get_sensitive():
                return False
            b.subscribe_button.clicked()
            return True
        it = model.iter_next(it)
    return False


@step
def subscribed_in_browser():
    win = STATE["disco"]
    tv = win.services_treeview
    model = tv.get_model()
    it = model.get_iter_first()
    while it is not None:
        if model.get_value(it, 1) == CFG["browse_node"] and model.get_value(it, 4):
            win.window.destroy()
            return True
        it = model.iter_next(it)
    return False


@step
def open_roster_uri():
    from gajim.common import app

    app.app._open_uris(["xmpp:%s?roster" % CFG["service"]])
    return True


@step
def add_contact():
    w = find_window("AddContact")
    if w is None:
        return False
    page = w.get_current_page()
    if page == "address":
        if "next" not in STATE:
            STATE["next"] = True
            w._buttons["next"][0].clicked()
        return False
    if page in ("contact", "gateway"):
        w._buttons["add"][0].clicked()
        return True
    return False


@step
def open_message_uri():
    from gajim.common import app

    app.app._open_uris(["xmpp:%s?message;body=subscribe%%20%s" % (CFG["service"], CFG["chat_node"])])
    return True


@step
def start_chat():
    from gajim.common import app

    w = find_window("StartChatDialog")
    if w is None:
        # A chat with pingd already open takes the command at once.
        return app.window.chat_exists(ACCOUNT, _jid(CFG["service"]))
    for row in w._ui.listbox.get_children():
        if str(getattr(row, "jid", "")) == CFG["service"] and not getattr(row, "is_new", False):
            w._start_new_chat(row)
            return True
    return False


@step
def press_enter():
    from gajim.common import app

    stack = app.window.get_chat_stack()
    text = stack.get_message_input().get_text()
    if "subscribe" not in text:
        return False
    app.window.activate_action("send-message", None)
    return True


def _jid(s):
    from nbxmpp.protocol import JID

    return JID.from_string(s)


def presence():
    from gajim.common import app

    if ACCOUNT not in app.connections:
        return
    client = app.get_client(ACCOUNT)
    c = client.get_module("Contacts").get_contact(_jid(CFG["service"]))
    STATUS["pingd_online"] = bool(c.is_available)
    STATUS["pingd_show"] = str(c.show)
    STATUS["connected"] = app.account_is_connected(ACCOUNT)


def tick():
    try:
        presence()
        if STEPS:
            fn = STEPS[0]
            STATUS["step"] = fn.__name__
            if fn():
                STEPS.pop(0)
                STATUS["done"].append(fn.__name__)
    except Exception:
        STATUS["errors"].append(traceback.format_exc())
        STEPS.clear()
    write_status()
    return True


def shoot():
    screenshot()
    return True


if __name__ == "__main__":
    from gajim.gajim import main

    sys.argv = ["gajim"] + (["--verbose"] if os.environ.get("PINGD_GAJIM_VERBOSE") else [])
    main()
