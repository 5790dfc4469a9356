#!/bin/sh
# Dino under Xvfb (see dino_run.sh), as nobody. Dino keeps its accounts in
# its database only: a first start creates it, the account is written,
# Dino starts again and logs in. Then, each when the test says so (a file
# in $OUT): open pingd's message URI, as the node page's link does, and
# type the command and Enter in the chat that opens. A screenshot of the
# whole screen goes to $OUT/screen.png every second.
#   PINGD_DINO_JID, PINGD_DINO_PASSWORD, PINGD_DINO_SERVICE, PINGD_DINO_COMMAND, OUT
set -u
DB="$HOME/.local/share/dino/dino.db"
say() { echo "$1" > "$OUT/step.tmp" && mv "$OUT/step.tmp" "$OUT/step"; }
waitfor() { while [ ! -e "$OUT/$1" ]; do sleep 0.2; done; }
[ -x /usr/lib/notification-daemon/notification-daemon ] && /usr/lib/notification-daemon/notification-daemon &
dino-im >"$OUT/dino-first.log" 2>&1 &
pid=$!
i=0
while [ $i -lt 100 ]; do
  python3 -c 'import sqlite3,sys; sqlite3.connect(sys.argv[1]).execute("SELECT 1 FROM account")' "$DB" 2>/dev/null && break
  sleep 0.2; i=$((i+1))
done
sleep 1
kill $pid; wait $pid
python3 - "$DB" <<'PY'
import os, sqlite3, sys
db = sqlite3.connect(sys.argv[1])
db.execute("INSERT INTO account (bare_jid, resourcepart, password, alias, enabled) VALUES (?, 'dino', ?, 'reader', 1)",
           (os.environ["PINGD_DINO_JID"], os.environ["PINGD_DINO_PASSWORD"]))
db.commit()
PY
dino-im >"$OUT/dino.log" 2>&1 &
(while :; do import -window root "$OUT/screen.tmp.png" 2>/dev/null && mv "$OUT/screen.tmp.png" "$OUT/screen.png"; sleep 1; done) &
say started
waitfor open
dino-im "xmpp:$PINGD_DINO_SERVICE?message" >>"$OUT/dino.log" 2>&1
# The chat is open once Dino has the conversation (at most 10 s).
python3 - "$DB" "$PINGD_DINO_SERVICE" <<'PY'
import sqlite3, sys, time
for _ in range(50):
    try:
        db = sqlite3.connect("file:%s?mode=ro" % sys.argv[1], uri=True)
        if db.execute("SELECT 1 FROM conversation c JOIN jid j ON c.jid_id = j.id WHERE j.bare_jid = ? AND c.active",
                      (sys.argv[2],)).fetchone():
            break
    except sqlite3.Error:
        pass
    time.sleep(0.2)
PY
sleep 1
win=$(xdotool search --sync --onlyvisible --class dino | head -n 1)
xdotool windowfocus --sync "$win" 2>/dev/null || true
xdotool type --delay 40 "$PINGD_DINO_COMMAND"
xdotool key Return
say typed
wait
