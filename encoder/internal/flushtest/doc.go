// Package flushtest runs a testcorpus stream through an encoder.Aggregator
// and flushes it, the first step of every encoder output's corpus test. It
// is imported only by _test.go files of packages outside encoder (encoder's
// own tests cannot import it: it imports encoder).
package flushtest
