package symbolize

import (
	"crypto/sha256"
	"encoding/binary"
	"errors"
	"fmt"
	"io"
	"os"
	"strings"
	"syscall"

	"github.com/tandem-profiler/tandem/schema"
)

// fileIDWindow is how much of the head and tail of a file its id hashes.
const fileIDWindow = 4096

// FileIDOf computes the tracer's file id of an executable: the first 16
// bytes of SHA-256 over its first 4 KiB, its last 4 KiB and its length
// (8 bytes, big-endian), read as two big-endian halves. It is how the
// sampler names executables, so it tells whether a file on disk is the one
// a notice describes.
func FileIDOf(r io.ReaderAt, size int64) (schema.FileID, error) {
	h := sha256.New()
	head := make([]byte, min(size, fileIDWindow))
	if _, err := r.ReadAt(head, 0); err != nil {
		return schema.FileID{}, fmt.Errorf("read head: %w", err)
	}
	h.Write(head)
	tail := make([]byte, min(size, fileIDWindow))
	if _, err := r.ReadAt(tail, size-int64(len(tail))); err != nil {
		return schema.FileID{}, fmt.Errorf("read tail: %w", err)
	}
	h.Write(tail)
	h.Write(binary.BigEndian.AppendUint64(nil, uint64(size)))
	sum := h.Sum(nil)
	return schema.FileID{Hi: binary.BigEndian.Uint64(sum[0:8]), Lo: binary.BigEndian.Uint64(sum[8:16])}, nil
}

// ErrNotSameFile is returned by Reopen when the file at the notice's path
// is not the executable the notice describes (replayed on another machine,
// or the file was replaced).
var ErrNotSameFile = errors.New("the file at that path is not the executable the notice names")

// Reopen opens the executable a notice names by its path, for notices that
// came without a descriptor (dumps): on the machine that recorded them, most
// executables are still there and readable without privilege. The file is
// used only when its file id matches the notice's. Opening never blocks (a
// FIFO at the path is refused) and only regular files are accepted.
func Reopen(n *schema.ExecutableNotice) (*os.File, error) {
	if n.IsVDSO || !strings.HasPrefix(n.Path, "/") || n.FileID.IsZero() {
		return nil, fmt.Errorf("notice %q names no file on disk", n.Path)
	}
	f, err := os.OpenFile(n.Path, os.O_RDONLY|syscall.O_NONBLOCK, 0)
	if err != nil {
		return nil, err
	}
	st, err := f.Stat()
	if err == nil && !st.Mode().IsRegular() {
		err = fmt.Errorf("%s is not a regular file", n.Path)
	}
	var id schema.FileID
	if err == nil {
		id, err = FileIDOf(f, st.Size())
	}
	if err == nil && id != n.FileID {
		err = fmt.Errorf("%s: %w (file id %s, notice %s)", n.Path, ErrNotSameFile, id.Hex(), n.FileID.Hex())
	}
	if err != nil {
		f.Close()
		return nil, err
	}
	return f, nil
}
