package discovery

import (
	"bytes"
	"fmt"
	"net/url"
	"regexp"
	"strconv"
	"strings"
	"testing"

	"github.com/boombuler/barcode/qr"
	"golang.org/x/net/html"
	"golang.org/x/net/html/atom"

	"github.com/pingd/pingd/hub"
)

func TestXMPPURIs(t *testing.T) {
	d := descriptorFor(t, "feeds/demo", hub.AccessOpen, "")
	if got, want := d.SubscribeURI(), "xmpp:pubsub.example.org?pubsub;action=subscribe;node=feeds%2Fdemo"; got != want {
		t.Errorf("SubscribeURI = %q, want %q", got, want)
	}
	if got, want := d.MessageURI(), "xmpp:pubsub.example.org?message;body=subscribe%20feeds%2Fdemo"; got != want {
		t.Errorf("MessageURI = %q, want %q", got, want)
	}
	if got := d.ChatCommand(); got != "subscribe feeds/demo" {
		t.Errorf("ChatCommand = %q", got)
	}
	// Every node name comes back whole from its query value, which holds
	// only unreserved characters and percent-encodings (RFC 5122 ivalue).
	value := regexp.MustCompile(`^([A-Za-z0-9._~-]|%[0-9A-F]{2})*$`)
	for _, node := range hostileNodes {
		d := descriptorFor(t, node, hub.AccessWhitelist, "")
		for prefix, uri := range map[string]string{
			"xmpp:pubsub.example.org?pubsub;action=subscribe;node=": d.SubscribeURI(),
			"xmpp:pubsub.example.org?message;body=":                 d.MessageURI(),
		} {
			v, ok := strings.CutPrefix(uri, prefix)
			if !ok || !value.MatchString(v) {
				t.Errorf("node %q: URI %q is not %s and one escaped value", node, uri, prefix)
				continue
			}
			got, err := url.PathUnescape(v)
			want := node
			if strings.Contains(prefix, "message") {
				want = "subscribe " + node
			}
			if err != nil || got != want {
				t.Errorf("node %q: %q unescapes to %q (%v), want %q", node, uri, got, err, want)
			}
		}
	}
}

// svgModules reads the dark modules back from the path QRSVG draws.
func svgModules(t *testing.T, svg string) (size int, dark map[[2]int]bool) {
	t.Helper()
	box := regexp.MustCompile(`viewBox="0 0 (\d+) (\d+)"`).FindStringSubmatch(svg)
	if box == nil || box[1] != box[2] {
		t.Fatalf("no square viewBox in %.200s", svg)
	}
	size, _ = strconv.Atoi(box[1])
	path := regexp.MustCompile(` d="([^"]*)"`).FindStringSubmatch(svg)
	if path == nil {
		t.Fatalf("no path in %.200s", svg)
	}
	dark = map[[2]int]bool{}
	rect := regexp.MustCompile(`^M(\d+) (\d+)h(\d+)v1h-(\d+)z`)
	rest := path[1]
	for rest != "" {
		m := rect.FindStringSubmatch(rest)
		if m == nil || m[3] != m[4] {
			t.Fatalf("path does not go on as runs of modules: %.80s", rest)
		}
		x, _ := strconv.Atoi(m[1])
		y, _ := strconv.Atoi(m[2])
		run, _ := strconv.Atoi(m[3])
		for i := range run {
			dark[[2]int{x + i, y}] = true
		}
		rest = rest[len(m[0]):]
	}
	return size, dark
}

