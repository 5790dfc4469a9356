#!/usr/bin/env bash
# make run: a private Prosody on loopback with pingd's component configured
# and two test accounts, a demo feed, and pingd on the embedded SQLite store.
# Everything lives in .run/ and stops with Ctrl-C.
set -euo pipefail
cd "$(dirname "$0")/.."
bin=${1:-bin/pingd}
run=$PWD/.run
c2s_port=${PROSODY_C2S_PORT:-15222}
comp_port=${PROSODY_COMPONENT_PORT:-15347}
http_addr=${PINGD_HTTP_ADDR:-127.0.0.1:8080}
feed_port=${DEMO_FEED_PORT:-8081}
secret=${PINGD_XMPP_SECRET:-local-dev-secret}
admin_token=${PINGD_ADMIN_TOKEN:-dev-admin-token}

if ! command -v prosody >/dev/null 2>&1; then
  echo "Prosody is not installed; installing Debian's prosody package…"
  sudo_cmd=""
  [ "$(id -u)" -ne 0 ] && sudo_cmd=sudo
  $sudo_cmd apt-get update
  DEBIAN_FRONTEND=noninteractive $sudo_cmd apt-get install -y prosody
fi

mkdir -p "$run/prosody/data" "$run/www"
cat > "$run/prosody/prosody.cfg.lua" <<CFG
daemonize = false
$( [ "$(id -u)" -eq 0 ] && echo 'run_as_root = true' )
pidfile = "$run/prosody/prosody.pid"
data_path = "$run/prosody/data"
log = { info = "$run/prosody/prosody.log" }
certificates = "$run/prosody/certs"
c2s_ports = { $c2s_port }
c2s_interfaces = { "127.0.0.1" }
component_ports = { $comp_port }
component_interfaces = { "127.0.0.1" }
s2s_ports = { }
http_ports = { }
https_ports = { }
modules_enabled = { "roster"; "saslauth"; "disco"; "ping"; "posix" }
modules_disabled = { "s2s"; "tls" }
c2s_require_encryption = false
allow_unencrypted_plain_auth = true
authentication = "internal_plain"
admins = { "alice@localhost" }
VirtualHost "localhost"
Component "pubsub.localhost"
  component_secret = "$secret"
CFG
prosodyctl --config "$run/prosody/prosody.cfg.lua" register alice localhost alice >/dev/null
prosodyctl --config "$run/prosody/prosody.cfg.lua" register bob localhost bob >/dev/null

pids=()
cleanup() { for p in "${pids[@]}"; do kill "$p" 2>/dev/null || true; done; wait 2>/dev/null || true; }
trap cleanup EXIT INT TERM

prosody --config "$run/prosody/prosody.cfg.lua" >"$run/prosody/stdout.log" 2>&1 &
pids+=($!)

if [ ! -f "$run/www/feed.xml" ]; then ./scripts/demo-feed.sh init >/dev/null; fi
if command -v python3 >/dev/null 2>&1; then
  python3 -m http.server --bind 127.0.0.1 --directory "$run/www" "$feed_port" >"$run/www.log" 2>&1 &
  pids+=($!)
fi

cat <<MSG

pingd: HTTP on http://$http_addr, XMPP component pubsub.localhost on Prosody 127.0.0.1:$comp_port
Accounts: alice@localhost (password alice, owner of every node), bob@localhost (password bob)
          XMPP clients connect to 127.0.0.1:$c2s_port (plain, no TLS: local only).

Try it, in another terminal:
  # 1. a node following the demo feed
  curl -H 'Authorization: Bearer $admin_token' \\
       -d '{"node":"demo","source":"http://127.0.0.1:$feed_port/feed.xml","title":"Demo"}' \\
       http://$http_addr/api/nodes
  # 2. subscribe: log in as bob with any XMPP client and subscribe to node "demo" on
  #    pubsub.localhost, or send it the chat message "subscribe demo"
  # 3. change the feed and ping pingd
  ./scripts/demo-feed.sh add "Hello from pingd"
  curl -d url=http://127.0.0.1:$feed_port/feed.xml http://$http_addr/ping
  # bob's client shows the new entry; GET http://$http_addr/atom/demo shows the node's feed

MSG

PINGD_XMPP_ADDR=127.0.0.1:$comp_port \
PINGD_XMPP_DOMAIN=pubsub.localhost \
PINGD_XMPP_SECRET=$secret \
PINGD_HTTP_ADDR=$http_addr \
PINGD_PUBLIC_URL=${PINGD_PUBLIC_URL:-http://$http_addr} \
PINGD_DB=${PINGD_DB:-$run/pingd.db} \
PINGD_ADMIN_TOKEN=$admin_token \
PINGD_ADMINS=alice@localhost \
PINGD_ALLOW_PRIVATE=1 \
"$bin" serve &
pids+=($!)
wait "${pids[-1]}"
