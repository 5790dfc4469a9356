package discovery

import (
	"bytes"
	"encoding/xml"
	"strings"
	"testing"

	"golang.org/x/net/html"
	"golang.org/x/net/html/atom"

	"github.com/pingd/pingd/hub"
	"github.com/pingd/pingd/internal/getpingd"
	"github.com/pingd/pingd/internal/nodeurl"
)

// headTag is a <meta> or <link> found in the <head> of a parsed page.
type headTag struct {
	name  string
	attrs map[string]string
}

// parsePage parses doc as HTML5 and returns the tags of its <head>, its
// <title> and its body text.
func parsePage(t *testing.T, doc []byte) (tags []headTag, title, bodyText string) {
	t.Helper()
	root, err := html.Parse(bytes.NewReader(doc))
	if err != nil {
		t.Fatalf("html.Parse: %v", err)
	}
	var head, body *html.Node
	for n := range root.Descendants() {
		switch n.DataAtom {
		case atom.Head:
			head = n
		case atom.Body:
			body = n
		}
	}
	if head == nil || body == nil {
		t.Fatal("no head or body")
	}
	for n := range head.Descendants() {
		if n.Type != html.ElementNode {
			continue
		}
		switch n.DataAtom {
		case atom.Title:
			title = textOf(n)
		case atom.Meta, atom.Link:
			tag := headTag{name: n.Data, attrs: map[string]string{}}
			for _, a := range n.Attr {
				tag.attrs[a.Key] = a.Val
			}
			tags = append(tags, tag)
		}
	}
	return tags, title, textOf(body)
}

func textOf(n *html.Node) string {
	var b strings.Builder
	for d := range n.Descendants() {
		if d.Type == html.TextNode {
			b.WriteString(d.Data)
		}
	}
	return b.String()
}

func findTag(tags []headTag, name, key, value string) *headTag {
	for i := range tags {
		if tags[i].name == name && tags[i].attrs[key] == value {
			return &tags[i]
		}
	}
	return nil
}

func TestDescriptorPageCarriesTheDiscoveryTags(t *testing.T) {
	for _, node := range hostileNodes {
		for _, model := range []hub.AccessModel{hub.AccessOpen, hub.AccessWhitelist} {
			t.Run(string(model)+"/"+node, func(t *testing.T) {
				d := descriptorFor(t, node, model, "")
				links, err := nodeurl.NodeLinks("https://pingd.example.org/base", node)
				if err != nil {
					t.Fatal(err)
				}
				title := `Gadget "news" <b>&</b> ` + node
				page := DescriptorPage(d, Page{Title: title, XRDSURL: links.XRDS})
				tags, gotTitle, body := parsePage(t, page)

				meta := findTag(tags, "meta", "http-equiv", "X-XRDS-Location")
				if meta == nil || meta.attrs["content"] != links.XRDS {
					t.Errorf("meta X-XRDS-Location = %+v, want content %q", meta, links.XRDS)
				}
				link := findTag(tags, "link", "rel", "getpingd.updates.descriptor")
				// DESIGN.md: the header, the meta tag and the link all point at /xrds/{node}.
				if link == nil || link.attrs["href"] != links.XRDS {
					t.Errorf("link descriptor = %+v, want href %q", link, links.XRDS)
				}
				if findTag(tags, "meta", "charset", "utf-8") == nil {
					t.Error("no <meta charset>")
				}
				if !strings.HasPrefix(gotTitle, title) {
					t.Errorf("title = %q, want it to start with %q", gotTitle, title)
				}
				// The explanation names the node and the component as
				// text, whatever characters they hold.
				for _, want := range []string{node, "pubsub.example.org", getpingd.ContentTypeHTTPSubscribe, d.DescriptorURL, d.PostURL(), links.XRDS} {
					if !strings.Contains(body, want) {
						t.Errorf("body text lacks %q", want)
					}
				}
				// Only a whitelist node needs the whitelist request and a token.
				whitelist := model == hub.AccessWhitelist
				if got := strings.Contains(body, "Authorization: Bearer"); got != whitelist {
					t.Errorf("token explained = %v on a %s node", got, model)
				}
				if got := strings.Contains(body, getpingd.ContentTypeXMPPSubscribe); got != whitelist {
					t.Errorf("whitelist request explained = %v on a %s node", got, model)
				}
				if !bytes.HasPrefix(page, []byte("<!DOCTYPE html>")) {
					t.Error("not an HTML5 document")
				}
			})
		}
	}
}

func TestDescriptorPageDefaultsTheTitleToTheNode(t *testing.T) {
	d := descriptorFor(t, "a<b>", hub.AccessOpen, "")
	_, title, _ := parsePage(t, DescriptorPage(d, Page{XRDSURL: "https://x.example/xrds/a"}))
	if !strings.HasPrefix(title, "a<b>") {
		t.Errorf("title = %q", title)
	}
}

