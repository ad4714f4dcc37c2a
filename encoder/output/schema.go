package output

import "fmt"

// hostPortPattern is the JSON Schema pattern of an address the encoder
// accepts (internal/cli.CheckHostPort, or a gRPC target with a scheme).
const hostPortPattern = `^([a-z][a-z0-9+.-]*://.+|unix:.+|(\[[0-9a-fA-F:.]+\]|[A-Za-z0-9_.-]*):[0-9]{1,5})$`

// durationPattern is the JSON Schema pattern of a Go duration (30s, 1m30s).
const durationPattern = `^([0-9]+(\.[0-9]+)?(ns|us|µs|ms|s|m|h))+$`

// EntrySchema is the JSON Schema of one entry of an outputs list, from the
// settings table and the formats table: each key with its type and allowed
// values, the keys each format takes, and what each format requires. The
// Helm chart's values.schema.json holds it for output.outputs (test/repo
// fails when the two differ), so the chart refuses at install what every
// encoder would otherwise exit 2 on.
func EntrySchema() map[string]any {
	props := map[string]any{}
	for _, s := range settings {
		if s.Key == "" {
			continue
		}
		p := map[string]any{"description": s.Help}
		switch s.Type {
		case "string":
			p["type"] = "string"
		case "bool":
			p["type"] = "boolean"
		case "int":
			p["type"] = "integer"
			p["minimum"] = 1 // the queue bounds; max_bytes below
		case "duration":
			p["type"] = "string"
			p["pattern"] = durationPattern
		case "map":
			p["type"] = "object"
			p["additionalProperties"] = map[string]any{"type": "string"}
		default:
			panic(fmt.Sprintf("output settings: %s: no schema type for %s", s.Key, s.Type))
		}
		switch s.Key {
		case "name":
			p["pattern"] = validName.String()
		case "address":
			p["pattern"] = hostPortPattern
		case "dir":
			p["pattern"] = "^/"
		case "max_bytes":
			p["minimum"] = 0 // 0 keeps every file
		}
		if s.Allowed != nil {
			p["enum"] = s.Allowed
		}
		props[s.Key] = p
	}
	var perFormat []any
	for _, spec := range Formats {
		allowed := map[string]any{"name": true, "format": true}
		for _, k := range spec.Keys() {
			allowed[k] = true
		}
		required := []string{"dir"}
		if spec.Remote {
			required = []string{"address"}
		}
		perFormat = append(perFormat, map[string]any{
			"if":   map[string]any{"properties": map[string]any{"format": map[string]any{"const": spec.Name}}},
			"then": map[string]any{"properties": allowed, "additionalProperties": false, "required": required},
		})
	}
	return map[string]any{
		"type":                 "object",
		"required":             []string{"name", "format"},
		"properties":           props,
		"additionalProperties": false,
		"allOf":                perFormat,
	}
}
