package cluster

import (
	"context"
	"crypto/tls"
	"encoding/json"
	"errors"
	"fmt"
	"net"
	"net/http"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"sync"
	"syscall"
	"time"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/client-go/kubernetes"
	"k8s.io/client-go/rest"

	tkube "github.com/tandem-profiler/tandem/tools/kubernetes"
)

// PauseImage is the sandbox image's name: Kubernetes' own, built from
// its pause.c (registry.k8s.io cannot be reached from here).
const PauseImage = "registry.k8s.io/pause:" + tkube.PauseVersion

// Proc is a process the cluster started.
type Proc struct {
	Name  string
	PID   int
	Start uint64
}

// State is what Up recorded, in Dir/state.json.
type State struct {
	Config     Config
	NodeIP     string
	ServiceIP  string
	Ports      map[string]int
	Procs      []Proc
	Before     HostState
	CgroupRoot string
	// RunContainerd tells whether /run/containerd existed before: the
	// runc shims put their sockets there whatever containerd's state
	// directory is.
	RunContainerd bool
}

// Cluster is a running cluster.
type Cluster struct {
	State

	mu     sync.Mutex
	exited map[string]chan struct{} // of processes this process started
	client *kubernetes.Clientset
}

// Paths inside Dir.
func (c *Cluster) path(parts ...string) string {
	return filepath.Join(append([]string{c.Config.Dir}, parts...)...)
}

// Kubeconfig is the administrator's kubeconfig (system:masters).
func (c *Cluster) Kubeconfig() string { return c.path("admin.kubeconfig") }

// ContainerdAddress is containerd's socket (ctr --address, CRI).
func (c *Cluster) ContainerdAddress() string { return c.path("containerd", "containerd.sock") }

// AuditLog is the API server's audit log (JSON lines, Metadata level).
func (c *Cluster) AuditLog() string { return c.path("audit.log") }

// Server is the API server's URL.
func (c *Cluster) Server() string {
	return "https://" + net.JoinHostPort(c.NodeIP, strconv.Itoa(c.Ports["apiserver"]))
}

// Bin returns the path of a Kubernetes binary (kubectl, ...).
func (c *Cluster) Bin(name string) string { return filepath.Join(c.Config.BinDir, name) }

// RESTConfig is the administrator's client configuration.
func (c *Cluster) RESTConfig() *rest.Config {
	return &rest.Config{
		Host: c.Server(),
		TLSClientConfig: rest.TLSClientConfig{
			CAFile: c.path("pki", "ca.crt"), CertFile: c.path("pki", "admin.crt"), KeyFile: c.path("pki", "admin.key"),
		},
		QPS: 50, Burst: 100,
	}
}

// Client is a clientset for the administrator.
func (c *Cluster) Client() *kubernetes.Clientset {
	c.mu.Lock()
	defer c.mu.Unlock()
	if c.client == nil {
		c.client = kubernetes.NewForConfigOrDie(c.RESTConfig())
	}
	return c.client
}

// Ctr runs ctr on the cluster's containerd, in the k8s.io namespace the
// kubelet's images and containers are in.
func (c *Cluster) Ctr(ctx context.Context, args ...string) ([]byte, error) {
	cmd := exec.CommandContext(ctx, "ctr", append([]string{"--address", c.ContainerdAddress(), "--namespace", "k8s.io"}, args...)...)
	out, err := cmd.CombinedOutput()
	if err != nil {
		return out, fmt.Errorf("ctr %s: %w\n%s", strings.Join(args, " "), err, out)
	}
	return out, nil
}

// ImportImage imports an image archive (OCI layout or docker save) into
// the cluster's containerd, where the kubelet finds it
// (imagePullPolicy: Never).
func (c *Cluster) ImportImage(ctx context.Context, archive string) error {
	_, err := c.Ctr(ctx, "images", "import", archive)
	return err
}

