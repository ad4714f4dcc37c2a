package prom

import (
	"strings"
	"testing"

	"github.com/prometheus/client_golang/prometheus"
)

func TestRegister(t *testing.T) {
	c := func() prometheus.Counter {
		return prometheus.NewCounter(prometheus.CounterOpts{Name: "x_total", Help: "x"})
	}
	if err := Register(nil, "nothing", c()); err != nil {
		t.Errorf("nil registry: %v", err)
	}
	reg := prometheus.NewPedanticRegistry()
	if err := Register(reg, "first", c()); err != nil {
		t.Fatal(err)
	}
	err := Register(reg, "second", c())
	if err == nil || !strings.Contains(err.Error(), "register second metrics") {
		t.Errorf("a duplicate: %v, want an error naming the component", err)
	}
	if mfs, _ := reg.Gather(); len(mfs) != 1 {
		t.Errorf("%d families registered, want 1", len(mfs))
	}
}
