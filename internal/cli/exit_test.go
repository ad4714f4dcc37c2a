package cli

import (
	"errors"
	"fmt"
	"testing"
)

func TestStatus(t *testing.T) {
	base := errors.New("boom")
	for _, tt := range []struct {
		name string
		err  error
		want int
	}{
		{"nil", nil, ExitOK},
		{"plain", base, ExitFailure},
		{"usage", Usage(base), ExitUsage},
		{"wrapped usage", fmt.Errorf("serve: %w", Usage(base)), ExitUsage},
		{"exit code", ExitError{Code: 3, Err: base}, 3},
		{"wrapped exit code", fmt.Errorf("replay: %w", ExitError{Code: 3, Err: base}), 3},
	} {
		t.Run(tt.name, func(t *testing.T) {
			if got := Status(tt.err); got != tt.want {
				t.Errorf("Status(%v) = %d, want %d", tt.err, got, tt.want)
			}
			if tt.err != nil && !errors.Is(tt.err, base) {
				t.Errorf("%v does not unwrap to its cause", tt.err)
			}
		})
	}
	if Usage(nil) != nil {
		t.Error("Usage(nil) is not nil")
	}
}
