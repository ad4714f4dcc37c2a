package export_test

import (
	"testing"

	"github.com/tandem-profiler/tandem/encoder/export"
)

// TestPartialBounds: a partial success says how many profiles were
// rejected, not which, so the samples it lost are known exactly only when
// it rejected none or all; otherwise between the smallest and the largest
// profiles' share, the difference counted unconfirmed.
func TestPartialBounds(t *testing.T) {
	tests := []struct {
		name     string
		profiles []int
		rejected int64
		want     export.Outcome
	}{
		{"none", []int{5, 10, 20}, 0, export.Outcome{}},
		{"all", []int{5, 10, 20}, 3, export.Outcome{Rejected: 35}},
		{"more than sent", []int{5, 10, 20}, 7, export.Outcome{Rejected: 35}},
		{"one of three", []int{5, 10, 20}, 1, export.Outcome{Rejected: 5, Unconfirmed: 15}},
		{"two of three", []int{20, 5, 10}, 2, export.Outcome{Rejected: 15, Unconfirmed: 15}},
		{"equal sizes are exact", []int{7, 7, 7}, 2, export.Outcome{Rejected: 14}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			got := export.PartialOutcome(tt.profiles, tt.rejected, "refused")
			if got.Rejected != tt.want.Rejected || got.Unconfirmed != tt.want.Unconfirmed {
				t.Errorf("PartialOutcome = %+v, want rejected %d, unconfirmed %d", got, tt.want.Rejected, tt.want.Unconfirmed)
			}
			if (tt.rejected > 0) != (got.Err != nil) {
				t.Errorf("err = %v", got.Err)
			}
		})
	}
}
