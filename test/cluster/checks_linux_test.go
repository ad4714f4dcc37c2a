package cluster

import (
	"bufio"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"math/bits"
	"net/url"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"syscall"
	"testing"

	"github.com/google/pprof/profile"
	"helm.sh/helm/v3/pkg/chart"
	authv1 "k8s.io/api/authorization/v1"
	corev1 "k8s.io/api/core/v1"
	rbacv1 "k8s.io/api/rbac/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"sigs.k8s.io/yaml"

	"github.com/tandem-profiler/tandem/test/otlptest"
	"github.com/tandem-profiler/tandem/test/parcatest"
	"github.com/tandem-profiler/tandem/tools/helmchart"
	"github.com/tandem-profiler/tandem/tools/release"
	"golang.org/x/sys/unix"
)

// checkWarnings: Pod Security admission (warn: restricted on the chart's
// namespace) names the sampler, which needs more than "restricted", and
// never the encoder.
func checkWarnings(t *testing.T, warnings []string) {
	t.Logf("API server warnings at install: %q", warnings)
	for _, w := range warnings {
		if strings.Contains(w, `"encoder"`) {
			t.Errorf("a Pod Security warning names the encoder container: %s", w)
		}
	}
}

// checkNamed: the workload's samples carry its namespace, pod, container
// and Deployment, which the encoder looked up with its own token.
func checkNamed(ctx context.Context, t *testing.T, c *Cluster, recv *otlptest.Receiver) {
	pods, err := c.Client().CoreV1().Pods(workloadNS).List(ctx, metav1.ListOptions{LabelSelector: "app=" + workload})
	if err != nil || len(pods.Items) != 1 {
		t.Fatalf("the workload's pod: %v (%d pods)", err, len(pods.Items))
	}
	want := map[string]string{
		"k8s.namespace.name":  workloadNS,
		"k8s.pod.name":        pods.Items[0].Name,
		"k8s.container.name":  workload,
		"k8s.deployment.name": workload,
	}
	named := workloadNamed(recv, 0, false)
	for _, r := range named {
		for k, v := range want {
			if r.Attributes[k] != v {
				t.Errorf("a resource with the workload's samples has %s=%q, want %q (attributes %v)", k, r.Attributes[k], v, r.Attributes)
				return
			}
		}
	}
	t.Logf("%d resources name the workload: %v", len(named), want)
}

func procStatus(t *testing.T, pid int) map[string]string {
	t.Helper()
	f, err := os.Open(fmt.Sprintf("/proc/%d/status", pid))
	if err != nil {
		t.Fatalf("read the status of pid %d: %v", pid, err)
	}
	defer f.Close()
	out := map[string]string{}
	sc := bufio.NewScanner(f)
	for sc.Scan() {
		k, v, _ := strings.Cut(sc.Text(), ":")
		out[k] = strings.TrimSpace(v)
	}
	return out
}

func capMask(t *testing.T, hex string) uint64 {
	t.Helper()
	v, err := strconv.ParseUint(hex, 16, 64)
	if err != nil {
		t.Fatalf("capability mask %q: %v", hex, err)
	}
	return v
}

// capabilityBits are the numbers of the capabilities the chart may name.
var capabilityBits = map[string]int{
	"BPF": unix.CAP_BPF, "PERFMON": unix.CAP_PERFMON, "SYS_PTRACE": unix.CAP_SYS_PTRACE,
	"CHECKPOINT_RESTORE": unix.CAP_CHECKPOINT_RESTORE, "SYSLOG": unix.CAP_SYSLOG,
	"DAC_READ_SEARCH": unix.CAP_DAC_READ_SEARCH, "SYS_ADMIN": unix.CAP_SYS_ADMIN,
	"SYS_RESOURCE": unix.CAP_SYS_RESOURCE, "NET_ADMIN": unix.CAP_NET_ADMIN,
}

// chartObject decodes the first object of kind the installed chart
// renders into out.
func chartObject(t *testing.T, ch *chart.Chart, p *release.Pushed, kind string, out any) {
	t.Helper()
	r, err := helmchart.RenderChart(ch, helmchart.Release{Name: releaseName, Namespace: tandemNS}, chartValues(p, "127.0.0.1:1", "127.0.0.1:2", 19))
	if err != nil {
		t.Fatal(err)
	}
	for _, m := range r.Manifests {
		if m.Kind == kind {
			if err := yaml.Unmarshal([]byte(m.YAML), out); err != nil {
				t.Fatal(err)
			}
			return
		}
	}
	t.Fatalf("the chart renders no %s", kind)
}

