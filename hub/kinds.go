package hub

import "slices"

// Kind is the transport a subscriber asked to be notified over.
type Kind string

// The subscription kinds; each has its line in kindRegistry.
const (
	KindXMPP     Kind = "xmpp"
	KindWebhook  Kind = "webhook" // GetPingd HTTP subscription
	KindWebSub   Kind = "websub"
	KindRSSCloud Kind = "rsscloud"
	KindCNWS     Kind = "cnws"
)

// KindInfo is what the rest of pingd knows of a subscription kind: the
// hub's rules, the delivery engine, the store's statistics and the status
// page read it here instead of naming kinds.
type KindInfo struct {
	// Kind is the kind's name, stored with each subscription and shown
	// on the status page and in statistics.
	Kind Kind
	// ItemLevel: subscribers get items (only the new entries) rather than
	// a bare "this URL changed".
	ItemLevel bool
	// Verified: anyone can name any callback, so the subscriber verifies
	// each request about its subscription (Hub.RequestSubscription,
	// Hub.RequestUnsubscription) before it is applied.
	Verified bool
	// HTTP: the subscriber is a callback URL, served by the delivery
	// engine with the kind's sender (counted against its callback host);
	// otherwise the kind has a transport of its own (XMPP: the
	// component).
	HTTP bool
}

// kindRegistry lists every kind, one line each, in the order the status
// page shows them. A kind's sender is registered in cmd/pingd
// (deliverySenders) for an HTTP kind.
var kindRegistry = []KindInfo{
	{Kind: KindXMPP, ItemLevel: true},
	{Kind: KindWebhook, ItemLevel: true, Verified: true, HTTP: true},
	{Kind: KindWebSub, ItemLevel: true, Verified: true, HTTP: true},
	{Kind: KindRSSCloud, Verified: true, HTTP: true},
	{Kind: KindCNWS, HTTP: true},
}

// Kinds lists every subscriber kind, in the registry's order.
var Kinds = kindsWhere(func(KindInfo) bool { return true })

// httpKinds are the kinds the delivery engine serves.
var httpKinds = kindsWhere(func(k KindInfo) bool { return k.HTTP })

// HTTPKinds lists the kinds whose subscribers are callback URLs served by
// the delivery engine, in the registry's order.
func HTTPKinds() []Kind { return slices.Clone(httpKinds) }

func kindsWhere(keep func(KindInfo) bool) []Kind {
	var out []Kind
	for _, k := range kindRegistry {
		if keep(k) {
			out = append(out, k.Kind)
		}
	}
	return out
}

// Info is the kind's entry of the registry; false for an unknown kind.
func (k Kind) Info() (KindInfo, bool) {
	for _, info := range kindRegistry {
		if info.Kind == k {
			return info, true
		}
	}
	return KindInfo{}, false
}

// Valid reports whether k is a known kind.
func (k Kind) Valid() bool {
	_, ok := k.Info()
	return ok
}

// ItemLevel reports whether subscribers of this kind get items (only the
// new entries) rather than a bare "this URL changed".
func (k Kind) ItemLevel() bool {
	info, _ := k.Info()
	return info.ItemLevel
}

// Verified reports whether subscribers of this kind verify their requests
// (see KindInfo.Verified).
func (k Kind) Verified() bool {
	info, _ := k.Info()
	return info.Verified
}

// HTTP reports whether subscribers of this kind are callback URLs served
// by the delivery engine.
func (k Kind) HTTP() bool {
	info, _ := k.Info()
	return info.HTTP
}
