package confine

import (
	seccomp "github.com/elastic/go-seccomp-bpf"
)

var seccompOps = map[Op]seccomp.Operation{Equal: seccomp.Equal, NotEqual: seccomp.NotEqual}

// Policy returns role's in-process seccomp policy: every rule that
// applies to it (AfterStart and Always), EPERM, everything else allowed.
func Policy(role Role) (seccomp.Policy, error) {
	p := seccomp.Policy{DefaultAction: seccomp.ActionAllow}
	for _, r := range Denied(role, AfterStart) {
		g := seccomp.SyscallGroup{Action: seccomp.ActionErrno}
		if r.Cond == nil {
			g.Names = r.Names
		} else {
			for _, n := range r.Names {
				g.NamesWithCondtions = append(g.NamesWithCondtions, seccomp.NameWithConditions{
					Name: n,
					Conditions: seccomp.ArgumentConditions{{
						Argument: r.Cond.Arg, Operation: seccompOps[r.Cond.Op], Value: r.Cond.Value,
					}},
				})
			}
		}
		p.Syscalls = append(p.Syscalls, g)
	}
	// Assemble checks every name against the native table.
	if _, err := p.Assemble(); err != nil {
		return p, err
	}
	return p, nil
}
