package getpingd

// Link relations of a GetPingd descriptor.
const (
	// RelDescriptor is the link relation of a GetPingd descriptor.
	RelDescriptor = "getpingd.updates.descriptor"
	// RelDescription is the other spelling the proposal uses for it
	// ("a X-XRDS-Location meta tag or getpingd.updates.description
	// link"); discovery reads both and pingd writes RelDescriptor.
	RelDescription = "getpingd.updates.description"
)

// Namespaces of GetPingd's elements in an XRDS document.
const (
	NSGetPingd     = "http://getpingd.com/core/getpingd-1.0"
	NSGetPingdXMPP = "http://getpingd.com/extensions/xmpp/getpingd-1.0"
)

// GetPingd service description values.
const (
	ServiceSubscribe = "http://getpingd.com/services/subscribe"
	// ContentTypeHTTPSubscribe is a webhook subscription request body.
	ContentTypeHTTPSubscribe = "application/getpingd+http+subscribe+xml"
	// ContentTypeXMPPSubscribe is a whitelist (XMPP consumer) request body.
	ContentTypeXMPPSubscribe = "application/getpingd+xmpp+subscribe+xml"
	// MethodSubscribe and MethodPost are the getpingd:http-method values:
	// the HTTP methods a subscription request may come with.
	MethodSubscribe = "SUBSCRIBE"
	MethodPost      = "POST"
	// SecurityNone and SecurityWhitelist are the getpingd-xmpp:PubSub
	// security values.
	SecurityNone      = "none"
	SecurityWhitelist = "whitelist"
)

// Webhook subscription values (the <url> element's attributes): the
// method a change is delivered with and the diff format. DiffPatchOps is
// the diff format both subscription types support (getpingd:SupportsDiff).
const (
	WebhookMethodPost   = "POST"
	WebhookMethodNotify = "NOTIFY"
	DiffNone            = "none"
	DiffPatchOps        = "application/patch-ops+xml"
	// DiffXMLPatch is RFC 7351's name for the same patch format, accepted
	// as an alias.
	DiffXMLPatch = "application/xml-patch+xml"
)

// IsPatch reports whether a webhook's diff format asks for XML patches
// rather than feed documents of the new entries.
func IsPatch(diff string) bool { return diff == DiffPatchOps || diff == DiffXMLPatch }
