package websub

import (
	"strings"
	"testing"
)

// TestSignatureRoundTrip: what delivery signs, upstream's check of a hub's
// content distribution accepts, for every method pingd signs with; a
// change of body or secret, or another method, does not pass.
func TestSignatureRoundTrip(t *testing.T) {
	body := []byte("<feed/>")
	for _, algo := range []string{"", "sha1", "sha256", "sha384", "sha512"} {
		if !ValidSigAlgo(algo) {
			t.Errorf("ValidSigAlgo(%q) = false", algo)
		}
		sig, err := Sign(algo, "s3cret", body)
		if err != nil {
			t.Fatalf("Sign(%q): %v", algo, err)
		}
		want := algo
		if want == "" {
			want = "sha256"
		}
		if !strings.HasPrefix(sig, want+"=") {
			t.Errorf("Sign(%q) = %q, want the %s method", algo, sig, want)
		}
		if !ValidSignature(sig, "s3cret", body) || !ValidSignature(strings.ToUpper(want)+sig[len(want):], "s3cret", body) {
			t.Errorf("%s: own signature %q refused", want, sig)
		}
		if ValidSignature(sig, "other", body) || ValidSignature(sig, "s3cret", []byte("<feed/> ")) || ValidSignature(sig, "", body) {
			t.Errorf("%s: signature %q accepted for another secret or body", want, sig)
		}
	}
	if _, err := Sign("md5", "s", body); err == nil || ValidSigAlgo("md5") {
		t.Error("md5 accepted")
	}
	for _, header := range []string{"", "sha256", "md5=00", "sha256=zz"} {
		if ValidSignature(header, "s", body) {
			t.Errorf("ValidSignature(%q) = true", header)
		}
	}
}
