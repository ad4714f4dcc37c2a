// Command mkimage writes Tandem's container image as an OCI archive (make
// image runs it): the two static binaries from build-static.sh, labelled
// with the version, the commit and the commit's time.
package main
