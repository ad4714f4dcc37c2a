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
	switch strings.ToLower(format) {
	case "auto", "":
		if tty {
			return slog.New(tint.NewTextHandler(w, &tint.Options{Level: lvl, TimeFormat: time.TimeOnly})), nil
		}
		return slog.New(slog.NewTextHandler(w, &slog.HandlerOptions{Level: lvl})), nil
	case "text":
		return slog.New(slog.NewTextHandler(w, &slog.HandlerOptions{Level: lvl})), nil
	case "json":
		return slog.New(slog.NewJSONHandler(w, &slog.HandlerOptions{Level: lvl})), nil
	default:
		return nil, fmt.Errorf("--log-format=%q: want auto, text or json", format)
	}
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
