package discovery

import (
	"cmp"
	"encoding/xml"
	"fmt"
	"net/url"
	"slices"
	"strconv"
	"strings"

	"github.com/pingd/pingd/internal/getpingd"
	"github.com/pingd/pingd/internal/xmlguard"
)

// foundXRDS is the part of an XRDS document discovery reads.
type foundXRDS struct {
	XRD []struct {
		Services []struct {
			Priority string   `xml:"priority,attr"`
			Types    []string `xml:"Type"`
			URIs     []struct {
				Method   string `xml:"http://getpingd.com/core/getpingd-1.0 http-method,attr"`
				Priority string `xml:"priority,attr"`
				Value    string `xml:",chardata"`
			} `xml:"URI"`
			Accept []struct {
				Type   string         `xml:"type,attr"`
				PubSub *foundXMPPNode `xml:"http://getpingd.com/extensions/xmpp/getpingd-1.0 PubSub"`
			} `xml:"http://getpingd.com/core/getpingd-1.0 Accept"`
			PubSub *foundXMPPNode `xml:"http://getpingd.com/extensions/xmpp/getpingd-1.0 PubSub"`
		} `xml:"Service"`
	} `xml:"XRD"`
}

// foundXMPPNode is a getpingd-xmpp:PubSub element.
type foundXMPPNode struct {
	JID      string `xml:"jid,attr"`
	Node     string `xml:"node,attr"`
	Security string `xml:"security,attr"`
}

// maxServices bounds the services read from one document.
const maxServices = 16

// parsePriority reads an XRD priority attribute, a non-negative integer;
// nil when it is absent or not one (XRD ranks those last).
func parsePriority(v string) *int {
	n, err := strconv.Atoi(strings.TrimSpace(v))
	if err != nil || n < 0 {
		return nil
	}
	return &n
}

// byPriority orders two priorities as XRD does: lower first, none last.
func byPriority(a, b *int) int {
	switch {
	case a == nil && b == nil:
		return 0
	case a == nil:
		return 1
	case b == nil:
		return -1
	}
	return cmp.Compare(*a, *b)
}

// parseXRDS reads the GetPingd services of an XRDS document, each XRD's
// services and each service's URIs in the order a client tries them: by
// their priority attributes, in document order among equals (the
// proposal: "select the first url/method combination that it is also
// compatible with").
func parseXRDS(descriptor string, body []byte) ([]Service, error) {
	if err := xmlguard.Check(body, xmlguard.Options{Limits: xmlguard.Limits{StartTagBytes: maxStartTagBytes}}); err != nil {
		return nil, fmt.Errorf("XRDS document: %w", err)
	}
	var doc foundXRDS
	if err := xml.Unmarshal(body, &doc); err != nil {
		return nil, err
	}
	base, _ := url.Parse(descriptor)
	var out []Service
	for _, x := range doc.XRD {
		first := len(out)
		for _, s := range x.Services {
			if len(out) == maxServices {
				break
			}
			svc := Service{Descriptor: descriptor, Priority: parsePriority(s.Priority)}
			for _, t := range s.Types {
				svc.Types = append(svc.Types, strings.TrimSpace(t))
			}
			for _, u := range s.URIs {
				if v := resolve(base, u.Value); v != "" {
					m := strings.ToUpper(strings.TrimSpace(u.Method))
					if m == "" {
						m = "GET"
					}
					svc.URIs = append(svc.URIs, ServiceURI{Method: m, URL: v, Priority: parsePriority(u.Priority)})
				}
			}
			slices.SortStableFunc(svc.URIs, func(a, b ServiceURI) int { return byPriority(a.Priority, b.Priority) })
			for _, u := range svc.URIs {
				if svc.Subscribe == nil {
					svc.Subscribe = map[string]string{}
				}
				if _, ok := svc.Subscribe[u.Method]; !ok {
					svc.Subscribe[u.Method] = u.URL
				}
			}
			node := s.PubSub
			for _, a := range s.Accept {
				if t := strings.TrimSpace(a.Type); t != "" {
					svc.Accept = append(svc.Accept, t)
				}
				if node == nil && a.PubSub != nil {
					node = a.PubSub
				}
			}
			if node != nil {
				svc.JID, svc.Node, svc.Security = strings.TrimSpace(node.JID), node.Node, strings.TrimSpace(node.Security)
			}
			out = append(out, svc)
		}
		slices.SortStableFunc(out[first:], func(a, b Service) int { return byPriority(a.Priority, b.Priority) })
	}
	return out, nil
}

// ChooseService picks, for a client that sends subscription requests of
// contentType, the first service (in the order parseXRDS gives) that is a
// GetPingd subscribe service accepting that type, and its first URI whose
// method a client can send a subscription with (SUBSCRIBE or POST). An
// XMPP subscription also needs the service's pubsub JID and node.
func ChooseService(services []Service, contentType string) (Choice, bool) {
	for _, s := range services {
		if !slices.Contains(s.Types, getpingd.ServiceSubscribe) || !slices.Contains(s.Accept, contentType) {
			continue
		}
		if contentType == getpingd.ContentTypeXMPPSubscribe && (s.JID == "" || s.Node == "") {
			continue
		}
		for _, u := range s.URIs {
			if u.Method != getpingd.MethodSubscribe && u.Method != getpingd.MethodPost {
				continue
			}
			c := Choice{Type: contentType, Descriptor: s.Descriptor, Method: u.Method, URI: u.URL}
			if contentType == getpingd.ContentTypeXMPPSubscribe {
				c.JID, c.Node, c.Security = s.JID, s.Node, s.Security
			}
			return c, true
		}
	}
	return Choice{}, false
}
