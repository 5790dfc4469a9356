//go:build !linux

package component

import "net"

// quickAcker is a Linux socket option (see quickack_linux.go); elsewhere
// the kernel's delayed acknowledgements stay as they are.
func quickAcker(net.Conn) func() { return nil }
