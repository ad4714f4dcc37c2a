package repo

import (
	"net"
	"strings"
	"testing"

	corev1 "k8s.io/api/core/v1"

	"github.com/tandem-profiler/tandem/internal/cli"
)

// TestChartListensOnIPv6Pods: the encoder's listen address, with the
// $(VAR) references the kubelet expands filled in for a pod whose IP is
// IPv6, is one the encoder accepts and can listen on (an $(POD_IP):PORT
// address was not: "too many colons", exit 2 on every node).
func TestChartListensOnIPv6Pods(t *testing.T) {
	m, _ := render(t, nil)
	spec := &m.daemonSets[0].Spec.Template.Spec
	enc := containerByName(t, spec, "encoder")
	fields := map[string]string{"status.podIP": "fd00::1", "status.podIPs": "fd00::1", "status.hostIP": "fd00::2", "spec.nodeName": "node-a"}
	var refs []string
	for _, e := range enc.Env {
		v := e.Value
		if e.ValueFrom != nil && e.ValueFrom.FieldRef != nil {
			v = fields[e.ValueFrom.FieldRef.FieldPath]
		}
		refs = append(refs, "$("+e.Name+")", v)
	}
	expand := strings.NewReplacer(refs...)
	addrs := args(enc, "--http-address")
	if len(addrs) != 1 {
		t.Fatalf("encoder --http-address = %q, want one", addrs)
	}
	addr := expand.Replace(addrs[0])
	if err := cli.CheckHostPort(addr); err != nil {
		t.Fatalf("an IPv6 pod's encoder would exit 2: --http-address: %v", err)
	}
	host, _, _ := net.SplitHostPort(addr)
	ln, err := net.Listen("tcp", net.JoinHostPort(host, "0"))
	if err != nil {
		t.Fatalf("listen on %s (port 0 here): %v", addr, err)
	}
	ln.Close()
	checkNoPodIPListener(t, enc)
}

// checkNoPodIPListener: kubectl port-forward dials the pod's loopback, so
// a listener bound to the pod IP alone cannot be reached by it.
func checkNoPodIPListener(t *testing.T, c *corev1.Container) {
	t.Helper()
	for _, a := range args(c, "--http-address") {
		if host, _, err := net.SplitHostPort(a); err != nil || (host != "" && host != "::" && host != "0.0.0.0") {
			t.Errorf("encoder --http-address=%s: want :PORT, every address of the pod's network namespace (port-forward dials its loopback)", a)
		}
	}
}
