package main

import (
	"testing"

	"github.com/tandem-profiler/tandem/test/golden"
	"github.com/tandem-profiler/tandem/tools/reference"
)

// TestReference keeps tandem-encoder's reference pages (docs/reference,
// docs/man) what cobra generates from its flags.
func TestReference(t *testing.T) {
	fs, err := reference.Commands(newRootCommand(), "Tandem")
	if err != nil {
		t.Fatal(err)
	}
	reference.Check(t, "../..", fs, golden.Updating(),
		reference.Owned{Dir: reference.MarkdownDir, Prefix: "tandem-encoder"},
		reference.Owned{Dir: reference.ManDir, Prefix: "tandem-encoder"})
}
