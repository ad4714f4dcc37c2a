package sampler

import "strings"

// cgroupLabels are the labels derived from /proc/PID/cgroup.
type cgroupLabels struct {
	ContainerID string
	SystemdUnit string
}

// parseCgroup extracts the container id and the systemd unit from the
// content of /proc/PID/cgroup ("hierarchy-id:controllers:path" lines).
//
// The systemd unit comes from the systemd hierarchy: the cgroup v2 line
// ("0::path") or, on hybrid hosts, the v1 "name=systemd" line, which wins
// because there the v2 path is not managed by systemd. The container id is
// the first id found on any line (see containerIDFromPath).
func parseCgroup(content string) cgroupLabels {
	var l cgroupLabels
	var v2Path, systemdPath string
	haveSystemd := false
	for line := range strings.SplitSeq(content, "\n") {
		id, rest, ok := strings.Cut(line, ":")
		if !ok {
			continue
		}
		controllers, path, ok := strings.Cut(rest, ":")
		if !ok {
			continue
		}
		switch {
		case id == "0" && controllers == "":
			v2Path = path
		case controllers == "name=systemd":
			systemdPath, haveSystemd = path, true
		}
		if l.ContainerID == "" {
			l.ContainerID = containerIDFromPath(path)
		}
	}
	if !haveSystemd {
		systemdPath = v2Path
	}
	l.SystemdUnit = systemdUnitFromPath(systemdPath)
	return l
}

// containerRuntimePrefixes are the prefixes container runtimes give the
// last element of a container's cgroup (systemd cgroup driver):
// docker-<id>.scope, cri-containerd-<id>.scope, crio-<id>.scope,
// libpod-<id>.scope.
var containerRuntimePrefixes = []string{"docker-", "cri-containerd-", "crio-", "libpod-", "containerd-"}

// containerIDFromPath returns the container id in a cgroup path, or "".
// It recognizes a 64-hex-digit element, bare (cgroupfs driver:
// /docker/<id>, /kubepods/burstable/pod<uid>/<id>) or with a runtime prefix
// and a .scope suffix (systemd driver). The innermost match wins (nested
// containers). CRI-O's monitor scope (crio-conmon-<id>.scope) is not the
// container.
func containerIDFromPath(path string) string {
	for path != "" {
		i := strings.LastIndexByte(path, '/')
		elem := path[i+1:]
		if i < 0 {
			path = ""
		} else {
			path = path[:i]
		}
		elem = strings.TrimSuffix(elem, ".scope")
		if strings.HasPrefix(elem, "crio-conmon-") {
			continue
		}
		for _, p := range containerRuntimePrefixes {
			if strings.HasPrefix(elem, p) {
				elem = elem[len(p):]
				break
			}
		}
		if isContainerID(elem) {
			return elem
		}
	}
	return ""
}

func isContainerID(s string) bool {
	if len(s) != 64 {
		return false
	}
	for i := range len(s) {
		c := s[i]
		if (c < '0' || c > '9') && (c < 'a' || c > 'f') {
			return false
		}
	}
	return true
}

// systemdUnitFromPath returns the innermost service unit of a systemd
// cgroup path: /system.slice/foo.service -> foo.service,
// /user.slice/user-1000.slice/user@1000.service/app.slice/bar.service ->
// bar.service. Paths without a service (scopes, slices, the root) give "".
func systemdUnitFromPath(path string) string {
	for path != "" {
		i := strings.LastIndexByte(path, '/')
		elem := path[i+1:]
		if strings.HasSuffix(elem, ".service") && len(elem) > len(".service") {
			return elem // escapes such as \x2d are part of the unit name
		}
		if i < 0 {
			return ""
		}
		path = path[:i]
	}
	return ""
}
