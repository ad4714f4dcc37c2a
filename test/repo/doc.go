// Package repo holds repository-wide checks: every package documents
// itself, each binary keeps to its dependency budget, product code never
// imports test/ or tools/, internal/ holds product helpers only, and the
// build flags are written once (the Makefile's build-env). It has no code
// of its own, only tests.
package repo
