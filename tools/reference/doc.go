// Package reference generates Tandem's reference pages from the code that
// defines what they describe, so that they cannot drift from it: every
// command's flags (Markdown for docs/reference/ and man pages for docs/man/,
// both written by cobra's own generator, github.com/spf13/cobra/doc), the
// Helm chart's values (from values.schema.json and the comments of
// values.yaml) and the metrics (from the Prometheus registry a process
// builds). The pages are checked in; the tests that call this package
// (cmd/sampler, cmd/encoder and test/repo TestReference*) fail when a
// page differs from what the code generates, and rewrite them when run
// with -update, which `make reference` does.
//
// Every function here is pure: it returns the pages as Files and writes
// nothing, so the same output is produced on every machine (values that
// depend on the machine, such as a default of the host name, are replaced
// by a placeholder).
package reference