// TrustRegistry lets the cluster's containerd pull from the registry at
// host (host:port, on loopback) over plain HTTP, as a registry mirror's
// hosts.toml does.
func (c *Cluster) TrustRegistry(host string) error {
	dir := c.path("containerd", "certs.d", host)
	if err := os.MkdirAll(dir, 0o755); err != nil {
		return err
	}
	hosts := fmt.Sprintf("server = \"http://%[1]s\"\n\n[host.\"http://%[1]s\"]\n  capabilities = [\"pull\", \"resolve\"]\n", host)
	return os.WriteFile(filepath.Join(dir, "hosts.toml"), []byte(hosts), 0o644)
}

// LogTail returns the last lines of a component's log.
func (c *Cluster) LogTail(name string, lines int) string {
	b, err := os.ReadFile(c.path("logs", name+".log"))
	if err != nil {
		return fmt.Sprintf("(no log: %v)", err)
	}
	ls := strings.Split(strings.TrimRight(string(b), "\n"), "\n")
	if len(ls) > lines {
		ls = ls[len(ls)-lines:]
	}
	return strings.Join(ls, "\n")
}

func (c *Cluster) logf(format string, args ...any) {
	fmt.Fprintf(c.Config.Log, "cluster: "+format+"\n", args...)
}

// phase is one step of Up.
type phase struct {
	name  string
	limit time.Duration
	run   func(ctx context.Context) error
	// log names the component whose log explains a failure.
	log string
}

// Up brings the cluster up. On failure it takes down what it started
// and returns both errors.
func Up(ctx context.Context, cfg Config) (*Cluster, error) {
	if err := cfg.Validate(); err != nil {
		return nil, err
	}
	if os.Geteuid() != 0 {
		return nil, errors.New("cluster up: needs root")
	}
	for _, bin := range append(append([]string{}, tkube.Commands...), tkube.Pause) {
		if _, err := os.Stat(filepath.Join(cfg.BinDir, bin)); err != nil {
			return nil, fmt.Errorf("cluster up: %s: run `make tools` to build the Kubernetes binaries", err)
		}
	}
	for _, bin := range []string{"etcd", "containerd", "containerd-shim-runc-v2", "runc", "ctr", "nft", "ip", "unshare", "nsenter", "mount"} {
		if _, err := exec.LookPath(bin); err != nil {
			return nil, fmt.Errorf("cluster up: no %s: run `make tools` (apt packages etcd-server, containerd, runc, containernetworking-plugins, nftables)", bin)
		}
	}
	if _, err := os.Stat("/usr/lib/cni/bridge"); err != nil {
		return nil, errors.New("cluster up: no CNI bridge plugin in /usr/lib/cni: run `make tools` (containernetworking-plugins)")
	}
	dir, err := filepath.Abs(cfg.Dir)
	if err != nil {
		return nil, err
	}
	cfg.Dir = dir
	if _, err := os.Stat(filepath.Join(dir, "state.json")); err == nil {
		return nil, fmt.Errorf("cluster up: %s holds a cluster's state already: take it down first (make cluster-down)", dir)
	}
	if out, err := exec.Command("ip", "link", "show", cfg.Bridge).CombinedOutput(); err == nil {
		return nil, fmt.Errorf("cluster up: link %s exists already (another cluster is up?): %s", cfg.Bridge, out)
	}
	c := &Cluster{State: State{Config: cfg, Ports: map[string]int{}}, exited: map[string]chan struct{}{}}
	c.NodeIP = firstHost(cfg.PodCIDR)
	c.ServiceIP = firstHost(cfg.ServiceCIDR)
	c.CgroupRoot = "/tandem-cluster"
	if err := os.MkdirAll(c.path("logs"), 0o755); err != nil {
		return nil, err
	}
	if c.Before, err = snapshotHost(); err != nil {
		return nil, fmt.Errorf("cluster up: record the host's state: %w", err)
	}
	_, err = os.Stat("/run/containerd")
	c.RunContainerd = err == nil
	if err := c.save(); err != nil {
		return nil, err
	}
	phases := []phase{
		{name: "host network and cgroups", limit: 10 * time.Second, run: c.prepareHost},
		{name: "certificates and configuration", limit: 20 * time.Second, run: c.writeConfig},
		{name: "mount namespace", limit: 10 * time.Second, run: c.startNamespace, log: "namespace"},
		{name: "etcd", limit: 30 * time.Second, run: c.startEtcd, log: "etcd"},
		{name: "kube-apiserver /readyz", limit: 90 * time.Second, run: c.startAPIServer, log: "kube-apiserver"},
		{name: "kube-controller-manager and kube-scheduler /healthz", limit: 60 * time.Second, run: c.startControllers, log: "kube-controller-manager"},
		{name: "containerd and the pause image", limit: 30 * time.Second, run: c.startContainerd, log: "containerd"},
		{name: "kubelet: node Ready", limit: 90 * time.Second, run: c.startKubelet, log: "kubelet"},
		{name: "kube-proxy /healthz", limit: 30 * time.Second, run: c.startProxy, log: "kube-proxy"},
		{name: "default service account", limit: 30 * time.Second, run: c.waitServiceAccount, log: "kube-controller-manager"},
	}
	start := time.Now()
	for _, p := range phases {
		pctx, cancel := context.WithTimeout(ctx, p.limit)
		t0 := time.Now()
		err := p.run(pctx)
		timedOut := pctx.Err() != nil && ctx.Err() == nil
		cancel()
		if err == nil {
			c.logf("%s: %v", p.name, time.Since(t0).Round(10*time.Millisecond))
			continue
		}
		if timedOut {
			err = fmt.Errorf("phase %q did not finish within its limit of %v: %w", p.name, p.limit, err)
		} else {
			err = fmt.Errorf("phase %q: %w", p.name, err)
		}
		if p.log != "" {
			err = fmt.Errorf("%w\n--- the end of %s's log (%s):\n%s", err, p.log, c.path("logs", p.log+".log"), c.LogTail(p.log, 25))
		}
		return nil, errors.Join(fmt.Errorf("cluster up: %w", err), c.Down())
	}
	c.logf("up in %v", time.Since(start).Round(10*time.Millisecond))
	return c, nil
}

