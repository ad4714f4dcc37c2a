package sampler

import (
	"bytes"
	"encoding/json"
	"fmt"
	"log/slog"
	"testing"

	"github.com/tandem-profiler/tandem/internal/counters"
)

// TestUpstreamHandler: the known-benign upstream messages are logged at
// DEBUG (dropped when DEBUG is off) and counted per entry of the table;
// every other message keeps its level and counts nothing.
func TestUpstreamHandler(t *testing.T) {
	const unloadGone = "Failed to unload interpreter for PID 4242: failed to detach pythonInstance from PID 4242: failed to remove info: key does not exist"
	for _, tc := range []struct {
		name      string
		level     slog.Level // of the upstream message
		msg       string
		benign    string     // the table entry it matches, "" for none
		wantLevel slog.Level // what a DEBUG-level logger writes
	}{
		{"unload, process gone", slog.LevelError, unloadGone, "unload_interpreter_gone", slog.LevelDebug},
		{"unload, other error", slog.LevelError, "Failed to unload interpreter for PID 4242: failed to detach pythonInstance from PID 4242: failed to remove info: operation not permitted", "", slog.LevelError},
		{"key missing elsewhere", slog.LevelError, "Failed to update pid page: key does not exist", "", slog.LevelError},
		{"unload message inside another", slog.LevelError, "Retrying: " + unloadGone, "", slog.LevelError},
		{"warning", slog.LevelWarn, "Failed to get kernel symbols", "", slog.LevelWarn},
	} {
		t.Run(tc.name, func(t *testing.T) {
			for _, loggerLevel := range []slog.Level{slog.LevelDebug, slog.LevelInfo} {
				var buf bytes.Buffer
				set := new(counters.Set)
				counts, err := registerBenignUpstreamLogs(set)
				if err != nil {
					t.Fatal(err)
				}
				inner := slog.NewJSONHandler(&buf, &slog.HandlerOptions{Level: loggerLevel})
				logger := slog.New(newUpstreamHandler(inner, counts)).With("component", "tracer")
				// As the upstream logger does: the level is checked first.
				logger.Log(t.Context(), tc.level, tc.msg)

				for i, b := range benignUpstreamLogs {
					want := uint64(0)
					if b.name == tc.benign {
						want = 1
					}
					if got := counts[i].Load(); got != want {
						t.Errorf("logger at %v: counter %s = %d, want %d", loggerLevel, b.name, got, want)
					}
				}
				wantLevel := tc.wantLevel
				if wantLevel < loggerLevel {
					if buf.Len() != 0 {
						t.Errorf("logger at %v wrote %s, want nothing", loggerLevel, buf.String())
					}
					continue
				}
				var rec map[string]any
				if err := json.Unmarshal(buf.Bytes(), &rec); err != nil {
					t.Fatalf("logger at %v wrote %q: %v", loggerLevel, buf.String(), err)
				}
				if rec["level"] != wantLevel.String() || rec["msg"] != tc.msg || rec["component"] != "tracer" {
					t.Errorf("logger at %v wrote %v, want level %v, the message and its attributes", loggerLevel, rec, wantLevel)
				}
				if tc.benign != "" && rec["benign"] != tc.benign {
					t.Errorf("logger at %v wrote %v, want benign=%s", loggerLevel, rec, tc.benign)
				}
			}
		})
	}
}

// TestBenignUpstreamLogsTable: each entry has a unique name and says why
// its message is harmless.
func TestBenignUpstreamLogsTable(t *testing.T) {
	seen := map[string]bool{}
	for _, b := range benignUpstreamLogs {
		if seen[b.name] || b.name == "" || b.why == "" {
			t.Errorf("entry %q: names must be unique and non-empty, and say why: %s", b.name, fmt.Sprint(b))
		}
		seen[b.name] = true
	}
}
