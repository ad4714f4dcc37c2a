// Package cli holds what Tandem's two commands share about their command
// lines: which errors are the user's (exit status 2) and which carry an exit
// status of their own, and how an error becomes the process's exit status.
package cli
