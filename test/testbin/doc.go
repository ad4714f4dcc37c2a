// Package testbin builds the small native programs that tests profile,
// strip or symbolize, from source held in the test: C with the system's
// gcc (Debian's gcc package; `make test` installs it when missing). Where
// gcc is missing the test skips, or fails under CI=true
// (test/privtest). Imported only by tests.
package testbin
