package labels

import (
	"errors"
	"fmt"
	"os"
	"regexp"
	"strings"

	"github.com/prometheus/prometheus/model/relabel"
	"go.yaml.in/yaml/v2"
)

// fileConfig is the YAML of --config-path.
type fileConfig struct {
	RelabelConfigs []*relabel.Config `yaml:"relabel_configs"`
	// Outputs is encoder/output's (output.LoadConfigFile reads it).
	Outputs any `yaml:"outputs"`
}

// LoadConfigFile reads the relabel configs of a parca-agent config file: a
// YAML document whose keys are relabel_configs, a list of Prometheus
// relabel configs, and outputs (encoder/output's, not read here). Unknown keys, duplicate keys and invalid configs are
// errors that name the line or the entry. An empty file holds no configs.
//
// parca-agent also lets the file set command-line flags by name; Tandem
// does not, and names such keys as unknown.
func LoadConfigFile(path string) ([]*relabel.Config, error) {
	b, err := os.ReadFile(path)
	if err != nil {
		return nil, fmt.Errorf("read config file: %w", err)
	}
	cfgs, err := parseConfig(b)
	if err != nil {
		return nil, fmt.Errorf("config file %s: %w", path, err)
	}
	return cfgs, nil
}

// NotYAML is the error for a config file the YAML parser cannot read: it
// belongs to no key, and the parser's line is where it noticed, which may
// be below the mistake.
func NotYAML(err error) error {
	msg := strings.TrimPrefix(err.Error(), "yaml: ")
	return fmt.Errorf("not valid YAML: %s (look at that line and the ones around it: an unclosed bracket or quote, a tab, or an indentation that does not line up)", msg)
}

// yaml.v2's strict-mode errors for an unknown and a repeated key.
var (
	unknownField   = regexp.MustCompile(`^line (\d+): field (.+) not found in type (\S+)$`)
	duplicateField = regexp.MustCompile(`^line (\d+): field (.+) already set in type (\S+)$`)
)

func parseConfig(b []byte) ([]*relabel.Config, error) {
	var fc fileConfig
	if err := yaml.UnmarshalStrict(b, &fc); err != nil {
		var te *yaml.TypeError
		if !errors.As(err, &te) {
			return nil, NotYAML(err)
		}
		msgs := make([]string, 0, len(te.Errors))
		for _, m := range te.Errors {
			if sub := duplicateField.FindStringSubmatch(m); sub != nil {
				msgs = append(msgs, fmt.Sprintf("line %s: duplicate key %q", sub[1], sub[2]))
				continue
			}
			sub := unknownField.FindStringSubmatch(m)
			if sub == nil {
				msgs = append(msgs, m)
				continue
			}
			switch sub[3] {
			case "labels.fileConfig":
				m = fmt.Sprintf("line %s: unknown key %q: the file may only hold relabel_configs and outputs (set flags on the command line)", sub[1], sub[2])
			case "relabel.plain":
				m = fmt.Sprintf("line %s: unknown key %q in a relabel config (known: source_labels, separator, regex, modulus, target_label, replacement, action)", sub[1], sub[2])
			default:
				m = fmt.Sprintf("line %s: unknown key %q", sub[1], sub[2])
			}
			msgs = append(msgs, m)
		}
		return nil, errors.New(strings.Join(msgs, "; "))
	}
	for i, rc := range fc.RelabelConfigs {
		if err := validateRelabel(rc); err != nil {
			return nil, fmt.Errorf("relabel_configs[%d]: %w", i, err)
		}
	}
	return fc.RelabelConfigs, nil
}
