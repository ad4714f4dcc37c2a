// Package sdnotifytest plays the service manager's end of sd_notify(3) for
// tests: a datagram socket to pass as NOTIFY_SOCKET, the messages it
// received, and a wait for READY=1 that fails as soon as the process
// under test has exited. Tests wait on this signal, not on log text.
package sdnotifytest
