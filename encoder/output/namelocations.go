package output

import (
	"slices"

	"github.com/tandem-profiler/tandem/encoder/aggregate"
)

// NameLocations is the Transform of an output whose format lacks
// Spec.NativeSymbols (the Arrow formats) when the encoder names native
// frames anyway (--symbolize-native=on): such encoders read
// Location.Function, so each native location the symbolizer named gets its
// outermost function (the one its address is in) and line; inlined calls
// are not expressed. It copies the location table once per flush.
func NameLocations(f *aggregate.Flush) (*aggregate.Flush, func(), error) {
	if len(f.NativeLineTable) == 0 {
		return f, nil, nil
	}
	g := *f
	g.Locations = slices.Clone(f.Locations)
	for id := range g.Locations {
		if lines := f.NativeLines(uint32(id)); len(lines) > 0 {
			outer := lines[len(lines)-1]
			g.Locations[id].Function, g.Locations[id].Line = outer.Function, outer.Line
		}
	}
	return &g, nil, nil
}
