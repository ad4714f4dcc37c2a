package cli

import (
	"fmt"
	"net"
	"strings"
)

// CheckHostPort reports why addr is not a host:port a program can listen on
// or dial, naming the fix: an address without a port would otherwise be
// dialed on a default port (gRPC's 443), and an unbracketed IPv6 address
// fails later with "too many colons".
func CheckHostPort(addr string) error {
	host, port, err := net.SplitHostPort(addr)
	if err == nil && port != "" {
		return nil
	}
	if err == nil {
		return fmt.Errorf("%q has no port: want host:PORT, e.g. %s:4317", addr, host)
	}
	if !strings.HasPrefix(addr, "[") && strings.Count(addr, ":") > 1 {
		if i := strings.LastIndex(addr, ":"); net.ParseIP(addr[:i]) != nil {
			return fmt.Errorf("%q: an IPv6 address goes in brackets, then the port: [%s]:%s if %s is the port (:%s listens on every address)", addr, addr[:i], addr[i+1:], addr[i+1:], addr[i+1:])
		}
		return fmt.Errorf("%q has no port: an IPv6 address goes in brackets, then the port: [%s]:PORT", addr, addr)
	}
	if strings.Contains(err.Error(), "missing port") {
		return fmt.Errorf("%q has no port: want host:PORT, e.g. %s:4317", addr, strings.Trim(addr, "[]"))
	}
	return fmt.Errorf("%q: want host:PORT: %w", addr, err)
}
