package output

import (
	"bytes"
	"errors"
	"fmt"
	"os"
	"regexp"
	"strconv"
	"strings"

	"go.yaml.in/yaml/v3"
)

// LoadConfigFile reads the outputs list of a --config-path file (a YAML
// document whose outputs key lists outputs; other top-level keys belong to
// other readers and are not looked at). It returns nil when the file lists
// none. base gives the defaults of an output of a name and format.
func LoadConfigFile(path string, base func(name, format string) Config) ([]Config, error) {
	b, err := os.ReadFile(path)
	if err != nil {
		return nil, fmt.Errorf("read config file: %w", err)
	}
	cfgs, err := ParseOutputs(b, base)
	if err != nil {
		return nil, fmt.Errorf("config file %s: %w", path, err)
	}
	return cfgs, nil
}

// ErrNotYAML marks a config file the YAML parser cannot read at all. The
// label flags read the same file first and report it (labels.NotYAML).
var ErrNotYAML = errors.New("not valid YAML")

// outputsFile is what ParseOutputs decodes: the outputs, strictly (an
// entry's keys are Config's yaml tags, nothing else), and the other
// readers' keys, which are not looked at.
type outputsFile struct {
	Outputs []Config       `yaml:"outputs"`
	Others  map[string]any `yaml:",inline"`
}

// entryKeys is an outputs entry as written: its node and its keys in
// order, for line numbers and to know which keys were given.
type entryKeys struct {
	node  *yaml.Node
	keys  []*yaml.Node // key nodes; values follow at the same index in node.Content
	name  string
	spec  Spec
	known bool
}

// ParseOutputs parses the outputs key of a YAML document. Every entry needs
// a name and a format (one of Formats) and takes the keys Settings lists
// for that format. The entries are decoded strictly by the YAML library:
// unknown keys, keys of another format, duplicate keys and names, wrong
// types and contradictions are errors naming the line and the fix. Each
// entry starts from base(name, format); the keys it gives replace those
// fields.
func ParseOutputs(data []byte, base func(name, format string) Config) ([]Config, error) {
	var doc yaml.Node
	if err := yaml.Unmarshal(data, &doc); err != nil {
		return nil, fmt.Errorf("%w: %w", ErrNotYAML, err)
	}
	list, err := outputsList(&doc)
	if list == nil || err != nil {
		return nil, err
	}
	entries, errs := readEntries(list)
	var file outputsFile
	dec := yaml.NewDecoder(bytes.NewReader(data))
	dec.KnownFields(true)
	if err := dec.Decode(&file); err != nil {
		errs = append(errs, explainDecodeError(err, entries)...)
	}
	if len(errs) > 0 {
		return nil, errors.Join(errs...)
	}
	var out []Config
	names := map[string]int{}
	for i, e := range entries {
		cfg := base(e.name, e.spec.Name)
		for _, k := range e.keys {
			s, _ := settingByKey(k.Value)
			s.copyTo(&cfg, &file.Outputs[i])
		}
		if prev, ok := names[cfg.Name]; ok {
			errs = append(errs, fmt.Errorf("line %d: output name %q is already used on line %d: give each output its own name", e.node.Line, cfg.Name, prev))
			continue
		}
		names[cfg.Name] = e.node.Line
		if err := cfg.Validate(); err != nil {
			errs = append(errs, fmt.Errorf("line %d: output %q: %w", e.node.Line, cfg.Name, err))
			continue
		}
		out = append(out, cfg)
	}
	if len(errs) > 0 {
		return nil, errors.Join(errs...)
	}
	return out, nil
}

// outputsList returns the outputs list of a document, nil when it has none.
func outputsList(doc *yaml.Node) (*yaml.Node, error) {
	if len(doc.Content) == 0 {
		return nil, nil
	}
	root := doc.Content[0]
	if root.Kind != yaml.MappingNode {
		return nil, fmt.Errorf("line %d: the file must be a mapping", root.Line)
	}
	var list *yaml.Node
	for i := 0; i+1 < len(root.Content); i += 2 {
		if root.Content[i].Value == "outputs" {
			list = root.Content[i+1]
		}
	}
	switch {
	case list == nil:
		return nil, nil
	case list.Kind != yaml.SequenceNode:
		return nil, fmt.Errorf("line %d: outputs must be a list of outputs", list.Line)
	case len(list.Content) == 0:
		return nil, fmt.Errorf("line %d: outputs is empty: list at least one output, or remove the key", list.Line)
	}
	return list, nil
}

