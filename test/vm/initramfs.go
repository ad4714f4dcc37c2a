package vm

import (
	"fmt"
	"io"
	"os"
	"path"
	"sort"
	"strings"

	"github.com/cavaliergopher/cpio"
)

// Initramfs is the contents of an initramfs: files by their absolute
// path in the guest. Parent directories are implied.
type Initramfs struct {
	files map[string]initramfsFile
}

type initramfsFile struct {
	hostPath string // copied from the host, or
	data     []byte // these bytes
	mode     os.FileMode
}

// NewInitramfs returns an empty initramfs.
func NewInitramfs() *Initramfs { return &Initramfs{files: map[string]initramfsFile{}} }

// AddFile puts the host file hostPath at guestPath with mode's permission
// bits.
func (i *Initramfs) AddFile(guestPath, hostPath string, mode os.FileMode) {
	i.files[path.Clean(guestPath)] = initramfsFile{hostPath: hostPath, mode: mode}
}

// AddBytes puts data at guestPath with mode's permission bits.
func (i *Initramfs) AddBytes(guestPath string, data []byte, mode os.FileMode) {
	i.files[path.Clean(guestPath)] = initramfsFile{data: data, mode: mode}
}

// WriteTo writes the initramfs as an uncompressed newc cpio archive (the
// kernel unpacks it without a decompressor, which matters under
// emulation). Directories come before what they hold.
func (i *Initramfs) WriteTo(w io.Writer) (int64, error) {
	cw := &countingWriter{w: w}
	ar := cpio.NewWriter(cw)
	dirs := map[string]bool{"/": true}
	names := make([]string, 0, len(i.files))
	for name := range i.files {
		if !path.IsAbs(name) {
			return cw.n, fmt.Errorf("initramfs path %q is not absolute", name)
		}
		names = append(names, name)
	}
	sort.Strings(names)
	for _, name := range names {
		var parents []string
		for d := path.Dir(name); !dirs[d]; d = path.Dir(d) {
			parents = append(parents, d)
			dirs[d] = true
		}
		for j := len(parents) - 1; j >= 0; j-- {
			if err := ar.WriteHeader(&cpio.Header{Name: strings.TrimPrefix(parents[j], "/"), Mode: cpio.TypeDir | 0o755, Links: 2}); err != nil {
				return cw.n, fmt.Errorf("write initramfs directory %s: %w", parents[j], err)
			}
		}
		if err := i.writeFile(ar, name); err != nil {
			return cw.n, err
		}
	}
	if err := ar.Close(); err != nil {
		return cw.n, fmt.Errorf("finish the initramfs: %w", err)
	}
	return cw.n, nil
}

func (i *Initramfs) writeFile(ar *cpio.Writer, name string) error {
	f := i.files[name]
	data := f.data
	if f.hostPath != "" {
		b, err := os.ReadFile(f.hostPath)
		if err != nil {
			return fmt.Errorf("initramfs file %s: %w", name, err)
		}
		data = b
	}
	hdr := &cpio.Header{Name: strings.TrimPrefix(name, "/"), Mode: cpio.TypeReg | cpio.FileMode(f.mode.Perm()), Size: int64(len(data))}
	if err := ar.WriteHeader(hdr); err != nil {
		return fmt.Errorf("write initramfs file %s: %w", name, err)
	}
	if _, err := ar.Write(data); err != nil {
		return fmt.Errorf("write initramfs file %s: %w", name, err)
	}
	return nil
}

type countingWriter struct {
	w io.Writer
	n int64
}

func (c *countingWriter) Write(p []byte) (int, error) {
	n, err := c.w.Write(p)
	c.n += int64(n)
	return n, err
}
