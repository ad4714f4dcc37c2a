package vm

import (
	"bytes"
	"io"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"testing"

	"github.com/cavaliergopher/cpio"
)

func TestInitramfsRoundTrip(t *testing.T) {
	host := filepath.Join(t.TempDir(), "tool")
	if err := os.WriteFile(host, []byte("#!/bin/sh\n"), 0o600); err != nil {
		t.Fatal(err)
	}
	ird := NewInitramfs()
	ird.AddBytes("/init", []byte("init"), 0o755)
	ird.AddFile("/tandem/bin/tool", host, 0o755)
	ird.AddBytes("/tandem/plan.json", []byte("{}"), 0o644)
	var buf bytes.Buffer
	n, err := ird.WriteTo(&buf)
	if err != nil {
		t.Fatal(err)
	}
	if n != int64(buf.Len()) {
		t.Errorf("WriteTo returned %d, wrote %d bytes", n, buf.Len())
	}
	r := cpio.NewReader(&buf)
	var got []string
	contents := map[string]string{}
	for {
		h, err := r.Next()
		if err == io.EOF {
			break
		}
		if err != nil {
			t.Fatal(err)
		}
		kind := "f"
		if h.Mode&cpio.ModeType == cpio.TypeDir {
			kind = "d"
		}
		got = append(got, kind+" "+h.Name+" "+h.Mode.Perm().String())
		b, _ := io.ReadAll(r)
		contents[h.Name] = string(b)
	}
	want := []string{"f init 0755", "d tandem 0755", "d tandem/bin 0755", "f tandem/bin/tool 0755", "f tandem/plan.json 0644"}
	if !slices.Equal(got, want) {
		t.Errorf("entries:\n got %q\nwant %q", got, want)
	}
	if contents["tandem/bin/tool"] != "#!/bin/sh\n" || contents["init"] != "init" {
		t.Errorf("contents %q", contents)
	}
}

func TestInitramfsErrors(t *testing.T) {
	for _, tc := range []struct {
		name string
		add  func(*Initramfs)
		want string
	}{
		{"relative path", func(i *Initramfs) { i.AddBytes("init", nil, 0o755) }, `"init" is not absolute`},
		{"missing host file", func(i *Initramfs) { i.AddFile("/x", "/nonexistent/tandem", 0o644) }, "initramfs file /x"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			ird := NewInitramfs()
			tc.add(ird)
			_, err := ird.WriteTo(io.Discard)
			if err == nil || !strings.Contains(err.Error(), tc.want) {
				t.Errorf("err %v, want one containing %q", err, tc.want)
			}
		})
	}
}

func TestFindKernelAndModules(t *testing.T) {
	root := t.TempDir()
	for _, rel := range []string{"6.1.0-9-amd64", "6.1.0-57-amd64", "6.1.0-60-amd64"} {
		if err := os.MkdirAll(filepath.Join(root, "boot"), 0o755); err != nil {
			t.Fatal(err)
		}
		if err := os.WriteFile(filepath.Join(root, "boot", "vmlinuz-"+rel), nil, 0o644); err != nil {
			t.Fatal(err)
		}
		if rel == "6.1.0-60-amd64" {
			continue // an image without modules is not usable
		}
		mods := filepath.Join(root, "lib", "modules", rel)
		if err := os.MkdirAll(mods, 0o755); err != nil {
			t.Fatal(err)
		}
		for _, f := range []string{"modules.dep", "modules.builtin"} {
			b, err := os.ReadFile(filepath.Join("testdata/modules/6.1.0-1-amd64", f))
			if err != nil {
				t.Fatal(err)
			}
			if err := os.WriteFile(filepath.Join(mods, f), b, 0o644); err != nil {
				t.Fatal(err)
			}
		}
	}
	k, err := FindKernel(root, "6.1.*-amd64")
	if err != nil {
		t.Fatal(err)
	}
	if k.Release != "6.1.0-57-amd64" {
		t.Errorf("found %s, want the newest with modules, 6.1.0-57-amd64", k.Release)
	}
	files, err := k.ModuleFiles("virtio_pci", "virtio_blk", "8250")
	if err != nil {
		t.Fatal(err)
	}
	pos := map[string]int{}
	for i, f := range files {
		pos[filepath.Base(f)] = i
	}
	if len(files) != 6 {
		t.Errorf("modules %v, want virtio_pci, virtio_blk and their 4 dependencies, once each", files)
	}
	for _, before := range [][2]string{{"virtio.ko", "virtio_pci.ko"}, {"virtio_ring.ko", "virtio_blk.ko"}, {"virtio_pci_modern_dev.ko", "virtio_pci.ko"}} {
		if pos[before[0]] >= pos[before[1]] {
			t.Errorf("%s loads after %s: %v", before[0], before[1], files)
		}
	}
	if _, err := k.ModuleFiles("nosuchmodule"); err == nil || !strings.Contains(err.Error(), "nosuchmodule") {
		t.Errorf("unknown module: err %v", err)
	}
	if _, err := FindKernel(root, "5.10.*"); err == nil || !strings.Contains(err.Error(), "apt-get install") {
		t.Errorf("no kernel: err %v", err)
	}
}