// readEntries checks what the decoder cannot: that each entry is a mapping
// with a name and a known format, and takes only keys its format has.
func readEntries(list *yaml.Node) ([]entryKeys, []error) {
	var errs []error
	entries := make([]entryKeys, 0, len(list.Content))
	for _, n := range list.Content {
		if n.Kind != yaml.MappingNode {
			errs = append(errs, fmt.Errorf("line %d: an output must be a mapping with name, format and that format's keys", n.Line))
			entries = append(entries, entryKeys{node: n})
			continue
		}
		e := entryKeys{node: n}
		var format *yaml.Node
		for i := 0; i+1 < len(n.Content); i += 2 {
			k, v := n.Content[i], n.Content[i+1]
			e.keys = append(e.keys, k)
			switch {
			case k.Value == "name" && v.Kind == yaml.ScalarNode:
				e.name = v.Value
			case k.Value == "format" && v.Kind == yaml.ScalarNode:
				format = v
			}
		}
		if e.name == "" {
			errs = append(errs, fmt.Errorf("line %d: an output needs a name", n.Line))
		}
		switch {
		case format == nil || format.Value == "":
			errs = append(errs, fmt.Errorf("line %d: output %q needs a format: %s", n.Line, e.name, FormatNames(nil)))
		default:
			e.spec, e.known = Lookup(format.Value)
			if !e.known {
				errs = append(errs, fmt.Errorf("line %d: output %q: format %q: want %s", format.Line, e.name, format.Value, FormatNames(nil)))
			}
		}
		if e.known {
			for _, k := range e.keys {
				if s, ok := settingByKey(k.Value); ok && !s.AppliesTo(e.spec) {
					errs = append(errs, fmt.Errorf("line %d: key %q does not apply to format %s (its keys: %s)", k.Line, k.Value, e.spec.Name, strings.Join(e.spec.Keys(), ", ")))
				}
			}
		}
		entries = append(entries, e)
	}
	return entries, errs
}

var (
	unknownFieldRE = regexp.MustCompile(`^line (\d+): field (\S+) not found in type`)
	duplicateKeyRE = regexp.MustCompile(`^line (\d+): mapping key "([^"]*)" already defined at line (\d+)`)
	wrongTypeRE    = regexp.MustCompile(`^line (\d+): cannot unmarshal (.*) into (\S+)$`)
)

// explainDecodeError turns the strict decoder's messages into errors that
// name the key, its line and the fix.
func explainDecodeError(err error, entries []entryKeys) []error {
	var te *yaml.TypeError
	if !errors.As(err, &te) {
		return []error{fmt.Errorf("decode outputs: %w", err)}
	}
	var errs []error
	for _, msg := range te.Errors {
		switch m := unknownFieldRE.FindStringSubmatch(msg); {
		case m != nil:
			e := entryAt(entries, m[1])
			keys := "the keys of its format"
			if e != nil && e.known {
				keys = strings.Join(e.spec.Keys(), ", ")
			}
			errs = append(errs, fmt.Errorf("line %s: unknown key %q in an output: use one of %s", m[1], m[2], keys))
			continue
		}
		if m := duplicateKeyRE.FindStringSubmatch(msg); m != nil {
			errs = append(errs, fmt.Errorf("line %s: duplicate key %q (first on line %s): keep one", m[1], m[2], m[3]))
			continue
		}
		if m := wrongTypeRE.FindStringSubmatch(msg); m != nil {
			key := keyAt(entries, m[1])
			errs = append(errs, fmt.Errorf("line %s: %s: cannot read %s: %s", m[1], key, m[2], want(key)))
			continue
		}
		errs = append(errs, errors.New(msg))
	}
	return errs
}

// entryAt returns the entry spanning a line (as the decoder printed it).
func entryAt(entries []entryKeys, line string) *entryKeys {
	n, _ := strconv.Atoi(line)
	var found *entryKeys
	for i := range entries {
		if entries[i].node.Line <= n {
			found = &entries[i]
		}
	}
	return found
}

// keyAt returns the key whose value starts on a line.
func keyAt(entries []entryKeys, line string) string {
	n, _ := strconv.Atoi(line)
	for _, e := range entries {
		for i := 1; i < len(e.node.Content); i += 2 {
			if e.node.Content[i].Line == n {
				return e.node.Content[i-1].Value
			}
		}
	}
	return "value"
}

// want says what a key's value must look like.
func want(key string) string {
	s, ok := settingByKey(key)
	if !ok {
		return "want a value"
	}
	switch s.Type {
	case "duration":
		return "want a duration such as 30s"
	case "bool":
		return "want true or false"
	case "int":
		return "want a whole number"
	case "map":
		return "want a mapping of names to values"
	}
	if len(s.Allowed) > 0 {
		return "want one of " + strings.Join(s.Allowed, ", ")
	}
	return "want a string"
}
