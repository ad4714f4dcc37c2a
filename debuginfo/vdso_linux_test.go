package debuginfo

import (
	"bufio"
	"bytes"
	"debug/elf"
	"encoding/hex"
	"os"
	"strconv"
	"strings"
	"testing"

	"golang.org/x/sys/unix"

	"github.com/tandem-profiler/tandem/schema"
)

// vdsoImage reads this process's vDSO out of /proc/self/mem.
func vdsoImage(t *testing.T) []byte {
	t.Helper()
	maps, err := os.Open("/proc/self/maps")
	if err != nil {
		t.Skip(err)
	}
	defer maps.Close()
	sc := bufio.NewScanner(maps)
	for sc.Scan() {
		if !strings.HasSuffix(sc.Text(), "[vdso]") {
			continue
		}
		lo, hi, _ := strings.Cut(strings.Fields(sc.Text())[0], "-")
		start, err1 := strconv.ParseUint(lo, 16, 64)
		end, err2 := strconv.ParseUint(hi, 16, 64)
		if err1 != nil || err2 != nil {
			t.Fatalf("parse %q", sc.Text())
		}
		mem, err := os.Open("/proc/self/mem")
		if err != nil {
			t.Skip(err)
		}
		defer mem.Close()
		b := make([]byte, end-start)
		if _, err := mem.ReadAt(b, int64(start)); err != nil {
			t.Skipf("read vdso: %v", err)
		}
		return b
	}
	t.Skip("no [vdso] mapping")
	return nil
}

// TestUploadVDSO: the sampler passes the vDSO as a sealed memfd; it is an
// ELF with a dynamic symbol table and is uploaded like any executable.
func TestUploadVDSO(t *testing.T) {
	img := vdsoImage(t)
	ef, err := elf.NewFile(bytes.NewReader(img))
	if err != nil {
		t.Skipf("vdso image: %v", err)
	}
	var gnu string
	if s := ef.Section(".note.gnu.build-id"); s != nil {
		if b, err := s.Data(); err == nil && len(b) > 16 {
			gnu = hex.EncodeToString(b[16:])
		}
	}
	fd, err := unix.MemfdCreate("vdso", unix.MFD_CLOEXEC)
	if err != nil {
		t.Skip(err)
	}
	f := os.NewFile(uintptr(fd), "memfd:vdso")
	if _, err := f.Write(img); err != nil {
		t.Fatal(err)
	}
	s := startParcaServer(t, false)
	u, _ := newTestUploader(t, s, testConfig(t))
	n := &schema.ExecutableNotice{FileID: schema.FileID{Hi: 42, Lo: 42}, FileName: "linux-vdso.so.1", Path: "[vdso]",
		GNUBuildID: gnu, HasDescriptor: true, IsVDSO: true}
	if !u.Submit(n, f) {
		t.Fatal("vdso not queued")
	}
	idle(t, u)
	key, _ := BuildID(n)
	e, ok := s.Entry(key)
	if !ok || e.Uploading {
		t.Fatalf("vdso not uploaded under %s", key)
	}
	got, err := elf.NewFile(bytes.NewReader(e.Data))
	if err != nil {
		t.Fatal(err)
	}
	syms, err := got.DynamicSymbols()
	if err != nil || len(syms) == 0 {
		t.Fatalf("uploaded vdso has no dynamic symbols: %v", err)
	}
	var names []string
	for _, s := range syms {
		names = append(names, s.Name)
	}
	if !strings.Contains(strings.Join(names, " "), "clock_gettime") {
		t.Errorf("no clock_gettime among %v", names)
	}
	t.Logf("vdso: %d bytes, uploaded %d (build id %q, %d dynamic symbols)", len(img), len(e.Data), gnu, len(syms))
}