func (c *Cluster) save() error {
	b, err := json.MarshalIndent(c.State, "", "  ")
	if err != nil {
		return err
	}
	c.mu.Lock()
	defer c.mu.Unlock()
	return os.WriteFile(c.path("state.json"), b, 0o644)
}

// Load returns the cluster whose state Up recorded in dir (for Down from
// another process).
func Load(dir string) (*Cluster, error) {
	b, err := os.ReadFile(filepath.Join(dir, "state.json"))
	if err != nil {
		return nil, fmt.Errorf("no cluster state in %s: %w", dir, err)
	}
	c := &Cluster{exited: map[string]chan struct{}{}}
	if err := json.Unmarshal(b, &c.State); err != nil {
		return nil, fmt.Errorf("cluster state %s: %w", dir, err)
	}
	return c, nil
}

func freePort() (int, error) {
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		return 0, err
	}
	defer ln.Close()
	return ln.Addr().(*net.TCPAddr).Port, nil
}

func command(ctx context.Context, name string, args ...string) error {
	out, err := exec.CommandContext(ctx, name, args...).CombinedOutput()
	if err != nil {
		return fmt.Errorf("%s %s: %w: %s", name, strings.Join(args, " "), err, strings.TrimSpace(string(out)))
	}
	return nil
}

// prepareHost makes the bridge with the node's address (before the API
// server, which listens on it) and the kubelet's cgroup root in every
// hierarchy.
func (c *Cluster) prepareHost(ctx context.Context) error {
	for _, name := range []string{"etcd", "etcd-peer", "apiserver", "controller-manager", "scheduler", "kubelet", "kubelet-healthz", "kube-proxy-healthz", "kube-proxy-metrics"} {
		p, err := freePort()
		if err != nil {
			return err
		}
		c.Ports[name] = p
	}
	bits := strings.Split(c.Config.PodCIDR, "/")[1]
	for _, args := range [][]string{
		{"link", "add", c.Config.Bridge, "type", "bridge"},
		{"addr", "add", c.NodeIP + "/" + bits, "dev", c.Config.Bridge},
		{"link", "set", c.Config.Bridge, "up"},
	} {
		if err := command(ctx, "ip", args...); err != nil {
			return err
		}
	}
	for _, h := range cgroupHierarchies() {
		if err := os.MkdirAll(filepath.Join(h, c.CgroupRoot), 0o755); err != nil {
			return fmt.Errorf("create the kubelet's cgroup root: %w", err)
		}
	}
	return c.save()
}

