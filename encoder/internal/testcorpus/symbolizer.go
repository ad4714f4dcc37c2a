package testcorpus

import (
	"fmt"

	"github.com/tandem-profiler/tandem/encoder/symbolize"
	"github.com/tandem-profiler/tandem/schema"
)

// Symbolizer is a fake encoder.Symbolizer: it names every address of
// every file (SymbolNames) and counts how often each was asked for.
type Symbolizer struct {
	Calls map[[3]uint64]int // (file id hi, lo, address) -> calls
}

// NewSymbolizer returns a Symbolizer that has been asked nothing.
func NewSymbolizer() *Symbolizer { return &Symbolizer{Calls: map[[3]uint64]int{}} }

// Resolve implements encoder.Symbolizer.
func (s *Symbolizer) Resolve(file schema.FileID, addr uint64, dst []symbolize.Frame) ([]symbolize.Frame, bool) {
	s.Calls[[3]uint64{file.Hi, file.Lo, addr}]++
	names := SymbolNames(addr)
	for i, n := range names {
		fr := symbolize.Frame{Function: n}
		if i < len(names)-1 {
			fr.File, fr.Line = "inl.go", 7
		}
		dst = append(dst, fr)
	}
	return dst, true
}

// SymbolNames is what Symbolizer names addr, innermost first: fn_<hex>,
// after an inlined call inlined_<hex> at even addresses.
func SymbolNames(addr uint64) []string {
	if addr%2 == 0 {
		return []string{fmt.Sprintf("inlined_%x", addr), fmt.Sprintf("fn_%x", addr)}
	}
	return []string{fmt.Sprintf("fn_%x", addr)}
}
