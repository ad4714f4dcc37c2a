//go:build !linux

package ipcserver

import (
	"fmt"
	"os"
)

func runHelper(mode string) int {
	fmt.Fprintf(os.Stderr, "helper mode %q needs Linux\n", mode)
	return 2
}