// TestQRSVGDrawsTheLibrarysCode: the SVG's dark modules are exactly those
// of the QR library's own code for the content, inside the quiet zone.
func TestQRSVGDrawsTheLibrarysCode(t *testing.T) {
	for _, node := range hostileNodes {
		content := descriptorFor(t, node, hub.AccessOpen, "").MessageURI()
		svg, err := QRSVG(content, "label <&>")
		if err != nil {
			t.Fatalf("node %q: %v", node, err)
		}
		code, err := qr.Encode(content, qr.M, qr.Auto)
		if err != nil {
			t.Fatal(err)
		}
		dim := code.Bounds().Dx()
		size, dark := svgModules(t, string(svg))
		if size != dim+2*qrQuietZone {
			t.Fatalf("node %q: %d modules with the quiet zone, want %d", node, size, dim+2*qrQuietZone)
		}
		for y := range size {
			for x := range size {
				want := false
				if cx, cy := x-qrQuietZone, y-qrQuietZone; cx >= 0 && cy >= 0 && cx < dim && cy < dim {
					r, _, _, _ := code.At(cx, cy).RGBA()
					want = r < 0x8000
				}
				if dark[[2]int{x, y}] != want {
					t.Fatalf("node %q: module (%d,%d) dark %v, the library's %v", node, x, y, !want, want)
				}
			}
		}
		if !strings.Contains(string(svg), "<title>label &lt;&amp;&gt;</title>") {
			t.Errorf("the label is not escaped in %.300s", svg)
		}
		if strings.Contains(string(svg), "style") || strings.Contains(string(svg), "href") {
			t.Errorf("the SVG styles or links something, which the page's policy forbids: %.300s", svg)
		}
	}
}

// TestDescriptorPageShowsHowToSubscribe: the page gives a person the chat
// command and where to send it, the message URI as a link and as a QR
// code, and the XEP-0060 subscribe URI as a link, escaped for any node.
func TestDescriptorPageShowsHowToSubscribe(t *testing.T) {
	for _, node := range hostileNodes {
		for _, model := range []hub.AccessModel{hub.AccessOpen, hub.AccessWhitelist} {
			t.Run(string(model)+"/"+node, func(t *testing.T) {
				d := descriptorFor(t, node, model, "")
				page := DescriptorPage(d, Page{XRDSURL: "https://pingd.example.org/base/xrds/x"})
				root, err := html.Parse(bytes.NewReader(page))
				if err != nil {
					t.Fatal(err)
				}
				hrefs := map[string]string{}
				var svg *html.Node
				for n := range root.Descendants() {
					switch {
					case n.DataAtom == atom.A:
						hrefs[htmlAttr(n, "id")] = htmlAttr(n, "href")
					case n.DataAtom == atom.Svg:
						svg = n
					}
				}
				if hrefs["message-uri"] != d.MessageURI() || hrefs["subscribe-uri"] != d.SubscribeURI() {
					t.Errorf("links %q, want the message URI %q and the subscribe URI %q", hrefs, d.MessageURI(), d.SubscribeURI())
				}
				_, _, body := parsePage(t, page)
				if want := fmt.Sprintf("Send subscribe %s to pubsub.example.org", node); !strings.Contains(body, want) {
					t.Errorf("the page does not say %q", want)
				}
				if svg == nil {
					t.Fatal("no QR code")
				}
				var b bytes.Buffer
				if err := html.Render(&b, svg); err != nil {
					t.Fatal(err)
				}
				want, err := QRSVG(d.MessageURI(), "")
				if err != nil {
					t.Fatal(err)
				}
				_, gotDark := svgModules(t, b.String())
				_, wantDark := svgModules(t, string(want))
				if len(gotDark) != len(wantDark) {
					t.Errorf("the page's QR code has %d dark modules, the message URI's %d", len(gotDark), len(wantDark))
				}
				for m := range wantDark {
					if !gotDark[m] {
						t.Fatalf("the page's QR code is not the message URI's: module %v", m)
					}
				}
				whitelist := model == hub.AccessWhitelist
				if got := strings.Contains(body, "ask its owner to add"); got != whitelist {
					t.Errorf("the whitelist is explained = %v on a %s node", got, model)
				}
			})
		}
	}
}

func htmlAttr(n *html.Node, key string) string {
	for _, a := range n.Attr {
		if a.Key == key {
			return a.Val
		}
	}
	return ""
}
