package repo

import (
	"os"
	"path/filepath"
	"regexp"
	"strings"
	"testing"

	"github.com/tandem-profiler/tandem/encoder/output"
	"github.com/tandem-profiler/tandem/tools/reference"

	"github.com/tandem-profiler/tandem/test/harness"
)

// TestReferenceChartValues keeps docs/reference/helm-values.md what the
// chart's values.yaml and values.schema.json say.
func TestReferenceChartValues(t *testing.T) {
	root := harness.ModuleRoot(t)
	const chart = "deploy/helm/tandem"
	values, err := os.ReadFile(filepath.Join(root, chart, "values.yaml"))
	if err != nil {
		t.Fatal(err)
	}
	schema, err := os.ReadFile(filepath.Join(root, chart, "values.schema.json"))
	if err != nil {
		t.Fatal(err)
	}
	fs, err := reference.Values(chart, values, schema)
	if err != nil {
		t.Fatal(err)
	}
	reference.Check(t, root, fs, *update)
}

// TestReferenceOutputs keeps docs/reference/outputs.md what
// encoder/output's settings table says: every setting of an output, its
// key in an outputs entry, its flag, the formats that take it, its type,
// allowed values and default.
func TestReferenceOutputs(t *testing.T) {
	code := func(s string) string {
		if s == "" {
			return ""
		}
		return "`" + s + "`"
	}
	var rows [][]string
	for _, s := range output.Settings() {
		flag := ""
		if s.Flag != "" {
			flag = code("--" + s.Flag)
			if s.EveryOutput {
				flag += " (every output's default)"
			}
		}
		formats := "every"
		switch s.Transport {
		case output.TransportGRPC:
			formats = "remote (`otlp`, `arrow-v2`, `arrow-v1`)"
		case output.TransportFile:
			formats = "`pprof`"
		}
		var allowed []string
		for _, a := range s.Allowed {
			allowed = append(allowed, code(a))
		}
		rows = append(rows, []string{code(s.Key), flag, formats, s.Type, strings.Join(allowed, ", "), code(s.Default), s.Help})
	}
	fs := reference.Table("docs/reference/outputs.md", "Output settings", `Generated from
encoder/output's settings table (the tags of `+"`output.Config`"+`, which the flags and
the outputs file are read from too): do not edit, run `+"`make reference`"+`. A setting
with a key goes in an entry of the `+"`outputs:`"+` list of `+"`--config-path`"+`; one with a
flag and no key is set for every output by its flag; a flag without "every
output's default" describes only the single output the flags define, and
giving it beside an outputs list is an error. How outputs fit together:
[configuration.md](../configuration.md#the-encoders-outputs).`,
		[]string{"Key", "Flag", "Formats", "Type", "Allowed", "Default", "Meaning"}, rows)
	reference.Check(t, harness.ModuleRoot(t), fs, *update)
}

// TestNoHandWrittenFlagTables fails when a hand-written page (the README,
// docs/*.md) has a table row for one of Tandem's flags: the flags, their
// defaults and help are the generated reference's (docs/reference), which
// a page links to instead of copying it. docs/parca-protocols.md is left
// out: its tables are parca-agent's flags.
func TestNoHandWrittenFlagTables(t *testing.T) {
	root := harness.ModuleRoot(t)
	flags := map[string]bool{}
	option := regexp.MustCompile(`^\s+(?:-[a-zA-Z], )?--([a-z0-9][a-z0-9-]*)`)
	pages, err := filepath.Glob(filepath.Join(root, "docs", "reference", "tandem-*.md"))
	if err != nil || len(pages) == 0 {
		t.Fatalf("no command pages in docs/reference (%v): run make reference", err)
	}
	for _, p := range pages {
		b, err := os.ReadFile(p)
		if err != nil {
			t.Fatal(err)
		}
		for _, l := range strings.Split(string(b), "\n") {
			if m := option.FindStringSubmatch(l); m != nil && m[1] != "help" {
				flags[m[1]] = true
			}
		}
	}
	docs, err := filepath.Glob(filepath.Join(root, "docs", "*.md"))
	if err != nil {
		t.Fatal(err)
	}
	row := regexp.MustCompile("^\\|\\s*`--([a-z0-9][a-z0-9-]*)")
	for _, p := range append(docs, filepath.Join(root, "README.md")) {
		if filepath.Base(p) == "parca-protocols.md" {
			continue
		}
		b, err := os.ReadFile(p)
		if err != nil {
			t.Fatal(err)
		}
		for i, l := range strings.Split(string(b), "\n") {
			if m := row.FindStringSubmatch(l); m != nil && flags[m[1]] {
				rel, _ := filepath.Rel(root, p)
				t.Errorf("%s:%d is a table row for --%s: the flags' reference is generated (docs/reference); link to it instead", rel, i+1, m[1])
			}
		}
	}
}

// TestReadmeIsAFrontDoor keeps the README a front door: what Tandem is,
// the picture, the two commands, how to install, and links. Everything
// else goes in a topic page under docs/ (or the generated reference).
func TestReadmeIsAFrontDoor(t *testing.T) {
	const maxLines = 200
	b, err := os.ReadFile(filepath.Join(harness.ModuleRoot(t), "README.md"))
	if err != nil {
		t.Fatal(err)
	}
	if n := strings.Count(string(b), "\n"); n > maxLines {
		t.Errorf("README.md has %d lines, more than %d: move the detail to a page under docs/ and link to it", n, maxLines)
	}
}
