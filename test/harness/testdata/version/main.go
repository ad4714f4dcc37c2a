// Command version prints the version the build stamped into it, for
// test/harness's build test.
package main

import (
	"fmt"

	"github.com/tandem-profiler/tandem/internal/buildinfo"
)

func main() { fmt.Println(buildinfo.Version) }
