package cluster

import (
	"bytes"
	"context"
	"fmt"
	"io"
	"strings"
	"sync"

	"helm.sh/helm/v3/pkg/action"
	"helm.sh/helm/v3/pkg/chart"
	"helm.sh/helm/v3/pkg/chart/loader"
	"helm.sh/helm/v3/pkg/registry"
	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/cli-runtime/pkg/genericclioptions"
	"k8s.io/client-go/rest"
)

// Helm is Helm's action configuration against the cluster for releases
// in namespace, as `helm -n namespace` builds it from the administrator's
// kubeconfig: the release's records and objects go in that namespace.
func (c *Cluster) Helm(namespace string) (*action.Configuration, error) {
	flags := genericclioptions.NewConfigFlags(false)
	kc, ns := c.Kubeconfig(), namespace
	flags.KubeConfig, flags.Namespace = &kc, &ns
	cfg := new(action.Configuration)
	if err := cfg.Init(flags, ns, "secret", func(string, ...any) {}); err != nil {
		return nil, fmt.Errorf("helm: %w", err)
	}
	return cfg, nil
}

// LoadChart loads the chart at path (a directory or a packaged chart).
func LoadChart(path string) (*chart.Chart, error) {
	ch, err := loader.Load(path)
	if err != nil {
		return nil, fmt.Errorf("load chart %s: %w", path, err)
	}
	return ch, nil
}

// PullChart fetches the chart at ref (oci://host/path/name) at version
// with Helm's registry client, as `helm install oci://...` does; a
// registry on loopback is spoken to over plain HTTP.
func PullChart(ref, version string) (*chart.Chart, error) {
	client, err := registry.NewClient(registry.ClientOptPlainHTTP(), registry.ClientOptWriter(io.Discard))
	if err != nil {
		return nil, fmt.Errorf("helm registry client: %w", err)
	}
	pulled, err := client.Pull(strings.TrimPrefix(ref, "oci://") + ":" + version)
	if err != nil {
		return nil, fmt.Errorf("pull chart %s --version %s: %w", ref, version, err)
	}
	ch, err := loader.LoadArchive(bytes.NewReader(pulled.Chart.Data))
	if err != nil {
		return nil, fmt.Errorf("load chart %s --version %s: %w", ref, version, err)
	}
	return ch, nil
}

// HelmInstall installs ch as release in namespace, with values, as `helm
// install -n namespace` does (the namespace must exist: NamespaceFor).
func HelmInstall(cfg *action.Configuration, ch *chart.Chart, namespace, release string, values map[string]any) error {
	in := action.NewInstall(cfg)
	in.ReleaseName, in.Namespace = release, namespace
	if _, err := in.Run(ch, values); err != nil {
		return fmt.Errorf("helm install %s -n %s: %w", release, namespace, err)
	}
	return nil
}

// HelmUpgrade upgrades release in namespace to ch with values.
func HelmUpgrade(cfg *action.Configuration, ch *chart.Chart, namespace, release string, values map[string]any) error {
	up := action.NewUpgrade(cfg)
	up.Namespace = namespace
	if _, err := up.Run(release, ch, values); err != nil {
		return fmt.Errorf("helm upgrade %s: %w", release, err)
	}
	return nil
}

// HelmUninstall uninstalls release.
func HelmUninstall(cfg *action.Configuration, release string) error {
	if _, err := action.NewUninstall(cfg).Run(release); err != nil {
		return fmt.Errorf("helm uninstall %s: %w", release, err)
	}
	return nil
}

// NamespaceFor creates namespace for the chart as docs/kubernetes.md tells
// a user to where Pod Security is enforced: enforce "privileged" (the
// sampler needs hostPID and capabilities beyond "baseline"), warn and
// audit "restricted" (which the encoder alone meets). An existing
// namespace is left as it is.
func (c *Cluster) NamespaceFor(ctx context.Context, namespace string) error {
	ns := &corev1.Namespace{ObjectMeta: metav1.ObjectMeta{Name: namespace, Labels: map[string]string{
		"pod-security.kubernetes.io/enforce": "privileged",
		"pod-security.kubernetes.io/warn":    "restricted",
		"pod-security.kubernetes.io/audit":   "restricted",
	}}}
	if _, err := c.Client().CoreV1().Namespaces().Create(ctx, ns, metav1.CreateOptions{}); err != nil && !apierrors.IsAlreadyExists(err) {
		return fmt.Errorf("create namespace %s: %w", namespace, err)
	}
	return nil
}

// Warnings collects the API server's warnings (Pod Security admission
// answers with them) from every client in the process once installed
// with rest.SetDefaultWarningHandler.
type Warnings struct {
	mu   sync.Mutex
	msgs []string
}

// HandleWarningHeader implements rest.WarningHandler.
func (w *Warnings) HandleWarningHeader(code int, agent, text string) {
	if code != 299 || text == "" {
		return
	}
	w.mu.Lock()
	defer w.mu.Unlock()
	w.msgs = append(w.msgs, text)
}

// Take returns the warnings so far and forgets them.
func (w *Warnings) Take() []string {
	w.mu.Lock()
	defer w.mu.Unlock()
	out := w.msgs
	w.msgs = nil
	return out
}

var _ rest.WarningHandler = (*Warnings)(nil)

// WaitDaemonSet waits until the DaemonSet has its one pod scheduled,
// updated, ready and available (its probes decide), or ctx ends.
func (c *Cluster) WaitDaemonSet(ctx context.Context, namespace, name string) error {
	return c.wait(ctx, "DaemonSet "+namespace+"/"+name+" ready", []string{"kube-apiserver", "kubelet", "containerd"}, func(ctx context.Context) error {
		ok, err := c.DaemonSetReady(ctx, namespace, name)
		if err == nil && !ok {
			err = fmt.Errorf("not ready")
		}
		return err
	})
}

// DaemonSetReady reports whether the DaemonSet's desired, updated,
// ready and available counts are all 1 for its current generation.
func (c *Cluster) DaemonSetReady(ctx context.Context, namespace, name string) (bool, error) {
	ds, err := c.Client().AppsV1().DaemonSets(namespace).Get(ctx, name, metav1.GetOptions{})
	if err != nil {
		return false, err
	}
	s := ds.Status
	return s.ObservedGeneration == ds.Generation && s.DesiredNumberScheduled == 1 && s.NumberReady == 1 &&
		s.UpdatedNumberScheduled == 1 && s.NumberAvailable == 1, nil
}
