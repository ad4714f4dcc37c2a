// Package kubernetes builds and caches the Kubernetes binaries a
// single-node cluster on this machine runs (for the cluster test, not yet
// in the tree): kube-apiserver, kube-controller-manager, kube-scheduler,
// kubelet, kube-proxy and kubectl at the version in version.txt, built from the Go module proxy
// (Kubernetes publishes no binaries there), and the pause binary every
// pod's sandbox runs, compiled from the pause.c in the same module.
//
// A build goes into <CacheRoot>/<version>/ (outside the repository, so
// that clean checkouts and worktrees share it) and is reused whenever
// that directory holds a complete build: the first build compiles about
// 5 GB of Go build cache and takes minutes; a later one is a lookup.
// Build is safe to call from several processes: the cache directory is
// locked while it is filled.
//
// Imported only by tests and repository tooling.
package kubernetes
