package logging

import (
	"bytes"
	"context"
	"log/slog"
	"strings"
	"testing"
)

// recorder keeps the records it is handed.
type recorder struct {
	records *[]slog.Record
	attrs   []slog.Attr
}

func (r recorder) Enabled(context.Context, slog.Level) bool { return true }

func (r recorder) Handle(_ context.Context, rec slog.Record) error {
	rec = rec.Clone()
	rec.AddAttrs(r.attrs...)
	*r.records = append(*r.records, rec)
	return nil
}

func (r recorder) WithAttrs(attrs []slog.Attr) slog.Handler {
	return recorder{records: r.records, attrs: append(append([]slog.Attr(nil), r.attrs...), attrs...)}
}

func (r recorder) WithGroup(string) slog.Handler { return r }

func TestTeeFollowsBaseLevel(t *testing.T) {
	for _, level := range []string{"debug", "info", "warn", "error"} {
		t.Run(level, func(t *testing.T) {
			var local bytes.Buffer
			base, err := New(&local, level, "json")
			if err != nil {
				t.Fatal(err)
			}
			var got []slog.Record
			logger := Tee(base, recorder{records: &got}).With("component", "x")
			ctx := context.Background()
			want := 0
			for _, l := range []slog.Level{slog.LevelDebug, slog.LevelInfo, slog.LevelWarn, slog.LevelError} {
				if base.Enabled(ctx, l) {
					want++
				}
				logger.Log(ctx, l, "m")
			}
			if len(got) != want {
				t.Fatalf("tee got %d records at --log-level=%s, want %d (the ones the local handler takes)", len(got), level, want)
			}
			if n := bytes.Count(local.Bytes(), []byte("\n")); n != want {
				t.Fatalf("local handler wrote %d lines, want %d", n, want)
			}
			for _, r := range got {
				found := false
				r.Attrs(func(a slog.Attr) bool {
					found = found || a.Key == "component" && a.Value.String() == "x"
					return true
				})
				if !found {
					t.Fatal("the tee lost an attribute added with With")
				}
			}
		})
	}
}

func TestTeeNilIsBase(t *testing.T) {
	base, err := New(&bytes.Buffer{}, "info", "text")
	if err != nil {
		t.Fatal(err)
	}
	if got := Tee(base, nil); got != base {
		t.Fatal("Tee with no second handler wrapped the logger")
	}
	if u, ok := Tee(base, nil).Handler().(*uniqueKeys); !ok {
		t.Fatalf("handler %T, want New's one-attribute-per-key handler alone", Tee(base, nil).Handler())
	} else if _, ok := u.inner.(*slog.TextHandler); !ok {
		t.Fatalf("inner handler %T, want the local *slog.TextHandler", u.inner)
	}
}

// TestOneAttributePerKey: a key given again, by With or by the record,
// appears once on the line, with the latest value; the tee's second
// handler gets the same.
func TestOneAttributePerKey(t *testing.T) {
	for _, format := range []string{"text", "json"} {
		var local bytes.Buffer
		base, err := New(&local, "info", format)
		if err != nil {
			t.Fatal(err)
		}
		var got []slog.Record
		logger := Tee(base, recorder{records: &got}).With("component", "ipc").With("component", "ipc.server", "output", "default")
		logger.Info("m", "output", "default", "samples", 1)
		line := local.String()
		for _, key := range []string{"component", "output", "samples"} {
			if n := strings.Count(line, key); n != 1 {
				t.Errorf("%s: %q appears %d times in %q, want once", format, key, n, line)
			}
		}
		if !strings.Contains(line, "ipc.server") {
			t.Errorf("%s: %q lost the latest component", format, line)
		}
		keys := map[string]int{}
		got[0].Attrs(func(a slog.Attr) bool { keys[a.Key]++; return true })
		if keys["component"] != 1 || keys["output"] != 1 || keys["samples"] != 1 {
			t.Errorf("%s: the tee got keys %v, want each once", format, keys)
		}
	}
}
