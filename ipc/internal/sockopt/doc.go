// Package sockopt reads the Unix-socket options that both ends of Tandem's
// socket check (SO_PEERCRED, SO_TYPE, SO_ACCEPTCONN), so that the
// sampler's client and the encoder's server, in separate packages, share
// one implementation. Linux only.
package sockopt
