// Package confine holds Tandem's one list of system-call rules and puts
// it to work: in-process, on every thread of the sampler and the encoder
// (capabilities dropped, no_new_privs, a seccomp filter, Landlock), and as
// the files the runtime applies before either starts (an OCI seccomp
// profile for the pod, SystemCallFilter= for the systemd units).
//
// A rule names system calls, optionally an argument condition, and for
// each role when it applies: after start-up only (in-process, once the
// tracer samples or the encoder listens: start-up still needs the call, or
// the runtime needs it to start the binary), or always (in-process and in
// the runtime's profile). Denied calls fail with EPERM: a Go program
// handles an error where a killed thread would take the process with it,
// and every path that reaches a denied call is one an attacker, not
// Tandem, takes.
//
// The filter is a deny-list: the Go runtime and the tracer need a long and
// changing list of calls, and an allow-list that misses one fails in
// production on a path no test took. A second, tiny filter denies every
// call made through another architecture's entry (the 32-bit int 0x80 one
// on x86-64), which a deny-list keyed on native numbers would miss.
//
// Install changes the whole process and cannot be undone; it is for
// main packages and child processes in tests.
package confine