// checkSampler: the sampler's bounding set is exactly the chart's
// capabilities, and it holds none beyond them.
func checkSampler(t *testing.T, pid int, ch *chart.Chart, p *release.Pushed) {
	var ds struct {
		Spec struct {
			Template struct{ Spec corev1.PodSpec }
		}
	}
	chartObject(t, ch, p, "DaemonSet", &ds)
	var want uint64
	for _, ct := range ds.Spec.Template.Spec.Containers {
		if ct.Name != "sampler" {
			continue
		}
		for _, name := range ct.SecurityContext.Capabilities.Add {
			bit, ok := capabilityBits[string(name)]
			if !ok {
				t.Fatalf("the chart adds %s, which the test has no number for", name)
			}
			want |= 1 << bit
		}
	}
	st := procStatus(t, pid)
	if got := capMask(t, st["CapBnd"]); got != want {
		t.Errorf("sampler CapBnd %#x (%d capabilities), want exactly the chart's %#x (%d)", got, bits.OnesCount64(got), want, bits.OnesCount64(want))
	}
	for _, key := range []string{"CapEff", "CapPrm"} {
		if got := capMask(t, st[key]); got&^want != 0 {
			t.Errorf("sampler %s %#x holds capabilities beyond the chart's %#x", key, got, want)
		}
	}
	if st["NoNewPrivs"] != "1" {
		t.Errorf("sampler NoNewPrivs %s, want 1", st["NoNewPrivs"])
	}
	rootReadOnly(t, "sampler", pid)
}

// rootReadOnly fails unless the container's root filesystem refuses a
// write from root on the host (through /proc/<pid>/root) with EROFS.
func rootReadOnly(t *testing.T, name string, pid int) {
	probe := fmt.Sprintf("/proc/%d/root/clustertest-write-probe", pid)
	err := os.WriteFile(probe, []byte("x"), 0o644)
	if err == nil {
		os.Remove(probe)
		t.Errorf("%s: root wrote %s: the root filesystem is writable", name, probe)
	} else if !errors.Is(err, unix.EROFS) {
		t.Errorf("%s: writing %s: %v, want EROFS (read-only file system)", name, probe, err)
	}
}

func checkEncoder(t *testing.T, pid int) {
	st := procStatus(t, pid)
	if uids := strings.Fields(st["Uid"]); len(uids) == 0 || uids[1] != "65532" {
		t.Errorf("encoder Uid %s, want 65532", st["Uid"])
	}
	for _, key := range []string{"CapEff", "CapPrm", "CapBnd"} {
		if m := capMask(t, st[key]); m != 0 {
			t.Errorf("encoder %s %#x, want 0", key, m)
		}
	}
	if st["NoNewPrivs"] != "1" || st["Seccomp"] != "2" {
		t.Errorf("encoder NoNewPrivs %s Seccomp %s, want 1 and 2 (RuntimeDefault)", st["NoNewPrivs"], st["Seccomp"])
	}
	rootReadOnly(t, "encoder", pid)
}

