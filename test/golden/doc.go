// Package golden is a test aid: Check compares what a test produced with a
// checked-in file and, when the test binary runs with -update (go test
// ./pkg -run TestX -args -update), writes the file first. It is imported
// only by tests.
package golden
