package reference

import (
	"bytes"
	"encoding/json"
	"fmt"
	"strings"

	"go.yaml.in/yaml/v3"
)

// ValuesPage is the path of the chart values' reference page.
const ValuesPage = "docs/reference/helm-values.md"

// schema is the part of a JSON schema the page shows.
type schema struct {
	Type        any                `json:"type"`
	Description string             `json:"description"`
	Properties  map[string]*schema `json:"properties"`
	Items       *schema            `json:"items"`
	Enum        []any              `json:"enum"`
	Minimum     *float64           `json:"minimum"`
	Maximum     *float64           `json:"maximum"`
	MinLength   *int               `json:"minLength"`
	MaxLength   *int               `json:"maxLength"`
	Pattern     string             `json:"pattern"`
}

// Values returns the reference page of a Helm chart's values, one row per
// value in the order of values.yaml: its default (from values.yaml), its
// type and bounds (from values.schema.json) and what it does (the comment
// above it in values.yaml, else the schema's description). chart names
// the chart's directory in the page.
func Values(chart string, valuesYAML, schemaJSON []byte) (Files, error) {
	var root yaml.Node
	if err := yaml.Unmarshal(valuesYAML, &root); err != nil {
		return nil, fmt.Errorf("read values.yaml: %w", err)
	}
	var s schema
	if err := json.Unmarshal(schemaJSON, &s); err != nil {
		return nil, fmt.Errorf("read values.schema.json: %w", err)
	}
	if root.Kind != yaml.DocumentNode || len(root.Content) != 1 || root.Content[0].Kind != yaml.MappingNode {
		return nil, fmt.Errorf("values.yaml is not a mapping")
	}
	var b bytes.Buffer
	fmt.Fprintf(&b, "# Helm chart values\n\n"+
		"Generated from `%[1]s/values.yaml` (defaults, and the comment above each\n"+
		"value) and `%[1]s/values.schema.json` (types and bounds: a value outside\n"+
		"them, or a key the schema does not name, fails the install). Do not edit:\n"+
		"run `make reference`.\n\n"+
		"| Value | Default | Type and bounds | Meaning |\n|---|---|---|---|\n", chart)
	if err := valueRows(&b, "", root.Content[0], &s); err != nil {
		return nil, err
	}
	return Files{ValuesPage: b.Bytes()}, nil
}

// valueRows writes a row for every key of the mapping m (with its schema
// s), descending into mappings the schema describes key by key.
func valueRows(b *bytes.Buffer, prefix string, m *yaml.Node, s *schema) error {
	for i := 0; i+1 < len(m.Content); i += 2 {
		key, val := m.Content[i], m.Content[i+1]
		path := prefix + key.Value
		var sub *schema
		if s != nil {
			sub = s.Properties[key.Value]
		}
		if sub == nil {
			return fmt.Errorf("values.yaml has %s, which values.schema.json does not describe", path)
		}
		meaning := comment(key.HeadComment)
		if meaning == "" {
			meaning = sub.Description
		}
		if val.Kind == yaml.MappingNode && len(sub.Properties) > 0 {
			if meaning != "" {
				fmt.Fprintf(b, "| `%s` | | object | %s |\n", path, cell(meaning))
			}
			if err := valueRows(b, path+".", val, sub); err != nil {
				return err
			}
			continue
		}
		def, err := flow(val)
		if err != nil {
			return fmt.Errorf("%s: %w", path, err)
		}
		fmt.Fprintf(b, "| `%s` | %s | %s | %s |\n", path, def, cell(bounds(sub)), cell(meaning))
	}
	return nil
}

// comment turns a YAML head comment into one line of prose.
func comment(c string) string {
	var words []string
	for _, l := range strings.Split(c, "\n") {
		l = strings.TrimSpace(strings.TrimPrefix(strings.TrimSpace(l), "#"))
		if l != "" {
			words = append(words, l)
		}
	}
	return strings.Join(words, " ")
}

// flow renders a default compactly: a scalar as written, anything else as
// JSON.
func flow(n *yaml.Node) (string, error) {
	if n.Kind == yaml.ScalarNode {
		if n.Value == "" {
			return `""`, nil
		}
		return "`" + n.Value + "`", nil
	}
	var v any
	if err := n.Decode(&v); err != nil {
		return "", err
	}
	j, err := json.Marshal(v)
	if err != nil {
		return "", err
	}
	return "`" + string(j) + "`", nil
}

// bounds says what the schema allows.
func bounds(s *schema) string {
	parts := []string{typeName(s)}
	if len(s.Enum) > 0 {
		var vs []string
		for _, e := range s.Enum {
			vs = append(vs, fmt.Sprintf("`%v`", e))
		}
		parts = append(parts, "one of "+strings.Join(vs, ", "))
	}
	switch {
	case s.Minimum != nil && s.Maximum != nil:
		parts = append(parts, fmt.Sprintf("%v to %v", *s.Minimum, *s.Maximum))
	case s.Minimum != nil:
		parts = append(parts, fmt.Sprintf("at least %v", *s.Minimum))
	case s.Maximum != nil:
		parts = append(parts, fmt.Sprintf("at most %v", *s.Maximum))
	}
	if s.MinLength != nil && *s.MinLength > 0 {
		parts = append(parts, "not empty")
	}
	if s.MaxLength != nil {
		parts = append(parts, fmt.Sprintf("at most %d characters", *s.MaxLength))
	}
	if s.Pattern != "" {
		parts = append(parts, "matching `"+s.Pattern+"`")
	}
	if s.Items != nil {
		if inner := bounds(s.Items); inner != "" {
			parts = append(parts, "items: "+inner)
		}
	}
	return strings.Join(parts, ", ")
}

// typeName is the schema's type (or types).
func typeName(s *schema) string {
	switch t := s.Type.(type) {
	case string:
		return t
	case []any:
		var ts []string
		for _, x := range t {
			ts = append(ts, fmt.Sprint(x))
		}
		return strings.Join(ts, " or ")
	}
	return "any"
}

// cell escapes what would end a Markdown table cell.
func cell(s string) string { return strings.ReplaceAll(s, "|", `\|`) }
