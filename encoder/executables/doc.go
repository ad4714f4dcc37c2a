// Package executables routes the executables samplers pass over (an
// ExecutableNotice, with the file's descriptor when the sampler could open
// it): a duplicate of each descriptor to the symbolizer when the encoder
// names native frames, the descriptor itself to the symbol uploader when
// upload is on, and otherwise the descriptor closed at once. A notice
// without a descriptor (every notice of a dump) is counted, and its
// executable opened again by path for the symbolizer where the file on
// this machine is still the one recorded. serve, replay and view route
// through one Router.
package executables