// writeConfig writes the certificates, kubeconfigs and every
// component's configuration.
func (c *Cluster) writeConfig(ctx context.Context) error {
	ip := net.ParseIP(c.NodeIP)
	node := c.Config.NodeName
	pki := c.path("pki")
	err := writePKI(pki, []identity{
		{file: "apiserver", cn: "kube-apiserver", server: true,
			ips: []net.IP{ip, net.ParseIP(c.ServiceIP), net.IPv4(127, 0, 0, 1)},
			dns: []string{"kubernetes", "kubernetes.default", "kubernetes.default.svc", "kubernetes.default.svc.cluster.local", "localhost"}},
		{file: "apiserver-kubelet-client", cn: "kube-apiserver-kubelet-client", orgs: []string{"system:masters"}},
		{file: "admin", cn: "tandem-admin", orgs: []string{"system:masters"}},
		{file: "controller-manager", cn: "system:kube-controller-manager"},
		{file: "scheduler", cn: "system:kube-scheduler"},
		{file: "kubelet", cn: "system:node:" + node, orgs: []string{"system:nodes"}},
		{file: "kubelet-serving", cn: "system:node:" + node, server: true, ips: []net.IP{ip}, dns: []string{node}},
		{file: "kube-proxy", cn: "system:kube-proxy"},
	})
	if err != nil {
		return fmt.Errorf("write certificates: %w", err)
	}
	files := map[string]string{}
	for _, who := range []string{"admin", "controller-manager", "scheduler", "kubelet", "kube-proxy"} {
		files[who+".kubeconfig"] = kubeconfig(c.Server(), pki, who)
	}
	files["audit-policy.yaml"] = auditPolicy
	files["kubelet.yaml"] = c.kubeletConfig()
	files["kube-proxy.yaml"] = c.proxyConfig()
	files["containerd/config.toml"] = c.containerdConfig()
	files["cni/net.d/10-tandem.conflist"] = c.cniConfig()
	for name, content := range files {
		p := c.path(name)
		if err := os.MkdirAll(filepath.Dir(p), 0o755); err != nil {
			return err
		}
		if err := os.WriteFile(p, []byte(content), 0o600); err != nil {
			return err
		}
	}
	// The pause image, from the cached pause binary.
	return WriteImage(c.path("pause.oci.tar"), PauseImage, Image{
		Files:      []File{{Path: "/pause", Source: c.Bin(tkube.Pause), Mode: 0o755}},
		Entrypoint: []string{"/pause"},
		User:       "65535:65535",
	})
}

// auditPolicy records every request's metadata (who, what, the answer).
const auditPolicy = `apiVersion: audit.k8s.io/v1
kind: Policy
omitStages: ["RequestReceived"]
rules:
- level: Metadata
`

func (c *Cluster) kubeletConfig() string {
	return fmt.Sprintf(`apiVersion: kubelet.config.k8s.io/v1beta1
kind: KubeletConfiguration
address: %[1]s
port: %[2]d
readOnlyPort: 0
healthzBindAddress: 127.0.0.1
healthzPort: %[3]d
authentication:
  anonymous: {enabled: false}
  webhook: {enabled: true}
  x509: {clientCAFile: %[4]s/pki/ca.crt}
authorization: {mode: Webhook}
tlsCertFile: %[4]s/pki/kubelet-serving.crt
tlsPrivateKeyFile: %[4]s/pki/kubelet-serving.key
# This machine's cgroups are v1 (hybrid), which Kubernetes 1.35+ refuses
# unless told; containerd 1.6 and runc use cgroupfs.
failCgroupV1: false
cgroupDriver: cgroupfs
cgroupRoot: %[5]s
failSwapOn: false
containerRuntimeEndpoint: unix://%[4]s/containerd/containerd.sock
podLogsDir: %[4]s/pod-logs
clusterDomain: cluster.local
resolvConf: /etc/resolv.conf
evictionHard: {memory.available: 100Mi, nodefs.available: 1%%, imagefs.available: 1%%, nodefs.inodesFree: 1%%}
imageGCHighThresholdPercent: 100
imageGCLowThresholdPercent: 99
serializeImagePulls: false
`, c.NodeIP, c.Ports["kubelet"], c.Ports["kubelet-healthz"], c.Config.Dir, c.CgroupRoot)
}

