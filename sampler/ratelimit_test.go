package sampler

import (
	"testing"
	"time"
)

type fakeClock struct{ t time.Time }

func (c *fakeClock) now() time.Time          { return c.t }
func (c *fakeClock) advance(d time.Duration) { c.t = c.t.Add(d) }

func TestAdmissionRateAndTotal(t *testing.T) {
	clk := &fakeClock{t: time.Unix(1000, 0)}
	a := newAdmission(10, 5, 12, clk.now) // 10/s, burst 5, 12 in total
	count := func(n int) (ok, rate, total int) {
		for range n {
			switch a.take() {
			case admitted:
				ok++
			case rejectedRate:
				rate++
			case rejectedTotal:
				total++
			}
		}
		return
	}
	if ok, rate, _ := count(8); ok != 5 || rate != 3 {
		t.Fatalf("burst: %d admitted, %d rate-limited; want 5, 3", ok, rate)
	}
	clk.advance(200 * time.Millisecond) // two tokens
	if ok, rate, _ := count(3); ok != 2 || rate != 1 {
		t.Fatalf("after 200ms: %d admitted, %d rate-limited; want 2, 1", ok, rate)
	}
	clk.advance(time.Hour) // refill to the burst, not beyond
	if ok, rate, total := count(10); ok != 5 || rate != 0 || total != 5 {
		t.Fatalf("after an hour: %d admitted, %d rate, %d total-limited; want 5, 0, 5 (12 in total)", ok, rate, total)
	}
	clk.advance(time.Hour)
	if ok, _, total := count(3); ok != 0 || total != 3 {
		t.Fatalf("past the total: %d admitted, %d total-limited; want 0, 3", ok, total)
	}
}

func TestAdmissionZeroTotalAdmitsNothing(t *testing.T) {
	a := newAdmission(100, 100, 0, time.Now)
	if r := a.take(); r != rejectedTotal {
		t.Errorf("take = %v, want rejectedTotal", r)
	}
}
