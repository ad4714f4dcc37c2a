// Package waittest is a test aid: For waits for a condition that the code
// under test makes true on its own goroutines (an informer's cache, an
// output's worker, a blocked opener), polling it. The bound only keeps a
// broken test from hanging; tests that wait on a child process use the
// process-watching waits of test/e2e instead, which fail as soon as
// the process exits. It is imported only by tests.
package waittest
