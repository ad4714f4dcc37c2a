package confine

import (
	"encoding/json"
	"fmt"
	"slices"
	"strings"
)

// ociProfile is the seccomp profile format of OCI runtimes (runc, crun)
// and the kubelet's Localhost profiles.
type ociProfile struct {
	DefaultAction string       `json:"defaultAction"`
	Syscalls      []ociSyscall `json:"syscalls"`
}

type ociSyscall struct {
	Names    []string `json:"names"`
	Action   string   `json:"action"`
	ErrnoRet uint     `json:"errnoRet"`
	Args     []ociArg `json:"args,omitempty"`
	Comment  string   `json:"comment"`
}

type ociArg struct {
	Index uint32 `json:"index"`
	Value uint64 `json:"value"`
	Op    string `json:"op"`
}

var ociOps = map[Op]string{Equal: "SCMP_CMP_EQ", NotEqual: "SCMP_CMP_NE"}

// errnoEPERM is the errno every denied call returns.
const errnoEPERM = 1

// OCIProfile returns the seccomp profile a container runtime applies to
// role from its first instruction: the rules that apply Always. Without
// an architectures list the runtime admits only the native one, so calls
// through another architecture's entry are refused too.
func OCIProfile(role Role) ([]byte, error) {
	p := ociProfile{DefaultAction: "SCMP_ACT_ALLOW", Syscalls: []ociSyscall{}}
	for _, r := range Denied(role, Always) {
		s := ociSyscall{Names: r.Names, Action: "SCMP_ACT_ERRNO", ErrnoRet: errnoEPERM, Comment: r.Why}
		if r.Cond != nil {
			s.Args = []ociArg{{Index: r.Cond.Arg, Value: r.Cond.Value, Op: ociOps[r.Cond.Op]}}
		}
		p.Syscalls = append(p.Syscalls, s)
	}
	out, err := json.MarshalIndent(p, "", "  ")
	if err != nil {
		return nil, fmt.Errorf("encode the %s seccomp profile: %w", role, err)
	}
	return append(out, '\n'), nil
}

// SystemdFilter returns the SystemCallFilter= line of role's unit: the
// calls the Always rules deny outright. systemd cannot compare arguments,
// so a rule with a condition is left to the in-process filter (the
// sampler's unit restricts socket families with RestrictAddressFamilies=).
func SystemdFilter(role Role) string {
	var names []string
	for _, r := range Denied(role, Always) {
		if r.Cond == nil {
			names = append(names, r.Names...)
		}
	}
	slices.Sort(names)
	return "SystemCallFilter=~" + strings.Join(slices.Compact(names), " ")
}
