package prom

import (
	"errors"
	"fmt"

	"github.com/prometheus/client_golang/prometheus"
)

// Register registers cs with reg in order. A nil reg registers nothing.
// The first collector reg refuses (a duplicate name, for one) stops it, with
// an error naming what (the component) and the cause.
func Register(reg prometheus.Registerer, what string, cs ...prometheus.Collector) error {
	if reg == nil {
		return nil
	}
	for _, c := range cs {
		if err := reg.Register(c); err != nil {
			return fmt.Errorf("register %s metrics: %w", what, err)
		}
	}
	return nil
}

// Shared registers c with reg, or returns the collector of the same
// description reg already holds (another instance of the component
// registered it), so that instances on one registry count into the same
// series. A nil reg registers nothing and returns c. Any other refusal is
// an error naming what (the component) and the cause.
func Shared[T prometheus.Collector](reg prometheus.Registerer, what string, c T) (T, error) {
	if reg == nil {
		return c, nil
	}
	err := reg.Register(c)
	if err == nil {
		return c, nil
	}
	var are prometheus.AlreadyRegisteredError
	if errors.As(err, &are) {
		if existing, ok := are.ExistingCollector.(T); ok {
			return existing, nil
		}
	}
	return c, fmt.Errorf("register %s metrics: %w", what, err)
}
