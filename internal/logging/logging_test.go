package logging

import (
	"bytes"
	"context"
	"log/slog"
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
	if _, ok := Tee(base, nil).Handler().(*slog.TextHandler); !ok {
		t.Fatalf("handler %T, want the local *slog.TextHandler alone", Tee(base, nil).Handler())
	}
}