func (c *Cluster) proxyConfig() string {
	return fmt.Sprintf(`apiVersion: kubeproxy.config.k8s.io/v1alpha1
kind: KubeProxyConfiguration
mode: nftables
clientConnection: {kubeconfig: %[1]s/kube-proxy.kubeconfig}
hostnameOverride: %[2]s
healthzBindAddress: 127.0.0.1:%[3]d
metricsBindAddress: 127.0.0.1:%[4]d
clusterCIDR: %[5]s
detectLocalMode: ClusterCIDR
nodePortAddresses: [%[6]s/32]
# Leave the host's conntrack settings alone.
conntrack: {maxPerCore: 0, min: 0, tcpEstablishedTimeout: 0s, tcpCloseWaitTimeout: 0s, udpTimeout: 0s, udpStreamTimeout: 0s}
`, c.Config.Dir, c.Config.NodeName, c.Ports["kube-proxy-healthz"], c.Ports["kube-proxy-metrics"], c.Config.PodCIDR, c.NodeIP)
}

func (c *Cluster) containerdConfig() string {
	return fmt.Sprintf(`version = 2
root = "%[1]s/containerd/root"
state = "%[1]s/containerd/state"
disabled_plugins = ["io.containerd.snapshotter.v1.aufs", "io.containerd.snapshotter.v1.btrfs", "io.containerd.snapshotter.v1.zfs", "io.containerd.snapshotter.v1.devmapper", "io.containerd.tracing.processor.v1.otlp", "io.containerd.internal.v1.tracing"]
[grpc]
  address = "%[1]s/containerd/containerd.sock"
[ttrpc]
  address = "%[1]s/containerd/containerd.sock.ttrpc"
[plugins."io.containerd.internal.v1.opt"]
  path = "%[1]s/containerd/opt"
[plugins."io.containerd.grpc.v1.cri"]
  sandbox_image = "%[2]s"
  # This VM refuses writes to oom_score_adj: without this, runc fails
  # every sandbox ("can't get final child's PID from pipe").
  restrict_oom_score_adj = true
  netns_mounts_under_state_dir = true
  stream_server_address = "127.0.0.1"
  stream_server_port = "0"
  # Registries the test runs (TrustRegistry): one directory per host.
  [plugins."io.containerd.grpc.v1.cri".registry]
    config_path = "%[1]s/containerd/certs.d"
  [plugins."io.containerd.grpc.v1.cri".cni]
    bin_dir = "/usr/lib/cni"
    conf_dir = "%[1]s/cni/net.d"
  [plugins."io.containerd.grpc.v1.cri".containerd]
    snapshotter = "overlayfs"
    default_runtime_name = "runc"
    [plugins."io.containerd.grpc.v1.cri".containerd.runtimes.runc]
      runtime_type = "io.containerd.runc.v2"
      [plugins."io.containerd.grpc.v1.cri".containerd.runtimes.runc.options]
        SystemdCgroup = false
`, c.Config.Dir, PauseImage)
}

// cniConfig attaches pods to the cluster's bridge, which already has the
// node's address: the plugin is no gateway (it would turn on the host's
// ip_forward), the pods' default route goes to that address.
func (c *Cluster) cniConfig() string {
	return fmt.Sprintf(`{
  "cniVersion": "1.0.0",
  "name": "tandem",
  "plugins": [{
    "type": "bridge",
    "bridge": %[1]q,
    "isGateway": false,
    "ipMasq": false,
    "hairpinMode": true,
    "ipam": {
      "type": "host-local",
      "dataDir": %[2]q,
      "ranges": [[{"subnet": %[3]q, "gateway": %[4]q}]],
      "routes": [{"dst": "0.0.0.0/0", "gw": %[4]q}]
    }
  }]
}
`, c.Config.Bridge, c.path("cni", "ipam"), c.Config.PodCIDR, c.NodeIP)
}