func TestSnippets(t *testing.T) {
	for _, node := range hostileNodes {
		t.Run(node, func(t *testing.T) {
			links, err := nodeurl.NodeLinks("https://pingd.example.org:8443/base/", node)
			if err != nil {
				t.Fatal(err)
			}
			s, err := Snippets(links)
			if err != nil {
				t.Fatal(err)
			}

			// HTML head: parsed as the head of a page.
			tags, _, _ := parsePage(t, []byte("<!DOCTYPE html><html><head>"+s.HTMLHead+"</head><body></body></html>"))
			if l := findTag(tags, "link", "rel", "getpingd.updates.descriptor"); l == nil || l.attrs["href"] != links.Descriptor {
				t.Errorf("head descriptor link = %+v", l)
			}
			if m := findTag(tags, "meta", "http-equiv", "X-XRDS-Location"); m == nil || m.attrs["content"] != links.XRDS {
				t.Errorf("head meta = %+v", m)
			}
			if l := findTag(tags, "link", "rel", "hub"); l == nil || l.attrs["href"] != links.Hub {
				t.Errorf("head hub link = %+v", l)
			}
			if len(tags) != 3 {
				t.Errorf("head snippet has %d tags, want 3", len(tags))
			}

			// Atom: pasted into a <feed>, the links are Atom links.
			var feed struct {
				Links []struct {
					XMLName xml.Name
					Rel     string `xml:"rel,attr"`
					Href    string `xml:"href,attr"`
				} `xml:"http://www.w3.org/2005/Atom link"`
			}
			if err := xml.Unmarshal([]byte(`<feed xmlns="http://www.w3.org/2005/Atom">`+s.Atom+`</feed>`), &feed); err != nil {
				t.Fatalf("Atom snippet: %v", err)
			}
			if len(feed.Links) != 2 || feed.Links[0].Rel != getpingd.RelDescriptor || feed.Links[0].Href != links.Descriptor ||
				feed.Links[1].Rel != "hub" || feed.Links[1].Href != links.Hub {
				t.Errorf("Atom links = %+v", feed.Links)
			}

			// RSS: pasted into a <channel> of an <rss> that declares
			// nothing, the Atom links still resolve, and <cloud> points at
			// pingd's /pleaseNotify.
			var channel struct {
				Links []struct {
					Rel  string `xml:"rel,attr"`
					Href string `xml:"href,attr"`
				} `xml:"http://www.w3.org/2005/Atom link"`
				Clouds []struct {
					XMLName           xml.Name
					Domain            string `xml:"domain,attr"`
					Port              string `xml:"port,attr"`
					Path              string `xml:"path,attr"`
					RegisterProcedure string `xml:"registerProcedure,attr"`
					Protocol          string `xml:"protocol,attr"`
				} `xml:"cloud"`
			}
			if err := xml.Unmarshal([]byte(`<channel>`+s.RSS+`</channel>`), &channel); err != nil {
				t.Fatalf("RSS snippet: %v", err)
			}
			if len(channel.Links) != 2 || channel.Links[0].Rel != getpingd.RelDescriptor || channel.Links[0].Href != links.Descriptor ||
				channel.Links[1].Rel != "hub" || channel.Links[1].Href != links.Hub {
				t.Errorf("RSS atom:links = %+v", channel.Links)
			}
			if len(channel.Clouds) != 1 {
				t.Fatalf("RSS snippet has %d <cloud>", len(channel.Clouds))
			}
			c := channel.Clouds[0]
			if c.XMLName.Space != "" || c.Domain != "pingd.example.org" || c.Port != "8443" || c.Path != "/base/pleaseNotify" ||
				c.RegisterProcedure != "rssCloud.pleaseNotify" || c.Protocol != "http-post" {
				t.Errorf("cloud = %+v", c)
			}
		})
	}
}

func TestCloudDefaultPorts(t *testing.T) {
	for in, want := range map[string]Cloud{
		"http://example.org/pleaseNotify":       {"example.org", "80", "/pleaseNotify", CloudRegisterProcedure, CloudProtocol},
		"https://example.org/x/pleaseNotify":    {"example.org", "443", "/x/pleaseNotify", CloudRegisterProcedure, CloudProtocol},
		"http://[::1]:8080/pleaseNotify":        {"::1", "8080", "/pleaseNotify", CloudRegisterProcedure, CloudProtocol},
		"http://127.0.0.1:9/a%20b/pleaseNotify": {"127.0.0.1", "9", "/a%20b/pleaseNotify", CloudRegisterProcedure, CloudProtocol},
	} {
		got, err := CloudFor(in)
		if err != nil || got != want {
			t.Errorf("CloudFor(%q) = %+v, %v; want %+v", in, got, err, want)
		}
	}
	if _, err := CloudFor("/relative"); err == nil {
		t.Error("CloudFor accepted a relative URL")
	}
	if _, err := Snippets(nodeurl.Links{PleaseNotify: ":bad"}); err == nil {
		t.Error("Snippets accepted a bad endpoint")
	}
}
