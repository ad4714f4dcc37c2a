// Package registrytest runs an OCI registry inside the test's process on
// a loopback port (go-containerregistry's pkg/registry, in memory, plain
// HTTP) and publishes Tandem's release to it: the image and the Helm
// chart, as a user pushing to their own registry would. Tests then pull
// the chart from oci://127.0.0.1:PORT/... and the image by its digest.
//
// Start serves an empty registry; BuildRelease runs make release's build
// into a test directory; Push publishes a release directory;
// ServeRelease does all three. The registry stops when the test ends.
// Imported only by tests.
package registrytest