// checkRBAC asks the authorizer, for a grid of verbs and resources,
// whether the encoder's service account may: yes exactly where the
// chart's ClusterRole says.
func checkRBAC(ctx context.Context, t *testing.T, c *Cluster, ch *chart.Chart, p *release.Pushed) {
	var role rbacv1.ClusterRole
	chartObject(t, ch, p, "ClusterRole", &role)
	allowed := func(group, resource, verb string) bool {
		for _, r := range role.Rules {
			if has(r.APIGroups, group) && has(r.Resources, resource) && has(r.Verbs, verb) {
				return true
			}
		}
		return false
	}
	resources := []struct{ group, resource, sub string }{
		{"", "pods", ""}, {"", "pods", "log"}, {"", "pods", "exec"}, {"", "secrets", ""}, {"", "configmaps", ""},
		{"", "nodes", ""}, {"", "serviceaccounts", "token"}, {"", "namespaces", ""}, {"", "services", ""},
		{"apps", "replicasets", ""}, {"apps", "deployments", ""}, {"apps", "daemonsets", ""},
		{"batch", "jobs", ""}, {"batch", "cronjobs", ""}, {"rbac.authorization.k8s.io", "clusterroles", ""},
	}
	verbs := []string{"get", "list", "watch", "create", "update", "patch", "delete"}
	var yes []string
	for _, ns := range []string{"", workloadNS} {
		for _, r := range resources {
			for _, v := range verbs {
				sar := &authv1.SubjectAccessReview{Spec: authv1.SubjectAccessReviewSpec{
					User:   encoderUser,
					Groups: []string{"system:serviceaccounts", "system:serviceaccounts:" + tandemNS, "system:authenticated"},
					ResourceAttributes: &authv1.ResourceAttributes{
						Namespace: ns, Verb: v, Group: r.group, Resource: r.resource, Subresource: r.sub,
					},
				}}
				got, err := c.Client().AuthorizationV1().SubjectAccessReviews().Create(ctx, sar, metav1.CreateOptions{})
				if err != nil {
					t.Fatal(err)
				}
				want := r.sub == "" && allowed(r.group, r.resource, v)
				what := fmt.Sprintf("%s %s/%s", v, r.group, r.resource)
				if r.sub != "" {
					what += "/" + r.sub
				}
				if ns != "" {
					what += " in " + ns
				}
				if got.Status.Allowed != want {
					t.Errorf("can-i %s as %s: %v, want %v (rbac.yaml)", what, encoderUser, got.Status.Allowed, want)
				}
				if got.Status.Allowed {
					yes = append(yes, what)
				}
			}
		}
	}
	t.Logf("the encoder's account may: %s", strings.Join(yes, ", "))
}

func has(list []string, s string) bool {
	for _, v := range list {
		if v == s || v == "*" {
			return true
		}
	}
	return false
}

// auditEvent is the part of an audit event the check reads.
type auditEvent struct {
	Stage      string
	Verb       string
	RequestURI string
	User       struct{ Username string }
	ObjectRef  *struct {
		Resource, Namespace, Name, APIGroup, Subresource string
	}
	ResponseStatus *struct{ Code int }
}

// checkAudit: every request of the encoder's account is node-scoped
// (pods listed and watched only with fieldSelector=spec.nodeName=<node>,
// owners read one by name) and none was refused.
func checkAudit(t *testing.T, c *Cluster) {
	f, err := os.Open(c.AuditLog())
	if err != nil {
		t.Fatal(err)
	}
	defer f.Close()
	sc := bufio.NewScanner(f)
	sc.Buffer(make([]byte, 1<<20), 1<<20)
	counts := map[string]int{}
	for sc.Scan() {
		var e auditEvent
		if err := json.Unmarshal(sc.Bytes(), &e); err != nil {
			t.Fatalf("audit log line: %v", err)
		}
		if e.User.Username != encoderUser || e.ObjectRef == nil {
			continue
		}
		if e.ResponseStatus != nil && e.ResponseStatus.Code >= 400 {
			t.Errorf("the encoder's request %s %s was refused: %d", e.Verb, e.RequestURI, e.ResponseStatus.Code)
		}
		if e.Stage != "ResponseComplete" && e.Stage != "ResponseStarted" {
			continue
		}
		key := e.Verb + " " + e.ObjectRef.APIGroup + "/" + e.ObjectRef.Resource
		counts[key]++
		switch {
		case e.ObjectRef.Resource == "pods" && (e.Verb == "list" || e.Verb == "watch"):
			u, err := url.Parse(e.RequestURI)
			if err != nil {
				t.Fatal(err)
			}
			if fs := u.Query().Get("fieldSelector"); fs != "spec.nodeName="+c.Config.NodeName {
				t.Errorf("the encoder %s pods with fieldSelector %q, not its node's (%s)", e.Verb, fs, e.RequestURI)
			}
		case e.Verb == "get" && e.ObjectRef.Name != "" && (e.ObjectRef.Resource == "replicasets" || e.ObjectRef.Resource == "jobs"):
		default:
			t.Errorf("the encoder made a request beyond its node's pods and their owners: %s %s", e.Verb, e.RequestURI)
		}
	}
	if err := sc.Err(); err != nil {
		t.Fatal(err)
	}
	if counts["list /pods"]+counts["watch /pods"] == 0 || counts["get apps/replicasets"] == 0 {
		t.Errorf("the audit log holds no pod list or watch and no ReplicaSet get by the encoder: %v", counts)
	}
	t.Logf("the encoder's requests: %v", counts)
}

