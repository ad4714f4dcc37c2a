package heldfd

import "os"

// Desc is one descriptor and what is counted for it. Its zero value holds
// nothing.
type Desc struct {
	// File is the descriptor, nil once closed.
	File *os.File
	// Size is the file's size, counted in Tally.Bytes while File is open.
	Size int64
	// Deleted: the file's link count was 0 at the last check.
	Deleted bool
}

// Tally counts the open Descs given to Hold and not yet to Close. It is
// not safe for concurrent use: its owner guards it with the lock that
// guards the Descs.
type Tally struct {
	Files   int   // descriptors held
	Bytes   int64 // their Sizes
	Deleted int   // those whose Deleted is set
}

// Hold counts d if it is open.
func (t *Tally) Hold(d *Desc) {
	if d.File == nil {
		return
	}
	t.Files++
	t.Bytes += d.Size
	if d.Deleted {
		t.Deleted++
	}
}

// Close closes d's descriptor and stops counting it. It reports false,
// doing nothing, when d was closed already.
func (t *Tally) Close(d *Desc) bool {
	if d.File == nil {
		return false
	}
	d.File.Close() // read-only: nothing to flush, no error to act on
	d.File = nil
	t.Files--
	t.Bytes -= d.Size
	if d.Deleted {
		t.Deleted--
	}
	return true
}

// SetDeleted records what the last check of d's file found, and reports
// whether that changed the count. A closed d is left alone: its last
// check no longer matters.
func (t *Tally) SetDeleted(d *Desc, deleted bool) bool {
	if d.File == nil || d.Deleted == deleted {
		return false
	}
	d.Deleted = deleted
	if deleted {
		t.Deleted++
	} else { // linked again
		t.Deleted--
	}
	return true
}
