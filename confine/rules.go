package confine

import "fmt"

// Role is a Tandem process the rules confine.
type Role int

const (
	// Sampler is tandem-sampler: root, loads the tracer, then only reads
	// /proc and process memory, updates BPF maps and writes a Unix socket.
	Sampler Role = iota
	// Encoder is tandem-encoder: unprivileged, parses untrusted bytes and
	// talks to the network.
	Encoder
)

// Roles lists every role, in order.
var Roles = []Role{Sampler, Encoder}

func (r Role) String() string {
	switch r {
	case Sampler:
		return "sampler"
	case Encoder:
		return "encoder"
	}
	return fmt.Sprintf("Role(%d)", int(r))
}

// When says when a rule denies its calls for a role.
type When int

const (
	// Never: the role needs the calls.
	Never When = iota
	// AfterStart: in-process only, installed once the role has started
	// (the sampler's tracer samples, the encoder listens); start-up or
	// the runtime starting the binary still needs the calls.
	AfterStart
	// Always: in-process and in the runtime's profile.
	Always
)

// Op compares a system-call argument with a value.
type Op int

const (
	// Equal matches when the argument equals the value.
	Equal Op = iota
	// NotEqual matches when the argument differs from the value.
	NotEqual
)

// Cond restricts a rule to calls whose argument Arg (0-based) compares
// with Value by Op.
type Cond struct {
	Arg   uint32
	Op    Op
	Value uint64
}

// Rule denies the system calls Names (with Cond, only the calls that match
// it) for each role as its When says.
type Rule struct {
	Names []string
	// Cond, if not nil, limits the rule to matching calls.
	Cond *Cond
	// Why says what the calls would give an attacker.
	Why     string
	Sampler When
	Encoder When
}

// When returns when the rule applies to role.
func (r *Rule) When(role Role) When {
	if role == Sampler {
		return r.Sampler
	}
	return r.Encoder
}

// Argument values the rules compare with (linux/socket.h, linux/bpf.h).
const (
	afUnix      = 1
	bpfProgLoad = 5
)

// Rules is the one list: the in-process filters, the OCI profiles, the
// systemd units and docs/security.md come from it.
var Rules = []Rule{
	{
		Names:   []string{"socket"},
		Cond:    &Cond{Arg: 0, Op: NotEqual, Value: afUnix},
		Why:     "network and netlink sockets: the sampler only talks over a Unix socket (its tracer opens one netlink socket while it starts)",
		Sampler: AfterStart,
	},
	{
		Names:   []string{"execve", "execveat"},
		Why:     "running another program (a shell); the runtime needs execve to start the binary",
		Sampler: AfterStart, Encoder: AfterStart,
	},
	{
		Names:   []string{"ptrace"},
		Why:     "controlling and writing other processes",
		Sampler: Always, Encoder: Always,
	},
	{
		Names:   []string{"process_vm_writev"},
		Why:     "writing other processes' memory",
		Sampler: Always, Encoder: Always,
	},
	{
		Names:   []string{"process_vm_readv"},
		Why:     "reading other processes' memory: the sampler's unwinders need it, the encoder never does",
		Encoder: Always,
	},
	{
		Names: []string{"mount", "umount2", "pivot_root", "chroot", "move_mount", "open_tree",
			"fsopen", "fsconfig", "fsmount", "fspick", "mount_setattr"},
		Why:     "changing the mount table; the sampler mounts tracefs while it starts when it is missing",
		Sampler: AfterStart, Encoder: Always,
	},
	{
		Names:   []string{"init_module", "finit_module", "delete_module", "kexec_load", "kexec_file_load"},
		Why:     "loading code into the kernel or replacing it",
		Sampler: Always, Encoder: Always,
	},
	{
		Names: []string{"setuid", "setgid", "setreuid", "setregid", "setresuid", "setresgid",
			"setfsuid", "setfsgid", "setgroups"},
		Why:     "changing identity; the runtime sets the encoder's user before it starts the binary",
		Sampler: AfterStart, Encoder: AfterStart,
	},
	{
		Names:   []string{"keyctl", "add_key", "request_key"},
		Why:     "the kernel keyring (credentials of other services)",
		Sampler: Always, Encoder: Always,
	},
	{
		Names:   []string{"userfaultfd"},
		Why:     "stalling the kernel at will, a staple of kernel exploits",
		Sampler: Always, Encoder: Always,
	},
	{
		Names:   []string{"reboot", "swapon", "swapoff"},
		Why:     "rebooting the node, changing its swap",
		Sampler: Always, Encoder: Always,
	},
	{
		Names:   []string{"open_by_handle_at"},
		Why:     "opening any file by handle, past mount namespaces (with the sampler's CAP_DAC_READ_SEARCH)",
		Sampler: Always, Encoder: Always,
	},
	{
		Names:   []string{"bpf"},
		Cond:    &Cond{Arg: 0, Op: Equal, Value: bpfProgLoad},
		Why:     "loading eBPF programs: the tracer loads all of its programs while it starts, then only creates and updates maps",
		Sampler: AfterStart,
	},
	{
		Names:   []string{"bpf", "perf_event_open"},
		Why:     "eBPF and perf events: the encoder needs neither",
		Encoder: Always,
	},
}

// Denied returns the rules that apply to role at or beyond when: for
// AfterStart, every rule the role's in-process filter holds; for Always,
// those the runtime's profile holds.
func Denied(role Role, when When) []Rule {
	var out []Rule
	for _, r := range Rules {
		w := r.When(role)
		if w == Never || w < when {
			continue
		}
		out = append(out, r)
	}
	return out
}
