// Command gobusy is a workload for Tandem's end-to-end test: it spins in a
// function with a distinctive name until the given duration has passed.
package main

import (
	"fmt"
	"os"
	"time"
)

//go:noinline
func tandemGoHotLoop(deadline time.Time) uint64 {
	var x uint64 = 1
	for time.Now().Before(deadline) {
		for i := 0; i < 1_000_000; i++ {
			x = x*6364136223846793005 + 1442695040888963407
		}
	}
	return x
}

func main() {
	d := 15 * time.Second
	if len(os.Args) > 1 {
		if v, err := time.ParseDuration(os.Args[1]); err == nil {
			d = v
		}
	}
	fmt.Println(tandemGoHotLoop(time.Now().Add(d)))
}
