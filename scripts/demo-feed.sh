#!/usr/bin/env bash
# The demo feed of `make run`: `init` writes an RSS feed with one item,
# `add TITLE` adds an item at the top. Each item links to a small page of
# its own, served with the feed by `make run` on DEMO_FEED_PORT (8081), and
# the site's front page names the feed with a <link rel="alternate">.
set -euo pipefail
cd "$(dirname "$0")/.."
www=${DEMO_WWW:-.run/www}
feed=$www/feed.xml
site="http://127.0.0.1:${DEMO_FEED_PORT:-8081}"
# add keeps the address init wrote, so it needs no DEMO_FEED_PORT.
if [ -z "${DEMO_FEED_PORT:-}" ] && [ -f "$feed" ]; then
  was=$(sed -n 's|.*<channel><title>[^<]*</title><link>\(http://[^<]*\)/</link>.*|\1|p' "$feed")
  [ -n "$was" ] && site=$was
fi
# esc makes a title safe inside XML and HTML text.
esc() { printf '%s' "$1" | sed -e 's/&/\&amp;/g' -e 's/</\&lt;/g' -e 's/>/\&gt;/g'; }
mkdir -p "$www/demo"
now() { date -u '+%a, %d %b %Y %H:%M:%S GMT'; }
# page writes the page an item links to.
page() {
  local id=$1 title
  title=$(esc "$2")
  printf '<!doctype html>\n<meta charset="utf-8"><title>%s</title>\n<link rel="alternate" type="application/rss+xml" href="%s/feed.xml">\n<h1>%s</h1>\n<p>An item of the pingd demo feed.</p>\n' \
    "$title" "$site" "$title" > "$www/demo/$id.html"
}
item() {
  local id=$1 title
  title=$(esc "$2")
  printf '    <item><title>%s</title><link>%s/demo/%s.html</link><guid isPermaLink="false">demo-%s</guid><pubDate>%s</pubDate><description>%s</description></item>\n' \
    "$title" "$site" "$id" "$id" "$(now)" "$title"
}
case "${1:-}" in
  init)
    printf '<!doctype html>\n<meta charset="utf-8"><title>pingd demo site</title>\n<link rel="alternate" type="application/rss+xml" title="pingd demo feed" href="%s/feed.xml">\n<h1>pingd demo site</h1>\n<p><a href="%s/feed.xml">The feed</a></p>\n' \
      "$site" "$site" > "$www/index.html"
    page 1 "The first item"
    { echo '<?xml version="1.0" encoding="utf-8"?>'
      echo "<rss version=\"2.0\"><channel><title>pingd demo feed</title><link>$site/</link><description>A feed to try pingd with</description>"
      item 1 "The first item"
      echo '</channel></rss>'; } > "$feed"
    echo "wrote $feed" ;;
  add)
    [ -f "$feed" ] || "$0" init >/dev/null
    title=${2:-"An item added at $(now)"}
    id=$(date +%s%N)
    page "$id" "$title"
    line=$(item "$id" "$title")
    awk -v line="$line" '/<item>/ && !done { print line; done=1 } { print }' "$feed" > "$feed.tmp" && mv "$feed.tmp" "$feed"
    echo "added \"$title\" to $feed" ;;
  *) echo "usage: $0 init | add TITLE" >&2; exit 2 ;;
esac
