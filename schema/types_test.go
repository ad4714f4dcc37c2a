package schema

import (
	"fmt"
	"testing"
)

// TestFileIDHex: profiles (htlhash, Arrow build ids) and symbol uploads
// name an executable without a GNU build id by FileID.Hex, so it must be
// exactly the 32-digit, high-word-first form parca-agent uses.
func TestFileIDHex(t *testing.T) {
	for _, id := range []FileID{{}, {Hi: 1}, {Lo: 1}, {Hi: 0x0123456789abcdef, Lo: 0xfedcba9876543210}, {Hi: ^uint64(0), Lo: ^uint64(0)}} {
		if got, want := id.Hex(), fmt.Sprintf("%016x%016x", id.Hi, id.Lo); got != want {
			t.Errorf("%+v.Hex() = %s, want %s", id, got, want)
		}
	}
}
