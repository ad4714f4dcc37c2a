package cli

import (
	"strings"
	"testing"
)

func TestCheckHostPort(t *testing.T) {
	for _, tt := range []struct{ addr, want string }{
		{"collector:4317", ""},
		{":7071", ""},
		{"[fd00::1]:7071", ""},
		{"127.0.0.1:0", ""},
		{"collector", `"collector" has no port: want host:PORT, e.g. collector:4317`},
		{"collector:", `"collector:" has no port`},
		{"fd00::1:7071", `an IPv6 address goes in brackets, then the port: [fd00::1]:7071 if 7071 is the port (:7071 listens on every address)`},
		{"fd00::1", `an IPv6 address goes in brackets, then the port: [fd00::1]:PORT`},
		{"[fd00::1]", `"[fd00::1]" has no port: want host:PORT, e.g. fd00::1:4317`},
	} {
		err := CheckHostPort(tt.addr)
		switch {
		case tt.want == "" && err != nil:
			t.Errorf("CheckHostPort(%q) = %v, want nil", tt.addr, err)
		case tt.want != "" && (err == nil || !strings.Contains(err.Error(), tt.want)):
			t.Errorf("CheckHostPort(%q) = %v, want it to contain %q", tt.addr, err, tt.want)
		}
	}
}
