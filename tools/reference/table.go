package reference

import (
	"bytes"
	"fmt"
	"strings"
)

// Table returns a reference page at path: a title, what it covers, and a
// table of rows under header, for references read from a table the code
// already holds (such as encoder/output's Settings).
func Table(path, title, intro string, header []string, rows [][]string) Files {
	var b bytes.Buffer
	fmt.Fprintf(&b, "# %s\n\n%s\n\n", title, strings.TrimSpace(intro))
	fmt.Fprintf(&b, "| %s |\n|%s\n", strings.Join(header, " | "), strings.Repeat("---|", len(header)))
	for _, r := range rows {
		cells := make([]string, len(r))
		for i, c := range r {
			cells[i] = cell(c)
		}
		fmt.Fprintf(&b, "| %s |\n", strings.Join(cells, " | "))
	}
	return Files{path: b.Bytes()}
}
