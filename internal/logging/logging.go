// Package logging builds the process logger both binaries use: log/slog,
// colored with tint on a terminal, text or JSON otherwise, and Tee, which
// hands the same records to a second handler (the encoder's --otlp-logging).
package logging

import (
	"context"
	"fmt"
	"io"
	"log/slog"
	"os"
	"slices"
	"strings"
	"time"

	"github.com/lmittmann/tint"
	"golang.org/x/term"
)

// New builds the process logger: colored (tint) on a terminal, JSON
// or logfmt-style text otherwise (--log-format).
func New(w io.Writer, level, format string) (*slog.Logger, error) {
	var lvl slog.Level
	switch strings.ToLower(level) {
	case "debug":
		lvl = slog.LevelDebug
	case "info", "":
		lvl = slog.LevelInfo
	case "warn", "warning":
		lvl = slog.LevelWarn
	case "error":
		lvl = slog.LevelError
	default:
		return nil, fmt.Errorf("--log-level=%q: want debug, info, warn or error", level)
	}
	tty := false
	if f, ok := w.(*os.File); ok {
		tty = term.IsTerminal(int(f.Fd()))
	}
	var h slog.Handler
	switch strings.ToLower(format) {
	case "auto", "":
		if tty {
			h = tint.NewTextHandler(w, &tint.Options{Level: lvl, TimeFormat: time.TimeOnly})
		} else {
			h = slog.NewTextHandler(w, &slog.HandlerOptions{Level: lvl})
		}
	case "text":
		h = slog.NewTextHandler(w, &slog.HandlerOptions{Level: lvl})
	case "json":
		h = slog.NewJSONHandler(w, &slog.HandlerOptions{Level: lvl})
	default:
		return nil, fmt.Errorf("--log-format=%q: want auto, text or json", format)
	}
	return slog.New(&uniqueKeys{inner: h}), nil
}

// uniqueKeys keeps one attribute per key on a line: a logger's With
// replaces a key it already has (component=ipc, then component=ipc.server:
// the latter), and a record's own attribute replaces the logger's (a
// pipeline's output=NAME logged through an output's logger that has it).
// slog's handlers would print both.
type uniqueKeys struct {
	inner slog.Handler
	attrs []slog.Attr // the loggers' With attributes, one per key
}

func (h *uniqueKeys) Enabled(ctx context.Context, l slog.Level) bool { return h.inner.Enabled(ctx, l) }

func (h *uniqueKeys) WithAttrs(as []slog.Attr) slog.Handler {
	merged := slices.Clone(h.attrs)
	for _, a := range as {
		if i := slices.IndexFunc(merged, func(b slog.Attr) bool { return b.Key == a.Key }); i >= 0 {
			merged[i] = a
			continue
		}
		merged = append(merged, a)
	}
	return &uniqueKeys{inner: h.inner, attrs: merged}
}

// WithGroup hands the attributes so far to the inner handler: keys inside
// a group do not clash with those outside it.
func (h *uniqueKeys) WithGroup(name string) slog.Handler {
	if name == "" {
		return h
	}
	return &uniqueKeys{inner: h.inner.WithAttrs(h.attrs).WithGroup(name)}
}

func (h *uniqueKeys) Handle(ctx context.Context, r slog.Record) error {
	if len(h.attrs) == 0 {
		return h.inner.Handle(ctx, r)
	}
	out := slog.NewRecord(r.Time, r.Level, r.Message, r.PC)
	for _, a := range h.attrs {
		shadowed := false
		r.Attrs(func(b slog.Attr) bool {
			shadowed = b.Key == a.Key
			return !shadowed
		})
		if !shadowed {
			out.AddAttrs(a)
		}
	}
	r.Attrs(func(a slog.Attr) bool {
		out.AddAttrs(a)
		return true
	})
	return h.inner.Handle(ctx, out)
}

// Tee returns a logger that writes every record base writes to base's
// handler and also hands it to also. also sees exactly the records base's
// handler is enabled for, so one --log-level governs both. With a nil also
// Tee returns base itself: nothing is wrapped.
func Tee(base *slog.Logger, also slog.Handler) *slog.Logger {
	if also == nil {
		return base
	}
	bh := base.Handler()
	if u, ok := bh.(*uniqueKeys); ok {
		// Both handlers get the one-per-key attributes.
		return slog.New(&uniqueKeys{inner: slog.NewMultiHandler(u.inner, gated{Handler: also, by: u.inner}), attrs: u.attrs})
	}
	return slog.New(slog.NewMultiHandler(bh, gated{Handler: also, by: bh}))
}

// gated is enabled for a level only where both its handler and by are.
type gated struct {
	slog.Handler
	by slog.Handler
}

func (g gated) Enabled(ctx context.Context, l slog.Level) bool {
	return g.by.Enabled(ctx, l) && g.Handler.Enabled(ctx, l)
}

func (g gated) WithAttrs(attrs []slog.Attr) slog.Handler {
	return gated{Handler: g.Handler.WithAttrs(attrs), by: g.by}
}

func (g gated) WithGroup(name string) slog.Handler {
	return gated{Handler: g.Handler.WithGroup(name), by: g.by}
}