// logMemory reports each container's memory as its cgroup (made by the
// kubelet and runc) counts it, beside the chart's requests and limits.
func logMemory(ctx context.Context, t *testing.T, c *Cluster, pod *corev1.Pod) {
	for _, s := range pod.Spec.Containers {
		pid := containerPID(ctx, t, c, pod, s.Name)
		b, err := os.ReadFile(fmt.Sprintf("/proc/%d/cgroup", pid))
		if err != nil {
			t.Fatal(err)
		}
		var dir string
		for _, l := range strings.Split(string(b), "\n") {
			if f := strings.SplitN(l, ":", 3); len(f) == 3 && f[1] == "memory" {
				dir = filepath.Join("/sys/fs/cgroup/memory", f[2])
			}
		}
		read := func(name string) *uint64 {
			b, err := os.ReadFile(filepath.Join(dir, name))
			if err != nil {
				return nil
			}
			v, err := strconv.ParseUint(strings.TrimSpace(string(b)), 10, 64)
			if err != nil {
				return nil
			}
			return &v
		}
		var rss *uint64
		if st, err := os.ReadFile(filepath.Join(dir, "memory.stat")); err == nil {
			for _, l := range strings.Split(string(st), "\n") {
				if v, ok := strings.CutPrefix(l, "total_rss "); ok {
					n, _ := strconv.ParseUint(v, 10, 64)
					rss = &n
				}
			}
		}
		t.Logf("memory %s (cgroup %s): usage %s, peak %s, RSS %s (chart: request %s, limit %s)", s.Name, dir,
			mib(read("memory.usage_in_bytes")), mib(read("memory.max_usage_in_bytes")), mib(rss),
			s.Resources.Requests.Memory().String(), s.Resources.Limits.Memory().String())
	}
}

func mib(v *uint64) string {
	if v == nil {
		return "?"
	}
	return fmt.Sprintf("%.1f MiB", float64(*v)/(1<<20))
}

// checkBalance replays the old pod's sampler recording (everything it
// produced, across the encoder's kill and up to its goodbye) through the
// encoder binary and compares the number of samples with what the
// receiver stored from the old pod (the profiles of the old period):
// equal means every sample was delivered, once, and none lost, across
// the SIGKILL (the sampler resends what was not acknowledged) and the
// upgrade (the old encoder reads its sampler's last batches and goodbye
// before its final flush: pipeline.ServeConfig.DrainTimeout).
func checkBalance(t *testing.T, rec *os.File, encoderBin string, recv *otlptest.Receiver, dir string, oldLogs func() string) {
	if err := os.MkdirAll(dir, 0o755); err != nil {
		t.Fatal(err)
	}
	copyPath := filepath.Join(dir, "sampler.rec")
	out, err := os.Create(copyPath)
	if err != nil {
		t.Fatal(err)
	}
	n, err := io.Copy(out, io.NewSectionReader(rec, 0, 1<<40))
	out.Close()
	if err != nil {
		t.Fatalf("copy the recording: %v", err)
	}
	cmd := exec.Command(encoderBin, "replay", "--output-dir", dir, "--profiling-duration", "1h", copyPath)
	if b, err := cmd.CombinedOutput(); err != nil {
		t.Fatalf("replay the sampler's recording: %v\n%s", err, b)
	}
	paths, _ := filepath.Glob(filepath.Join(dir, "*.pb.gz"))
	var recorded int64
	var period int64
	for _, p := range paths {
		f, err := os.Open(p)
		if err != nil {
			t.Fatal(err)
		}
		prof, err := profile.Parse(f)
		f.Close()
		if err != nil {
			t.Fatal(err)
		}
		period = prof.Period
		for _, s := range prof.Sample {
			recorded += s.Value[0]
		}
	}
	var delivered, later int64
	periods := map[int64]int64{}
	for _, r := range recv.Resources() {
		p := r.Profiles[0]
		var obs int64
		for _, s := range p.Samples {
			obs += int64(len(s.Timestamps))
		}
		periods[p.Period] += obs
		if p.Period == period {
			delivered += obs
		} else {
			later += obs
		}
	}
	t.Logf("the old pod's sampler recorded %d samples (%d bytes, period %d); the receiver stored %d of that period, %d of the new pod's; by period %v; duplicates %d",
		recorded, n, period, delivered, later, periods, recv.Duplicates())
	if recorded == 0 {
		t.Fatal("the recording holds no samples")
	}
	if delivered != recorded {
		t.Errorf("produced %d, delivered %d (%+d): samples lost uncounted or delivered twice%s", recorded, delivered, delivered-recorded, oldLogs())
	}
}

