package httpapi

import (
	"bytes"
	"context"
	"image/png"
	"net/http/httptest"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/makiuchi-d/gozxing"
	gozxingqr "github.com/makiuchi-d/gozxing/qrcode"
	"golang.org/x/net/html"

	"github.com/pingd/pingd/hub"
)

// TestDescriptorPageQRCodeInChromium: a person opening a node's page in a
// browser finds the chat command and where to send it, the xmpp: links,
// and a QR code that a phone can read: Chromium renders the page under its
// Content-Security-Policy without a violation, and the code in its
// screenshot decodes to the message URI. A whitelist node's page shows
// the same ways in, and not its source.
func TestDescriptorPageQRCodeInChromium(t *testing.T) {
	if testing.Short() {
		t.Skip("starts a headless Chromium")
	}
	e := newEnv(t)
	const private = "https://intranet.example.org/secret-feed.xml"
	for name, model := range map[string]hub.AccessModel{"feeds/demo": hub.AccessOpen, "club news": hub.AccessWhitelist} {
		cfg := hub.DefaultNodeConfig()
		cfg.AccessModel, cfg.Title = model, "Title of "+name
		source := "https://blog.example.org/feed.xml"
		if model == hub.AccessWhitelist {
			source = private
		}
		if _, _, err := e.hub.CreateNode(context.Background(), hub.NodeSpec{Name: name, Source: source, Config: cfg}); err != nil {
			t.Fatal(err)
		}
	}
	var log requestLog
	srv := httptest.NewServer(log.wrap(e.api))
	t.Cleanup(srv.Close)

	for _, tc := range []struct {
		path, node, messageURI, subscribeURI string
	}{
		{"/feeds/feeds%2Fdemo", "feeds/demo",
			"xmpp:pubsub.localhost?message;body=subscribe%20feeds%2Fdemo",
			"xmpp:pubsub.localhost?pubsub;action=subscribe;node=feeds%2Fdemo"},
		{"/feeds/club%20news", "club news",
			"xmpp:pubsub.localhost?message;body=subscribe%20club%20news",
			"xmpp:pubsub.localhost?pubsub;action=subscribe;node=club%20news"},
	} {
		t.Run(tc.node, func(t *testing.T) {
			dom, stderr := chromium(t, "--dump-dom", srv.URL+tc.path)
			doc, err := html.Parse(bytes.NewReader(dom))
			if err != nil {
				t.Fatalf("parse the dumped DOM: %v", err)
			}
			links := map[string]string{}
			for _, a := range docFind(doc, docByTag("a")) {
				for _, at := range a.Attr {
					if at.Key == "href" {
						links[at.Val] = docText(a)
					}
				}
			}
			for _, want := range []string{tc.messageURI, tc.subscribeURI} {
				if _, ok := links[want]; !ok {
					t.Errorf("the browser's page has no link to %s; links: %q", want, links)
				}
			}
			text := docText(docFind(doc, docByTag("body"))[0])
			if want := "Send subscribe " + tc.node + " to pubsub.localhost"; !strings.Contains(strings.Join(strings.Fields(text), " "), want) {
				t.Errorf("the browser's page does not say %q", want)
			}
			if svgs := docFind(doc, docByTag("svg")); len(svgs) != 1 {
				t.Errorf("the browser's page has %d svg elements, want the QR code", len(svgs))
			}
			if strings.Contains(string(dom), private) {
				t.Error("the whitelist node's page shows its source")
			}
			for line := range strings.Lines(string(stderr)) {
				if strings.Contains(line, "Content Security Policy") {
					t.Errorf("Chromium reports a Content-Security-Policy violation: %s", line)
				}
			}

			shot := filepath.Join(t.TempDir(), "page.png")
			chromium(t, "--hide-scrollbars", "--force-device-scale-factor=1", "--window-size=800,1400", "--screenshot="+shot, srv.URL+tc.path)
			if got := decodeQR(t, shot); got != tc.messageURI {
				t.Errorf("the QR code in the screenshot reads %q, want %q", got, tc.messageURI)
			}
		})
	}
	for _, path := range log.list() {
		if !strings.HasPrefix(path, "/feeds/") && path != "/favicon.ico" {
			t.Errorf("the browser asked the server for %s", path)
		}
	}
}

// decodeQR reads the QR code in a PNG screenshot with ZXing's decoder.
func decodeQR(t *testing.T, path string) string {
	t.Helper()
	f, err := os.Open(path)
	if err != nil {
		t.Fatal(err)
	}
	defer f.Close()
	img, err := png.Decode(f)
	if err != nil {
		t.Fatalf("screenshot: %v", err)
	}
	bmp, err := gozxing.NewBinaryBitmapFromImage(img)
	if err != nil {
		t.Fatal(err)
	}
	res, err := gozxingqr.NewQRCodeReader().Decode(bmp, map[gozxing.DecodeHintType]any{gozxing.DecodeHintType_TRY_HARDER: true})
	if err != nil {
		t.Fatalf("no QR code found in the screenshot %s: %v", path, err)
	}
	return res.GetText()
}
