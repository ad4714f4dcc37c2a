package heldfd

import (
	"os"
	"path/filepath"
	"testing"
)

func TestTally(t *testing.T) {
	type op struct {
		name    string
		do      func(*Tally, []*Desc) bool
		want    Tally
		changed bool
	}
	hold := func(i int) func(*Tally, []*Desc) bool {
		return func(t *Tally, d []*Desc) bool { t.Hold(d[i]); return true }
	}
	closeD := func(i int) func(*Tally, []*Desc) bool {
		return func(t *Tally, d []*Desc) bool { return t.Close(d[i]) }
	}
	setDel := func(i int, v bool) func(*Tally, []*Desc) bool {
		return func(t *Tally, d []*Desc) bool { return t.SetDeleted(d[i], v) }
	}
	// d[0]: 10 bytes, d[1]: 20 bytes deleted already, d[2]: never opened.
	for _, tc := range []struct {
		name string
		ops  []op
	}{
		{"hold then close", []op{
			{"hold 0", hold(0), Tally{1, 10, 0}, true},
			{"hold 1 (deleted)", hold(1), Tally{2, 30, 1}, true},
			{"close 1", closeD(1), Tally{1, 10, 0}, true},
			{"close 1 again", closeD(1), Tally{1, 10, 0}, false},
			{"close 0", closeD(0), Tally{0, 0, 0}, true},
		}},
		{"deleted and linked again", []op{
			{"hold 0", hold(0), Tally{1, 10, 0}, true},
			{"deleted", setDel(0, true), Tally{1, 10, 1}, true},
			{"deleted again", setDel(0, true), Tally{1, 10, 1}, false},
			{"linked again", setDel(0, false), Tally{1, 10, 0}, true},
			{"deleted, then closed", setDel(0, true), Tally{1, 10, 1}, true},
			{"close", closeD(0), Tally{0, 0, 0}, true},
			{"closed: check ignored", setDel(0, false), Tally{0, 0, 0}, false},
		}},
		{"no descriptor", []op{
			{"hold 2", hold(2), Tally{}, true},
			{"deleted 2", setDel(2, true), Tally{}, false},
			{"close 2", closeD(2), Tally{}, false},
		}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			dir := t.TempDir()
			open := func(name string) *os.File {
				f, err := os.Create(filepath.Join(dir, name))
				if err != nil {
					t.Fatal(err)
				}
				t.Cleanup(func() { f.Close() })
				return f
			}
			f0, f1 := open("a"), open("b")
			d := []*Desc{{File: f0, Size: 10}, {File: f1, Size: 20, Deleted: true}, {Size: 40}}
			var tally Tally
			for _, o := range tc.ops {
				if got := o.do(&tally, d); got != o.changed {
					t.Errorf("%s: reported %v, want %v", o.name, got, o.changed)
				}
				if tally != o.want {
					t.Errorf("%s: tally %+v, want %+v", o.name, tally, o.want)
				}
			}
		})
	}
}

func TestCloseClosesTheDescriptor(t *testing.T) {
	f, err := os.Open(os.DevNull)
	if err != nil {
		t.Fatal(err)
	}
	d := &Desc{File: f, Size: 1}
	var tally Tally
	tally.Hold(d)
	tally.Close(d)
	if d.File != nil {
		t.Errorf("Desc.File = %v after Close, want nil", d.File)
	}
	if _, err := f.Stat(); err == nil {
		t.Errorf("the descriptor is still open after Close")
	}
}
