package vm

import (
	"bytes"
	"errors"
	"fmt"
	"io"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"testing"
	"time"

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
	scanEvents(strings.NewReader(in), &log, events, &warningWatch{})
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

func TestFindKernelWarnings(t *testing.T) {
	for _, tc := range []struct {
		name string
		log  string
		want []string // kinds, in order
	}{
		{"clean boot", "[    0.000000] Linux version 6.1.0-57-amd64\n[    2.1] virtio_blk virtio1: [vda] 1048576 512-byte logical blocks\n", nil},
		{"soft lockup, not BUG", "[  693.1] watchdog: BUG: soft lockup - CPU#0 stuck for 693s! [tandem-sampler:97]\n[  693.1] Modules linked in: virtio_blk\n", []string{"soft lockup"}},
		{"hard lockup", "[ 12.0] NMI watchdog: Watchdog detected hard LOCKUP on cpu 1\n", []string{"hard lockup"}},
		{"rcu stall", "[ 30.0] rcu: INFO: rcu_preempt detected stalls on CPUs/tasks:\n", []string{"RCU stall"}},
		{"rcu sched stall", "[ 30.0] rcu: INFO: rcu_sched self-detected stall on CPU\n", []string{"RCU stall"}},
		{"hung task", "[ 242.0] INFO: task kworker/0:1:12 blocked for more than 120 seconds.\n", []string{"hung task"}},
		{"warning and oops", "[ 5.0] ------------[ cut here ]------------\n[ 5.0] WARNING: CPU: 1 PID: 80 at kernel/bpf/verifier.c:1234 foo+0x1/0x2\n[ 6.0] Oops: 0000 [#1] PREEMPT SMP NOPTI\n", []string{"WARNING", "Oops"}},
		{"BUG", "[ 5.0] BUG: kernel NULL pointer dereference, address: 0000000000000000\n", []string{"BUG"}},
		{"verifier bug", "[ 5.0] verifier backtracking bug\n", []string{"verifier bug"}},
		{"our own event lines are not the kernel's", "TANDEM-VM {\"name\":\"failed\",\"detail\":\"WARNING: soft lockup in the workload\"}\n", nil},
	} {
		t.Run(tc.name, func(t *testing.T) {
			var got []string
			for _, w := range FindKernelWarnings(tc.log) {
				got = append(got, w.Kind)
			}
			if !slices.Equal(got, tc.want) {
				t.Errorf("kinds %q, want %q", got, tc.want)
			}
		})
	}
}

func TestWarningExcerpt(t *testing.T) {
	var b strings.Builder
	b.WriteString("[ 1.0] booting\n")
	for i := 0; i < 50; i++ {
		fmt.Fprintf(&b, "[ %d.0] watchdog: BUG: soft lockup - CPU#%d stuck for %ds! [tandem-sampler:97]\n", 27+i, i%2, 22+i)
		fmt.Fprintf(&b, "[ %d.0] RIP: 0010:finish_task_switch+0x%x\n", 27+i, i)
	}
	ws := FindKernelWarnings(b.String())
	if len(ws) != 1 {
		t.Fatalf("warnings %+v, want one soft lockup", ws)
	}
	w := ws[0]
	if len(w.Lines) != excerptLines || !strings.Contains(w.Lines[0], "stuck for 22s") || !strings.Contains(w.Lines[1], "RIP") {
		t.Errorf("excerpt %q: want %d lines from the first message on", w.Lines, excerptLines)
	}
	if w.Repeats != 49 {
		t.Errorf("repeats %d, want 49", w.Repeats)
	}
	if s := w.String(); !strings.HasPrefix(s, "kernel warning (soft lockup, 49 more lines of that kind):\n[ 27.0] watchdog") {
		t.Errorf("String() = %q", s)
	}
}

// TestConsoleWarningFailsAwait: a kernel warning on the console ends the
// wait for any event with the warning's excerpt.
func TestConsoleWarningFailsAwait(t *testing.T) {
	in := "TANDEM-VM {\"name\":\"booted\"}\n[ 30.0] rcu: INFO: rcu_preempt detected stalls on CPUs/tasks:\n[ 30.0] \t1-...!: (0 ticks this GP)\n"
	v := &VM{events: make(chan Event, 8), done: make(chan struct{})}
	scanEvents(strings.NewReader(in), io.Discard, v.events, &v.warn)
	if _, err := v.Await(EventBooted, "boot", time.Minute); err != nil {
		t.Fatal(err)
	}
	_, err := v.Await(EventSamplerReady, "the sampler's readiness", time.Minute)
	if !errors.Is(err, ErrKernelWarning) || !strings.Contains(err.Error(), "rcu_preempt detected stalls") || !strings.Contains(err.Error(), "(0 ticks this GP)") {
		t.Errorf("err %v, want the RCU stall's excerpt", err)
	}
}

func TestSelectTargets(t *testing.T) {
	def, err := SelectTargets("")
	if err != nil {
		t.Fatal(err)
	}
	arches := map[string]bool{}
	for _, tg := range def {
		arches[tg.Arch] = true
	}
	if len(def) < 2 || !arches["amd64"] || !arches["arm64"] {
		t.Errorf("make test's kernels %+v: want at least two, amd64 and arm64", def)
	}
	all, _ := SelectTargets("all")
	if len(all) != len(Matrix) {
		t.Errorf("all: %d targets, want %d", len(all), len(Matrix))
	}
	some, err := SelectTargets("6.12-rt, 6.1")
	if err != nil || len(some) != 2 || some[0].Name != "6.12-rt" || some[1].Name != "6.1" {
		t.Errorf("a list: %+v, %v", some, err)
	}
	if _, err := SelectTargets("5.4"); err == nil || !strings.Contains(err.Error(), "6.12-cloud") {
		t.Errorf("an unknown kernel: err %v, want the matrix's names", err)
	}
	names := map[string]bool{}
	for _, tg := range Matrix {
		if names[tg.Name] {
			t.Errorf("two targets named %s", tg.Name)
		}
		names[tg.Name] = true
		if _, err := MachineFor(tg.Arch); err != nil {
			t.Error(err)
		}
		if _, ok := compilers[tg.Arch]; !ok {
			t.Errorf("%s: no compiler for %s", tg.Name, tg.Arch)
		}
	}
}

func TestCachedKernel(t *testing.T) {
	cache := t.TempDir()
	target := Target{Name: "6.1", Arch: "amd64"}
	if _, err := CachedKernel(cache, target); !errors.Is(err, ErrNotCached) || !strings.Contains(err.Error(), "make tools") {
		t.Errorf("empty cache: err %v", err)
	}
	pkg := filepath.Join(cache, "linux-image-6.1.0-57-amd64_6.1.192-3_amd64")
	mods := filepath.Join(pkg, "lib", "modules", "6.1.0-57-amd64")
	for _, d := range []string{filepath.Join(pkg, "boot"), mods} {
		if err := os.MkdirAll(d, 0o755); err != nil {
			t.Fatal(err)
		}
	}
	for _, f := range []string{filepath.Join(pkg, "boot", "vmlinuz-6.1.0-57-amd64"), filepath.Join(mods, "modules.dep")} {
		if err := os.WriteFile(f, nil, 0o644); err != nil {
			t.Fatal(err)
		}
	}
	if err := os.Symlink(filepath.Base(pkg), filepath.Join(cache, "6.1")); err != nil {
		t.Fatal(err)
	}
	if _, err := CachedKernel(cache, target); !errors.Is(err, ErrNotCached) {
		t.Errorf("an incomplete directory: err %v, want ErrNotCached", err)
	}
	if err := os.WriteFile(filepath.Join(pkg, CompleteMarker), nil, 0o644); err != nil {
		t.Fatal(err)
	}
	k, err := CachedKernel(cache, target)
	if err != nil {
		t.Fatal(err)
	}
	if k.Release != "6.1.0-57-amd64" || k.Arch != "amd64" || k.Image != filepath.Join(pkg, "boot", "vmlinuz-6.1.0-57-amd64") {
		t.Errorf("kernel %+v", k)
	}
}

func TestTCGThreadOption(t *testing.T) {
	if got := tcgThreadOption(Machines["amd64"]); got != ",thread=single" {
		t.Errorf("amd64 under TCG: %q, want single-threaded", got)
	}
	if got := tcgThreadOption(Machines["arm64"]); got != "" {
		t.Errorf("arm64 under TCG: %q, want qemu's default", got)
	}
	t.Setenv(TCGThreadEnv, "multi")
	if got := tcgThreadOption(Machines["amd64"]); got != ",thread=multi" {
		t.Errorf("with %s=multi: %q", TCGThreadEnv, got)
	}
}
