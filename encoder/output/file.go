package output

import (
	"errors"
	"fmt"
	"os"
	"slices"
	"strings"
	"time"

	"go.yaml.in/yaml/v3"
)

// CommonKeys are the keys of every outputs entry; a format's own are its
// Spec.Keys. They are named after the flags that set the same thing for
// the default output (--remote-store-<key with dashes>, --output-dir).
var CommonKeys = []string{"name", "format", "queue_size", "queue_bytes"}

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

// ParseOutputs parses the outputs key of a YAML document. Every entry needs
// a name and a format (one of Formats) and takes the keys of that format; unknown keys, keys of another format, duplicate keys and
// names, wrong types and contradictions are errors naming the key and the
// line. Each entry starts from base(name, format).
func ParseOutputs(data []byte, base func(name, format string) Config) ([]Config, error) {
	var doc yaml.Node
	if err := yaml.Unmarshal(data, &doc); err != nil {
		return nil, fmt.Errorf("%w: %w", ErrNotYAML, err)
	}
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
	if list == nil {
		return nil, nil
	}
	if list.Kind != yaml.SequenceNode {
		return nil, fmt.Errorf("line %d: outputs must be a list of outputs", list.Line)
	}
	var errs []error
	var out []Config
	names := map[string]int{}
	for _, entry := range list.Content {
		cfg, err := parseOutput(entry, base)
		if err != nil {
			errs = append(errs, err)
			continue
		}
		if prev, ok := names[cfg.Name]; ok {
			errs = append(errs, fmt.Errorf("line %d: output name %q is already used on line %d", entry.Line, cfg.Name, prev))
			continue
		}
		names[cfg.Name] = entry.Line
		out = append(out, cfg)
	}
	if len(errs) > 0 {
		return nil, errors.Join(errs...)
	}
	if len(out) == 0 {
		return nil, fmt.Errorf("line %d: outputs is empty: list at least one output, or remove the key", list.Line)
	}
	return out, nil
}

func parseOutput(n *yaml.Node, base func(name, format string) Config) (Config, error) {
	if n.Kind != yaml.MappingNode {
		return Config{}, fmt.Errorf("line %d: an output must be a mapping with name, format and that format's keys", n.Line)
	}
	keys := map[string]*yaml.Node{}
	var errs []error
	for i := 0; i+1 < len(n.Content); i += 2 {
		k := n.Content[i]
		if _, dup := keys[k.Value]; dup {
			errs = append(errs, fmt.Errorf("line %d: duplicate key %q", k.Line, k.Value))
			continue
		}
		keys[k.Value] = n.Content[i+1]
	}
	str := func(key string) string {
		v, ok := keys[key]
		if !ok {
			return ""
		}
		if v.Kind != yaml.ScalarNode {
			errs = append(errs, fmt.Errorf("line %d: %s must be a string", v.Line, key))
			return ""
		}
		return v.Value
	}
	name, format := str("name"), str("format")
	if name == "" {
		errs = append(errs, fmt.Errorf("line %d: an output needs a name", n.Line))
	}
	spec, known := Lookup(format)
	allowed := slices.Concat(CommonKeys, spec.Keys)
	switch {
	case format == "":
		errs = append(errs, fmt.Errorf("line %d: output %q needs a format: %s", n.Line, name, FormatNames(nil)))
	case !known:
		errs = append(errs, fmt.Errorf("line %d: output %q: format %q: want %s", keys["format"].Line, name, format, FormatNames(nil)))
	}
	if len(errs) > 0 {
		return Config{}, errors.Join(errs...)
	}
	cfg := base(name, format)
	for i := 0; i+1 < len(n.Content); i += 2 {
		k, v := n.Content[i], n.Content[i+1]
		if !slices.Contains(allowed, k.Value) {
			switch {
			case formatKey(k.Value):
				errs = append(errs, fmt.Errorf("line %d: key %q does not apply to format %s", k.Line, k.Value, format))
			default:
				errs = append(errs, fmt.Errorf("line %d: unknown key %q in output %q (known: %s)", k.Line, k.Value, name, strings.Join(allowed, ", ")))
			}
			continue
		}
		if err := setKey(&cfg, k.Value, v); err != nil {
			errs = append(errs, fmt.Errorf("line %d: %s: %w", v.Line, k.Value, err))
		}
	}
	if len(errs) > 0 {
		return Config{}, errors.Join(errs...)
	}
	if err := cfg.Validate(); err != nil {
		return Config{}, fmt.Errorf("line %d: output %q: %w", n.Line, name, err)
	}
	return cfg, nil
}

// formatKey reports whether key is some format's.
func formatKey(key string) bool {
	for _, s := range Formats {
		if slices.Contains(s.Keys, key) {
			return true
		}
	}
	return false
}

func setKey(cfg *Config, key string, v *yaml.Node) error {
	r := &cfg.Remote
	switch key {
	case "name", "format":
		return nil
	case "address":
		return v.Decode(&r.Address)
	case "insecure":
		return v.Decode(&r.Insecure)
	case "insecure_skip_verify":
		return v.Decode(&r.InsecureSkipVerify)
	case "ca_file":
		return v.Decode(&r.CAFile)
	case "client_cert":
		return v.Decode(&r.ClientCert)
	case "client_key":
		return v.Decode(&r.ClientKey)
	case "bearer_token_file":
		return v.Decode(&r.BearerTokenFile)
	case "headers":
		var h map[string]string
		if err := v.Decode(&h); err != nil {
			return fmt.Errorf("want a mapping of header names to values: %w", err)
		}
		r.GRPCHeaders = h
		return nil
	case "compression":
		return v.Decode(&r.Compression)
	case "rpc_timeout":
		var s string
		if err := v.Decode(&s); err != nil {
			return err
		}
		d, err := time.ParseDuration(s)
		if err != nil {
			return fmt.Errorf("want a duration such as 30s: %w", err)
		}
		cfg.Queue.RPCTimeout = d
		return nil
	case "queue_size":
		return v.Decode(&cfg.Queue.QueueSize)
	case "queue_bytes":
		return v.Decode(&cfg.Queue.QueueBytes)
	case "dir":
		return v.Decode(&cfg.Dir)
	}
	return errUnknownKey
}

// errUnknownKey: setKey has no case for the key (a table's key without its
// setter; TestFormatsTable finds it).
var errUnknownKey = errors.New("unknown key")
