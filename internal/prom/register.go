package prom

import (
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
