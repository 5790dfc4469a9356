#!/bin/sh
# TestDinoShowsEntries runs this as root in a private network and mount
# namespace (unshare --net --mount). Dino connects only to its account's
# domain on port 5222 with STARTTLS and a certificate its system trusts:
# here "localhost" is 127.0.0.1 of this namespace alone, a forwarder hands
# port 5222 to the test's Prosody through a Unix socket, and the private
# certificate authority replaces the system's trust list in this mount
# namespace only. Dino itself runs as nobody under Xvfb with a private
# D-Bus (dino_driver.sh).
#   $1 the CA's PEM file, $2 the Unix socket to Prosody's c2s port,
#   $3 the home for Dino (owned by nobody), $4 dino_driver.sh
set -eu
ip link set lo up
mount --bind "$1" /etc/ssl/certs/ca-certificates.crt
python3 - "$2" <<'PY' &
import socket, sys, threading

def pipe(a, b):
    try:
        while True:
            d = a.recv(65536)
            if not d:
                break
            b.sendall(d)
    except OSError:
        pass
    finally:
        try:
            b.shutdown(socket.SHUT_WR)
        except OSError:
            pass

l = socket.socket()
l.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
l.bind(("127.0.0.1", 5222))
l.listen(16)
while True:
    c, _ = l.accept()
    u = socket.socket(socket.AF_UNIX)
    u.connect(sys.argv[1])
    threading.Thread(target=pipe, args=(c, u), daemon=True).start()
    threading.Thread(target=pipe, args=(u, c), daemon=True).start()
PY
export HOME="$3" XDG_RUNTIME_DIR="$3/run" XDG_DATA_HOME="$3/.local/share" XDG_CONFIG_HOME="$3/.config" XDG_CACHE_HOME="$3/.cache"
exec setpriv --reuid=65534 --regid=65534 --clear-groups -- \
  dbus-run-session -- xvfb-run -a -s "-screen 0 1280x900x24" sh "$4"
