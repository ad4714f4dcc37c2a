// Package proctest holds what tests keep of a process under test (a child
// process, or a command's execute function run on a goroutine): its output,
// written by the process and read by the test at once, and the last lines
// of it that a failure report shows. Imported only by tests.
package proctest