// start starts a component with its output in logs/<name>.log, in its
// own session (make cluster-up leaves it running), in the cluster's
// mount namespace when inNS.
func (c *Cluster) start(name string, inNS bool, env []string, bin string, args ...string) error {
	logf, err := os.OpenFile(c.path("logs", name+".log"), os.O_CREATE|os.O_WRONLY|os.O_APPEND, 0o644)
	if err != nil {
		return err
	}
	defer logf.Close()
	if inNS {
		holder := c.proc("namespace")
		if holder == nil {
			return errors.New("no mount namespace")
		}
		args = append([]string{fmt.Sprintf("--mount=/proc/%d/ns/mnt", holder.PID), "--", bin}, args...)
		bin = "nsenter"
	}
	cmd := exec.Command(bin, args...)
	cmd.Stdout, cmd.Stderr = logf, logf
	cmd.Env = append(os.Environ(), env...)
	cmd.SysProcAttr = &syscall.SysProcAttr{Setsid: true}
	if err := cmd.Start(); err != nil {
		return fmt.Errorf("start %s: %w", name, err)
	}
	st, _ := procStart(cmd.Process.Pid)
	exited := make(chan struct{})
	go func() { _ = cmd.Wait(); close(exited) }()
	c.mu.Lock()
	c.Procs = append(c.Procs, Proc{Name: name, PID: cmd.Process.Pid, Start: st})
	c.exited[name] = exited
	c.mu.Unlock()
	return c.save()
}

func (c *Cluster) proc(name string) *Proc {
	c.mu.Lock()
	defer c.mu.Unlock()
	for i := range c.Procs {
		if c.Procs[i].Name == name {
			return &c.Procs[i]
		}
	}
	return nil
}

// alive reports whether the named process still runs.
func (c *Cluster) alive(name string) bool {
	p := c.proc(name)
	if p == nil {
		return false
	}
	c.mu.Lock()
	ch := c.exited[name]
	c.mu.Unlock()
	if ch != nil {
		select {
		case <-ch:
			return false
		default:
			return true
		}
	}
	st, ok := procStart(p.PID)
	return ok && st == p.Start
}

// wait polls cond until it holds, failing as soon as one of the watched
// processes has exited.
func (c *Cluster) wait(ctx context.Context, what string, watch []string, cond func(ctx context.Context) error) error {
	var last error
	for {
		for _, name := range watch {
			if !c.alive(name) {
				return fmt.Errorf("%s exited while waiting for %s", name, what)
			}
		}
		if last = cond(ctx); last == nil {
			return nil
		}
		select {
		case <-ctx.Done():
			return fmt.Errorf("waiting for %s: %w (last: %v)", what, ctx.Err(), last)
		case <-time.After(200 * time.Millisecond):
		}
	}
}

// startNamespace starts the holder of the cluster's mount namespace: the
// pause binary, after the sysctl files are covered.
func (c *Cluster) startNamespace(ctx context.Context) error {
	var script strings.Builder
	script.WriteString("set -e\n")
	for _, key := range coveredSysctls {
		v, ok := readSysctl(key)
		if !ok {
			continue
		}
		f := c.path("sysctl", strings.ReplaceAll(key, "/", "."))
		if err := os.MkdirAll(filepath.Dir(f), 0o755); err != nil {
			return err
		}
		if err := os.WriteFile(f, []byte(v+"\n"), 0o644); err != nil {
			return err
		}
		fmt.Fprintf(&script, "mount --bind %s /proc/sys/%s\n", f, key)
	}
	ready := c.path("namespace.ready")
	fmt.Fprintf(&script, "touch %s\nexec %s\n", ready, c.Bin(tkube.Pause))
	if err := c.start("namespace", false, nil, "unshare", "--mount", "--propagation", "private", "--", "/bin/sh", "-c", script.String()); err != nil {
		return err
	}
	return c.wait(ctx, "the mount namespace", []string{"namespace"}, func(context.Context) error {
		_, err := os.Stat(ready)
		return err
	})
}