func TestParseEvent(t *testing.T) {
	for _, tc := range []struct {
		line    string
		want    Event
		ok, bad bool
	}{
		{line: "[    7.6] reboot: Power down"},
		{line: Event{Name: EventBooted, Value: 8}.Line(), want: Event{Name: EventBooted, Value: 8}, ok: true},
		{line: "noise TANDEM-VM {\"name\":\"failed\",\"detail\":\"x\"}\r", want: Event{Name: EventFailed, Detail: "x"}, ok: true},
		{line: "TANDEM-VM {\"name\":", ok: true, bad: true},
		{line: "TANDEM-VM {}", ok: true, bad: true},
		{line: "TANDEM-VM {\"name\":\"x\",\"extra\":1}", ok: true, bad: true},
	} {
		e, ok, err := ParseEvent(tc.line)
		if ok != tc.ok || (err != nil) != tc.bad || (!tc.bad && e != tc.want) {
			t.Errorf("ParseEvent(%q) = %+v, %v, %v; want %+v, %v, error %v", tc.line, e, ok, err, tc.want, tc.ok, tc.bad)
		}
	}
}

func TestScanEventsReportsMalformedLines(t *testing.T) {
	in := "boot\nTANDEM-VM {\"name\":\"booted\"}\nTANDEM-VM {oops\n"
	events := make(chan Event, 4)
	var log bytes.Buffer
	scanEvents(strings.NewReader(in), &log, events)
	close(events)
	var got []Event
	for e := range events {
		got = append(got, e)
	}
	if len(got) != 2 || got[0].Name != EventBooted || got[1].Name != EventFailed || !strings.Contains(got[1].Detail, "oops") {
		t.Errorf("events %+v", got)
	}
	if log.String() != in {
		t.Errorf("console copy %q, want %q", log.String(), in)
	}
}

// FuzzParseEvent: console bytes come from the guest; parsing them never
// panics, and what parses formats back to a line that parses the same.
func FuzzParseEvent(f *testing.F) {
	f.Add(Event{Name: EventResults, Value: 1536}.Line())
	f.Add("TANDEM-VM {\"name\":\"failed\",\"detail\":\"\\u0000\"}")
	f.Add("[ 1.0] TANDEM-VM")
	f.Fuzz(func(t *testing.T, line string) {
		e, ok, err := ParseEvent(line)
		if !ok || err != nil {
			return
		}
		again, ok, err := ParseEvent(e.Line())
		if !ok || err != nil || again != e {
			t.Fatalf("%+v formats to %q, which parses to %+v, %v, %v", e, e.Line(), again, ok, err)
		}
	})
}
