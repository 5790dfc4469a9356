#!/usr/bin/env bash
# The demo feed of `make run`: `init` writes an RSS feed with one item,
# `add TITLE` adds an item at the top.
set -euo pipefail
cd "$(dirname "$0")/.."
feed=.run/www/feed.xml
mkdir -p .run/www
now() { date -u '+%a, %d %b %Y %H:%M:%S GMT'; }
item() {
  local id=$1 title=$2
  printf '    <item><title>%s</title><link>http://127.0.0.1/demo/%s</link><guid isPermaLink="false">demo-%s</guid><pubDate>%s</pubDate><description>%s</description></item>\n' \
    "$title" "$id" "$id" "$(now)" "$title"
}
case "${1:-}" in
  init)
    { echo '<?xml version="1.0" encoding="utf-8"?>'
      echo '<rss version="2.0"><channel><title>pingd demo feed</title><link>http://127.0.0.1/demo/</link><description>A feed to try pingd with</description>'
      item 1 "The first item"
      echo '</channel></rss>'; } > "$feed"
    echo "wrote $feed" ;;
  add)
    [ -f "$feed" ] || "$0" init >/dev/null
    title=${2:-"An item added at $(now)"}
    id=$(date +%s%N)
    line=$(item "$id" "$title")
    awk -v line="$line" '/<item>/ && !done { print line; done=1 } { print }' "$feed" > "$feed.tmp" && mv "$feed.tmp" "$feed"
    echo "added \"$title\" to $feed" ;;
  *) echo "usage: $0 init | add TITLE" >&2; exit 2 ;;
esac