func httpGet(ctx context.Context, client *http.Client, url string) error {
	req, err := http.NewRequestWithContext(ctx, http.MethodGet, url, nil)
	if err != nil {
		return err
	}
	resp, err := client.Do(req)
	if err != nil {
		return err
	}
	defer resp.Body.Close()
	if resp.StatusCode != http.StatusOK {
		return fmt.Errorf("GET %s: %s", url, resp.Status)
	}
	return nil
}

func (c *Cluster) startEtcd(ctx context.Context) error {
	client := fmt.Sprintf("http://127.0.0.1:%d", c.Ports["etcd"])
	peer := fmt.Sprintf("http://127.0.0.1:%d", c.Ports["etcd-peer"])
	if err := c.start("etcd", false, nil, "etcd", "--name", "tandem", "--data-dir", c.path("etcd"),
		"--listen-client-urls", client, "--advertise-client-urls", client,
		"--listen-peer-urls", peer, "--initial-advertise-peer-urls", peer,
		"--initial-cluster", "tandem="+peer, "--logger", "zap", "--log-outputs", "stderr"); err != nil {
		return err
	}
	hc := &http.Client{Timeout: 2 * time.Second}
	return c.wait(ctx, "etcd /health", []string{"etcd"}, func(ctx context.Context) error {
		return httpGet(ctx, hc, client+"/health")
	})
}

func (c *Cluster) startAPIServer(ctx context.Context) error {
	pki := c.path("pki")
	if err := c.start("kube-apiserver", false, nil, c.Bin("kube-apiserver"),
		fmt.Sprintf("--etcd-servers=http://127.0.0.1:%d", c.Ports["etcd"]),
		"--bind-address="+c.NodeIP, "--advertise-address="+c.NodeIP,
		fmt.Sprintf("--secure-port=%d", c.Ports["apiserver"]),
		"--cert-dir="+c.path("apiserver"),
		"--tls-cert-file="+pki+"/apiserver.crt", "--tls-private-key-file="+pki+"/apiserver.key",
		"--client-ca-file="+pki+"/ca.crt",
		"--service-account-issuer=https://kubernetes.default.svc.cluster.local",
		"--service-account-key-file="+pki+"/sa.pub", "--service-account-signing-key-file="+pki+"/sa.key",
		"--service-cluster-ip-range="+c.Config.ServiceCIDR,
		"--authorization-mode=Node,RBAC",
		"--enable-admission-plugins=NodeRestriction",
		"--audit-log-path="+c.AuditLog(), "--audit-policy-file="+c.path("audit-policy.yaml"),
		"--kubelet-client-certificate="+pki+"/apiserver-kubelet-client.crt", "--kubelet-client-key="+pki+"/apiserver-kubelet-client.key",
		"--kubelet-certificate-authority="+pki+"/ca.crt",
		// kubectl logs and exec reach the kubelet at the node's address.
		"--kubelet-preferred-address-types=InternalIP,Hostname",
		"--profiling=false"); err != nil {
		return err
	}
	rc, err := rest.HTTPClientFor(c.RESTConfig())
	if err != nil {
		return err
	}
	return c.wait(ctx, "kube-apiserver /readyz", []string{"etcd", "kube-apiserver"}, func(ctx context.Context) error {
		return httpGet(ctx, rc, c.Server()+"/readyz")
	})
}

