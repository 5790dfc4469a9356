package xmppaddr

import "mellium.im/xmpp/jid"

// Bare validates s as a JID and returns its bare form (localpart@domain,
// or the domain alone), normalised: case folded where the profiles fold
// it, a trailing dot of the domain dropped, the resource removed. s is
// taken as it is: white space around it makes it invalid. The error is
// the address library's, saying why.
func Bare(s string) (string, error) {
	j, err := jid.Parse(s)
	if err != nil {
		return "", err
	}
	return j.Bare().String(), nil
}
