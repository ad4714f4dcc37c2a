// Package repotest holds repository-wide checks: every package documents
// itself, and each binary keeps to its dependency budget. It has no code of
// its own, only tests.
package repo
