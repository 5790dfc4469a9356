package websub

// Modes of a hub request (hub.mode), and of the denial notice a hub sends.
const (
	ModeSubscribe   = "subscribe"
	ModeUnsubscribe = "unsubscribe"
	ModePublish     = "publish"
	ModeDenied      = "denied"
)

// Leases, in seconds: the default when a subscriber asks for none and the
// bounds a request is clamped to (W3C WebSub §5.1 lets the hub choose).
const (
	DefaultLease = 10 * 24 * 3600
	MinLease     = 5 * 60
	MaxLease     = 30 * 24 * 3600
)

// MaxSecretBytes bounds hub.secret: "MUST be less than 200 bytes".
const MaxSecretBytes = 199

// VerifyDenied is the key of hub.Options.Verify that holds the reason a
// request is denied: the hub then sends the denial notice instead of a
// verification of intent.
const VerifyDenied = "denied"
