// Package waittest is a test aid, the one poll loop of the tests: For
// waits for a condition that the code under test makes true on its own
// goroutines (an informer's cache, an output's worker, a blocked opener),
// polling it; a Poll sets the bound and the interval and watches what must
// stay up meanwhile (a child process, a container), failing as soon as it
// is gone rather than running out the bound. The bound only keeps a broken
// test from hanging. It is imported only by tests.
package waittest
