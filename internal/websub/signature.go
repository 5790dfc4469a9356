package websub

import (
	"crypto/hmac"
	"crypto/sha1"
	"crypto/sha256"
	"crypto/sha512"
	"encoding/hex"
	"fmt"
	"hash"
	"strings"
)

// ValidSigAlgo reports whether algo names an X-Hub-Signature method pingd
// signs with ("" is the default, sha256).
func ValidSigAlgo(algo string) bool {
	switch algo {
	case "", "sha1", "sha256", "sha384", "sha512":
		return true
	}
	return false
}

// Sign returns the X-Hub-Signature value of body under secret with the
// named algorithm (sha1, sha256, sha384, sha512; "" is sha256).
func Sign(algo, secret string, body []byte) (string, error) {
	var h func() hash.Hash
	switch algo {
	case "", "sha256":
		algo, h = "sha256", sha256.New
	case "sha1":
		h = sha1.New
	case "sha384":
		h = sha512.New384
	case "sha512":
		h = sha512.New
	default:
		return "", fmt.Errorf("unsupported signature algorithm %q", algo)
	}
	mac := hmac.New(h, []byte(secret))
	mac.Write(body)
	return algo + "=" + hex.EncodeToString(mac.Sum(nil)), nil
}

// ValidSignature checks an X-Hub-Signature header, method=hex HMAC of the
// body, against secret. No secret, an unknown method or a malformed value
// is not valid.
func ValidSignature(header, secret string, body []byte) bool {
	algo, sig, ok := strings.Cut(header, "=")
	if !ok || secret == "" {
		return false
	}
	var h func() hash.Hash
	switch strings.ToLower(algo) {
	case "sha1":
		h = sha1.New
	case "sha256":
		h = sha256.New
	case "sha384":
		h = sha512.New384
	case "sha512":
		h = sha512.New
	default:
		return false
	}
	want, err := hex.DecodeString(sig)
	if err != nil {
		return false
	}
	mac := hmac.New(h, []byte(secret))
	mac.Write(body)
	return hmac.Equal(mac.Sum(nil), want)
}

// LinkHeader is the Link header of a content distribution: the hub
// (rel="hub") and the topic (rel="self"), as WebSub discovery names them.
func LinkHeader(hubURL, self string) string {
	return fmt.Sprintf("<%s>; rel=\"hub\", <%s>; rel=\"self\"", hubURL, self)
}