// startControllers starts the controller manager and the scheduler once
// the API server is ready (before, they exit on missing default roles).
func (c *Cluster) startControllers(ctx context.Context) error {
	pki := c.path("pki")
	cm := c.path("controller-manager.kubeconfig")
	if err := c.start("kube-controller-manager", false, nil, c.Bin("kube-controller-manager"),
		"--kubeconfig="+cm, "--authentication-kubeconfig="+cm, "--authorization-kubeconfig="+cm,
		"--bind-address=127.0.0.1", fmt.Sprintf("--secure-port=%d", c.Ports["controller-manager"]),
		"--cert-dir="+c.path("controller-manager"),
		"--service-account-private-key-file="+pki+"/sa.key", "--root-ca-file="+pki+"/ca.crt",
		"--cluster-signing-cert-file="+pki+"/ca.crt", "--cluster-signing-key-file="+pki+"/ca.key",
		"--use-service-account-credentials=true", "--leader-elect=false",
		"--service-cluster-ip-range="+c.Config.ServiceCIDR, "--profiling=false"); err != nil {
		return err
	}
	sc := c.path("scheduler.kubeconfig")
	if err := c.start("kube-scheduler", false, nil, c.Bin("kube-scheduler"),
		"--kubeconfig="+sc, "--authentication-kubeconfig="+sc, "--authorization-kubeconfig="+sc,
		"--bind-address=127.0.0.1", fmt.Sprintf("--secure-port=%d", c.Ports["scheduler"]),
		"--cert-dir="+c.path("scheduler"), "--leader-elect=false", "--profiling=false"); err != nil {
		return err
	}
	// Their own serving certificates are self-signed: health only.
	hc := &http.Client{Timeout: 2 * time.Second, Transport: &http.Transport{TLSClientConfig: &tls.Config{InsecureSkipVerify: true}}}
	watch := []string{"kube-apiserver", "kube-controller-manager", "kube-scheduler"}
	for _, p := range []string{"controller-manager", "scheduler"} {
		url := fmt.Sprintf("https://127.0.0.1:%d/healthz", c.Ports[p])
		if err := c.wait(ctx, "kube-"+p+" /healthz", watch, func(ctx context.Context) error { return httpGet(ctx, hc, url) }); err != nil {
			return err
		}
	}
	return nil
}

func (c *Cluster) startContainerd(ctx context.Context) error {
	if err := c.start("containerd", true, nil, "containerd", "--config", c.path("containerd", "config.toml")); err != nil {
		return err
	}
	if err := c.wait(ctx, "containerd's socket", []string{"containerd"}, func(ctx context.Context) error {
		_, err := c.Ctr(ctx, "version")
		return err
	}); err != nil {
		return err
	}
	return c.ImportImage(ctx, c.path("pause.oci.tar"))
}

func (c *Cluster) startKubelet(ctx context.Context) error {
	// No iptables on the kubelet's PATH: it would add its KUBE-FIREWALL
	// and canary chains to the host's tables, which nothing here needs.
	if err := c.start("kubelet", true, []string{"PATH=/usr/bin"}, c.Bin("kubelet"),
		"--config="+c.path("kubelet.yaml"), "--kubeconfig="+c.path("kubelet.kubeconfig"),
		"--root-dir="+c.path("kubelet"), "--cert-dir="+c.path("kubelet", "pki"),
		"--hostname-override="+c.Config.NodeName, "--node-ip="+c.NodeIP); err != nil {
		return err
	}
	client := c.Client()
	return c.wait(ctx, "node "+c.Config.NodeName+" Ready", []string{"containerd", "kubelet"}, func(ctx context.Context) error {
		n, err := client.CoreV1().Nodes().Get(ctx, c.Config.NodeName, metav1.GetOptions{})
		if err != nil {
			return err
		}
		for _, cond := range n.Status.Conditions {
			if cond.Type == corev1.NodeReady {
				if cond.Status == corev1.ConditionTrue {
					return nil
				}
				return fmt.Errorf("node not ready: %s", cond.Message)
			}
		}
		return errors.New("node has no Ready condition yet")
	})
}

func (c *Cluster) startProxy(ctx context.Context) error {
	if err := c.start("kube-proxy", true, nil, c.Bin("kube-proxy"), "--config="+c.path("kube-proxy.yaml")); err != nil {
		return err
	}
	hc := &http.Client{Timeout: 2 * time.Second}
	url := fmt.Sprintf("http://127.0.0.1:%d/healthz", c.Ports["kube-proxy-healthz"])
	return c.wait(ctx, "kube-proxy /healthz", []string{"kube-proxy"}, func(ctx context.Context) error { return httpGet(ctx, hc, url) })
}

func (c *Cluster) waitServiceAccount(ctx context.Context) error {
	client := c.Client()
	return c.wait(ctx, "the default service account", []string{"kube-controller-manager"}, func(ctx context.Context) error {
		_, err := client.CoreV1().ServiceAccounts("default").Get(ctx, "default", metav1.GetOptions{})
		return err
	})
}
