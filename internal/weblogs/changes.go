package weblogs

import (
	"bytes"
	"encoding/xml"
	"fmt"
	"net/http"
	"time"
)

// The weblogs.com change list (seed 003, and version 2 of changes.xml for
// rssUrl): <weblogUpdates version="2" updated count> with one <weblog
// name url [rssUrl] when> per ping, newest first. changes.xml,
// shortChanges.xml and the hourly archives are all this document.

// HeaderSizeMax is the size of a change list without its entries, with
// the longest "updated" and "count" there can be.
var HeaderSizeMax = len(xml.Header) + len(`<weblogUpdates version="2" updated="Mon, 02 Jan 20060 15:04:05 GMT" count="-9223372036854775808">`+"\n") +
	len("</weblogUpdates>\n")

// EntrySizeMax is the size of an entry's line besides its name and URLs,
// with the longest "when" there can be.
const EntrySizeMax = len(` <weblog name="" url="" rssUrl="" when="-9223372036854775808"/>` + "\n")

// EscapeAttr writes s for a double-quoted attribute value; characters XML
// cannot carry become U+FFFD.
func EscapeAttr(b *bytes.Buffer, s string) {
	_ = xml.EscapeText(b, []byte(s))
}

// WriteStart writes the XML declaration and the <weblogUpdates> start tag:
// updated is the list's time, count the pings it stands for.
func WriteStart(b *bytes.Buffer, updated time.Time, count int64) {
	b.WriteString(xml.Header)
	fmt.Fprintf(b, `<weblogUpdates version="2" updated="%s" count="%d">`+"\n",
		updated.UTC().Format(http.TimeFormat), count)
}

// WriteWeblog writes one ping's <weblog>: name and url as the ping
// submitted them, rssURL the feed an extendedPing named ("" for none),
// each already escaped with EscapeAttr, and when the whole minutes from
// the ping's receipt to the list's "updated" (the seed: "the number of
// minutes since the ping was received").
func WriteWeblog(b *bytes.Buffer, name, url, rssURL string, when int64) {
	if rssURL != "" {
		fmt.Fprintf(b, ` <weblog name="%s" url="%s" rssUrl="%s" when="%d"/>`+"\n", name, url, rssURL, when)
	} else {
		fmt.Fprintf(b, ` <weblog name="%s" url="%s" when="%d"/>`+"\n", name, url, when)
	}
}

// WriteEnd closes the list.
func WriteEnd(b *bytes.Buffer) {
	b.WriteString("</weblogUpdates>\n")
}
