// Package websub is the vocabulary of W3C WebSub (Recommendation, 23
// January 2018) as pingd speaks it on both sides: as a hub (httpapi takes
// hub requests, delivery verifies intent and distributes content) and as a
// subscriber of other hubs (upstream).
//
// Its room: the names (hub.mode values, the lease bounds, the secret's
// limit, pingd's signature-method parameter and the key a denial is
// recorded under), ParseRequest (a hub request's form, validated), the
// X-Hub-Signature encoder and check (Sign, ValidSignature, ValidSigAlgo)
// and the Link header of a distribution.
//
// It is a room of its own, as mellium gives each XEP its package, so that
// the HTTP side, delivery and upstream share one definition of the
// protocol without importing each other. It does no I/O and imports no
// pingd package but hub (for URL validation and its error kinds).
package websub
