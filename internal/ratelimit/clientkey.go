package ratelimit

import "net/netip"

// ClientKey is the rate-limit key of a client address, with or without a
// port: the address itself for IPv4 (IPv4-mapped IPv6 included), its /64
// for IPv6, since one host commonly has a whole /64. Anything that is not
// an address is its own key.
func ClientKey(remote string) string {
	addr, err := netip.ParseAddr(remote)
	if err != nil {
		ap, err := netip.ParseAddrPort(remote)
		if err != nil {
			return remote
		}
		addr = ap.Addr()
	}
	addr = addr.WithZone("").Unmap()
	if addr.Is4() {
		return addr.String()
	}
	return netip.PrefixFrom(addr, 64).Masked().String()
}
