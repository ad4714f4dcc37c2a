package output

import (
	"fmt"
	"reflect"
	"slices"
	"strconv"
	"strings"
	"time"

	"github.com/tandem-profiler/tandem/encoder/export"
)

// Setting is one user-facing setting of an output, read from the tags of
// Config and of the export.Config and export.QueueConfig inside it:
//
//	yaml:"key"              its key in an outputs entry ("-": none)
//	flag:"name[,every]"     the flag that sets it for the default output;
//	                        ",every": the flag's value is also every
//	                        outputs entry's default
//	transport:"grpc|file"   only that transport's formats take it (on a
//	                        struct field: every field inside)
//	help:"..."              one line for --help and the reference
//
// The outputs file's keys and decoding, the command's flags and which of
// them contradict an outputs list, and the configuration reference all
// come from Settings, so a setting is described once, on its field.
type Setting struct {
	// Key is the setting's key in an outputs entry; "" when an entry has
	// none (the flag sets it for every output, or for the default one).
	Key string
	// Flag is the flag's name (without dashes); "" when only an outputs
	// entry has it.
	Flag string
	// EveryOutput: the flag's value is every outputs entry's default too.
	// Otherwise the flag describes only the default output, and giving it
	// beside an outputs list is an error.
	EveryOutput bool
	// Transport is the transport of the formats that take the setting;
	// "" means every format.
	Transport Transport
	// Type is the value's type: string, bool, int, duration (Go syntax:
	// 30s, 1m30s) or map (string keys to string values).
	Type string
	// Allowed lists the values a string setting takes; nil means any.
	Allowed []string
	// Default is DefaultConfig's value, rendered ("" when unset).
	Default string
	// Help says what the setting does, in one line.
	Help string

	index []int // the field's path in Config
}

// Settings returns every setting of an output, in Config's field order.
func Settings() []Setting { return slices.Clone(settings) }

// settings is Settings' table, read from Config's tags once.
var settings = readSettings()

func readSettings() []Setting {
	var out []Setting
	def := reflect.ValueOf(DefaultConfig("", ""))
	var walk func(t reflect.Type, index []int, transport Transport)
	walk = func(t reflect.Type, index []int, transport Transport) {
		for i := range t.NumField() {
			f := t.Field(i)
			if !f.IsExported() {
				continue
			}
			path := append(slices.Clone(index), i)
			tr := transport
			if v := f.Tag.Get("transport"); v != "" {
				tr = Transport(v)
			}
			key := f.Tag.Get("yaml")
			if key == ",inline" {
				walk(f.Type, path, tr)
				continue
			}
			flag, every := strings.CutSuffix(f.Tag.Get("flag"), ",every")
			if key == "-" {
				key = ""
			}
			if key == "" && flag == "" {
				continue // not the user's (set by the command or a package)
			}
			s := Setting{Key: key, Flag: flag, EveryOutput: every, Transport: tr, Help: f.Tag.Get("help"), index: path}
			s.Type = typeName(f.Type)
			switch key {
			case "format":
				s.Allowed = formatNames()
			case "compression":
				s.Allowed = slices.Clone(export.Compressions)
			}
			s.Default = render(def.FieldByIndex(path))
			out = append(out, s)
		}
	}
	walk(reflect.TypeFor[Config](), nil, "")
	return out
}

var durationType = reflect.TypeFor[time.Duration]()

// typeName is a setting's Type for a field's Go type.
func typeName(t reflect.Type) string {
	switch {
	case t == durationType:
		return "duration"
	case t.Kind() == reflect.String:
		return "string"
	case t.Kind() == reflect.Bool:
		return "bool"
	case t.Kind() == reflect.Int:
		return "int"
	case t.Kind() == reflect.Map && t.Key().Kind() == reflect.String && t.Elem().Kind() == reflect.String:
		return "map"
	}
	panic(fmt.Sprintf("output settings: field of type %s: no setting type (add one to typeName and the flags)", t))
}

// render writes a default value as a flag would show it ("" for a zero
// string or map).
func render(v reflect.Value) string {
	switch {
	case v.Type() == durationType:
		return time.Duration(v.Int()).String()
	case v.Kind() == reflect.String:
		return v.String()
	case v.Kind() == reflect.Bool:
		return strconv.FormatBool(v.Bool())
	case v.Kind() == reflect.Int:
		return strconv.FormatInt(v.Int(), 10)
	}
	return ""
}

func formatNames() []string {
	var names []string
	for _, s := range Formats {
		names = append(names, s.Name)
	}
	return names
}

// Field returns a pointer to the setting's field in c (*string, *bool,
// *int, *time.Duration or *map[string]string), for a flag to set.
func (s Setting) Field(c *Config) any {
	return reflect.ValueOf(c).Elem().FieldByIndex(s.index).Addr().Interface()
}

// AppliesTo reports whether an output of the format takes the setting.
func (s Setting) AppliesTo(spec Spec) bool {
	return s.Transport == "" || s.Transport == spec.Transport
}

// copyTo sets the setting's field of dst to its value in src.
func (s Setting) copyTo(dst, src *Config) {
	reflect.ValueOf(dst).Elem().FieldByIndex(s.index).Set(reflect.ValueOf(src).Elem().FieldByIndex(s.index))
}

// Keys lists the keys an outputs entry of the format takes.
func (s Spec) Keys() []string {
	var keys []string
	for _, st := range settings {
		if st.Key != "" && st.AppliesTo(s) {
			keys = append(keys, st.Key)
		}
	}
	return keys
}

// WithEveryOutputFlags returns base with the settings whose flags are
// every output's default (EveryOutput) copied from flags: how an outputs
// entry starts from the command line's values.
func WithEveryOutputFlags(base, flags Config) Config {
	for _, s := range settings {
		if s.Flag != "" && s.EveryOutput {
			s.copyTo(&base, &flags)
		}
	}
	return base
}

// settingByKey returns the setting of an outputs entry key.
func settingByKey(key string) (Setting, bool) {
	for _, s := range settings {
		if s.Key == key && key != "" {
			return s, true
		}
	}
	return Setting{}, false
}
