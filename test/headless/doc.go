// Package headless renders web pages in a real headless Chromium for
// tests (Debian's chromium package; `make test` installs it when missing):
// it loads a page with the launch flags that work on a build machine (no
// sandbox, no GPU, no QUIC, no background networking, a fresh profile
// directory), lets its scripts run and returns the resulting DOM. Without
// chromium the test skips, or fails under CI=true (test/privtest).
// Imported only by tests.
package headless