// pprofNames reports whether a pprof file in dir has a sample in fn.
func pprofNames(dir, fn string) (bool, error) {
	files, err := filepath.Glob(filepath.Join(dir, "*.pb.gz"))
	if err != nil {
		return false, err
	}
	for _, path := range files {
		f, err := os.Open(path)
		if err != nil {
			return false, err
		}
		prof, err := profile.Parse(f)
		f.Close()
		if err != nil {
			return false, fmt.Errorf("%s: %w", path, err)
		}
		for _, s := range prof.Sample {
			for _, loc := range s.Location {
				for _, l := range loc.Line {
					if l.Function != nil && l.Function.Name == fn {
						return true, nil
					}
				}
			}
		}
	}
	return false, nil
}

// checkProfilesDir: the chart's init container gave the pprof files'
// host directory, which the kubelet creates root's 0755, to the encoder:
// 65532:65532, mode 0750.
func checkProfilesDir(t *testing.T, dir string) {
	st, err := os.Stat(dir)
	if err != nil {
		t.Fatal(err)
	}
	sys := st.Sys().(*syscall.Stat_t)
	if sys.Uid != 65532 || sys.Gid != 65532 || st.Mode().Perm() != 0o750 {
		t.Errorf("the profiles' host directory is %d:%d %v, want 65532:65532 -rwxr-x--- (prepare-dir)", sys.Uid, sys.Gid, st.Mode().Perm())
	}
}

// parcaRowsOf returns the Parca store's rows whose namespace label is ns.
func parcaRowsOf(parca *parcatest.Server, ns string) []parcatest.Row {
	var out []parcatest.Row
	for _, r := range parca.Rows() {
		if strings.Contains(","+r.Labels+",", ",namespace="+ns+",") {
			out = append(out, r)
		}
	}
	return out
}

// checkArrowLabels: the workload's Arrow rows carry the labels the
// relabelling made from parca-agent's __meta_kubernetes_* names (its
// namespace, pod, container, controller kind and node), and no __meta_
// label is left.
func checkArrowLabels(ctx context.Context, t *testing.T, c *Cluster, parca *parcatest.Server) {
	pods, err := c.Client().CoreV1().Pods(workloadNS).List(ctx, metav1.ListOptions{LabelSelector: "app=" + workload})
	if err != nil || len(pods.Items) != 1 {
		t.Fatalf("the workload's pod: %v", err)
	}
	want := map[string]string{
		"namespace": workloadNS, "pod": pods.Items[0].Name, "container": workload,
		"controller_kind": "ReplicaSet", "node": c.Config.NodeName,
	}
	rows := parcaRowsOf(parca, workloadNS)
	for _, r := range rows {
		got := map[string]string{}
		for _, kv := range strings.Split(r.Labels, ",") {
			k, v, _ := strings.Cut(kv, "=")
			got[k] = v
			if strings.HasPrefix(k, "__meta_") {
				t.Errorf("an Arrow row keeps %s after relabelling: %s", k, r.Labels)
			}
		}
		for k, v := range want {
			if got[k] != v {
				t.Errorf("an Arrow row of the workload has %s=%q, want %q (labels %s)", k, got[k], v, r.Labels)
				return
			}
		}
	}
	if errs := parca.Errors(); len(errs) > 0 {
		t.Errorf("the Parca store refused what the encoder wrote: %v", errs)
	}
	t.Logf("%d Arrow rows name the workload: %v", len(rows), want)
}
