package kube

import (
	"log/slog"
	"net/http"
	"strings"
	"testing"

	"github.com/prometheus/client_golang/prometheus"
	"github.com/prometheus/client_golang/prometheus/testutil"

	"github.com/tandem-profiler/tandem/test/kubetest"
	"github.com/tandem-profiler/tandem/test/waittest"
)

// TestForbiddenLookupStaysVisible: against a real-HTTP API server whose
// RBAC forbids GET of ReplicaSets (a 403 with the API server's Status),
// the warning names the lookup and the ClusterRole rule to add, and stays
// while pod watches succeed; a transient error (503) on the pod watch is
// cleared by the next success. Only a GET of a ReplicaSet that succeeds
// clears the forbidden warning.
func TestForbiddenLookupStaysVisible(t *testing.T) {
	const token = "s3cret"
	api := kubetest.Start(t, token, node)
	getRS := kubetest.Access{Verb: "get", Group: "apps", Resource: "replicasets"}
	api.Forbid(getRS)
	api.SetReplicaSet(testRS())
	p := testPod()
	api.SetPod(p)

	cfg := DefaultConfig()
	cfg.Mode, cfg.Kubeconfig, cfg.Node = ModeOn, api.Kubeconfig(t, t.TempDir()), node
	reg := prometheus.NewRegistry()
	in, err := New(cfg, slog.New(slog.DiscardHandler), reg)
	if err != nil {
		t.Fatal(err)
	}
	f := runFixture(t, in, reg)

	forbidden := func() float64 {
		return testutil.ToFloat64(in.m.forbidden.WithLabelValues("get", "replicasets.apps"))
	}
	// The pod is published after its owner lookup: the 403 came first.
	waittest.For(t, "the pod", func() bool { return in.Lookup(hexID('a')) != nil })
	w := in.Warning()
	for _, want := range []string{
		"kubernetes get replicasets.apps forbidden (403)",
		`cannot get resource "replicasets" in API group "apps" in the namespace "shop"`, // the API server's message
		`{apiGroups: ["apps"], resources: ["replicasets"], verbs: ["get"]}`,
		"pod-template-hash",
	} {
		if !strings.Contains(w, want) {
			t.Errorf("warning lacks %q:\n%s", want, w)
		}
	}
	if n := testutil.ToFloat64(in.m.apiErrors.WithLabelValues(ErrForbidden)); n != 1 {
		t.Errorf("forbidden errors %v, want 1", n)
	}
	if g := forbidden(); g != 1 {
		t.Errorf("tandem_encoder_kubernetes_forbidden{get,replicasets.apps} = %v, want 1", g)
	}

	// A transient error: the next pod watch is answered 503. It shows
	// next to the forbidden lookup, and the next list or watch that
	// succeeds clears it, not the forbidden lookup's warning.
	api.FailNext("pods", http.StatusServiceUnavailable)
	api.EndWatches()
	waittest.For(t, "the 503", func() bool { return testutil.ToFloat64(in.m.apiErrors.WithLabelValues(ErrOther)) >= 1 })
	waittest.For(t, "a pod request succeeding after the 503", func() bool { return !strings.Contains(in.Warning(), "etcd is unavailable") })
	if w := in.Warning(); strings.Count(w, "\n") != 0 || !strings.Contains(w, "get replicasets.apps forbidden (403)") {
		t.Errorf("after a pod request succeeded, warning %q, want the forbidden lookup's alone", w)
	}
	if g := forbidden(); g != 1 {
		t.Errorf("forbidden gauge %v after a pod request succeeded, want 1", g)
	}

	// The rule is added: the lookup is retried (after ownerRetry), succeeds
	// and clears the warning.
	api.Allow(getRS)
	f.clock.add(ownerRetry)
	p.Labels["rollout"] = "2" // an update: the pod is processed at once
	api.SetPod(p)
	waittest.For(t, "the warning to clear", func() bool { return in.Warning() == "" })
	if g := forbidden(); g != 0 {
		t.Errorf("forbidden gauge %v after the lookup succeeded, want 0", g)
	}
	var status int
	for _, r := range api.Requests() {
		if strings.HasSuffix(r.Path, "/replicasets/web-7d9f8") {
			status = r.Status
		}
	}
	if status != http.StatusOK {
		t.Errorf("last ReplicaSet GET answered %d, want 200", status)
	}
}
