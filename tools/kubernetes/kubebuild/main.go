// Command kubebuild builds the Kubernetes binaries the cluster test runs
// into the cache (tools/kubernetes), unless a complete build is there,
// and prints their directory. make tools runs it.
package main

import (
	"context"
	"flag"
	"fmt"
	"os"
	"os/signal"
	"syscall"

	"github.com/tandem-profiler/tandem/tools/kubernetes"
)

func main() {
	cacheRoot := flag.String("cache", kubernetes.DefaultCacheRoot, "directory holding one build per Kubernetes version")
	flag.Parse()
	ctx, stop := signal.NotifyContext(context.Background(), os.Interrupt, syscall.SIGTERM)
	defer stop()
	bin, err := kubernetes.Build(ctx, kubernetes.Config{CacheRoot: *cacheRoot, Log: os.Stderr})
	if err != nil {
		fmt.Fprintln(os.Stderr, "kubebuild:", err)
		os.Exit(1)
	}
	fmt.Println(bin)
}
