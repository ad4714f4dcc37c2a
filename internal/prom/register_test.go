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

func TestShared(t *testing.T) {
	c := func(help string) prometheus.Counter {
		return prometheus.NewCounter(prometheus.CounterOpts{Name: "x_total", Help: help})
	}
	if got, err := Shared(nil, "nothing", c("x")); err != nil || got == nil {
		t.Errorf("nil registry: %v, %v", got, err)
	}
	reg := prometheus.NewPedanticRegistry()
	first, err := Shared(reg, "first", c("x"))
	if err != nil {
		t.Fatal(err)
	}
	second, err := Shared(reg, "second", c("x"))
	if err != nil || second != first {
		t.Errorf("the same description again: %v (shared %v), want the first collector", err, second == first)
	}
	if _, err := Shared(reg, "third", c("other help")); err == nil || !strings.Contains(err.Error(), "register third metrics") {
		t.Errorf("a clashing description: %v, want an error naming the component", err)
	}
}
