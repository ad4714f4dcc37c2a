package kube

import (
	"context"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"net"
	"strings"
	"sync"
	"sync/atomic"
	"time"

	"github.com/go-logr/logr"
	"github.com/prometheus/client_golang/prometheus"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/fields"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/apimachinery/pkg/watch"
	"k8s.io/client-go/dynamic"
	"k8s.io/client-go/rest"
	"k8s.io/client-go/tools/cache"
	"k8s.io/client-go/tools/clientcmd"
	"k8s.io/client-go/util/workqueue"
	"k8s.io/klog/v2"
)

const (
	// ownerRetry is how long a failed owner lookup is not retried.
	ownerRetry = time.Minute
	// ownerTimeout bounds one owner GET.
	ownerTimeout = 10 * time.Second
	userAgent    = "tandem-encoder"
)

// Informer is a Store fed by a pod informer. Build it with New or
// NewForClient, then Run it.
type Informer struct {
	*Store
	client dynamic.Interface
	host   string
	// clientLog is client-go's logger for this Informer's informer,
	// queue and requests (Run puts it in their context).
	clientLog klog.Logger
	informer  cache.SharedIndexInformer
	queue     workqueue.TypedRateLimitingInterface[string]

	ownersMu sync.Mutex
	owners   map[types.UID]ownerResult

	// What Warning reports: the forbidden lookups (each until it
	// succeeds) and the last other error (until any request succeeds);
	// logged holds the problems logged since they last went away.
	warnMu    sync.Mutex
	forbidden map[lookup]string
	transient string
	logged    map[string]bool

	lastErr atomic.Pointer[error] // the last list or watch request error
}

type ownerResult struct {
	parent *owner // nil: the owner has no controller
	known  bool   // the owner was read
	failed time.Time
}

// New returns an Informer talking to the API server of cfg.Kubeconfig, or
// of the cluster it runs in. reg may be nil. It changes no process-wide
// state: client-go logs about the Informer's work to logger, through
// ClientGoHandler; its process-wide (klog) logger is the binary's to set.
func New(cfg Config, logger *slog.Logger, reg prometheus.Registerer) (*Informer, error) {
	if err := cfg.Validate(); err != nil {
		return nil, fmt.Errorf("kubernetes config: %w", err)
	}
	var rc *rest.Config
	var err error
	if cfg.Kubeconfig != "" {
		rc, err = clientcmd.BuildConfigFromFlags("", cfg.Kubeconfig)
		if err != nil {
			return nil, fmt.Errorf("kubeconfig %s: %w", cfg.Kubeconfig, err)
		}
	} else if rc, err = rest.InClusterConfig(); err != nil {
		return nil, fmt.Errorf("in-cluster kubernetes config (or pass --kubeconfig): %w", err)
	}
	rc.UserAgent = userAgent
	rc.QPS, rc.Burst = 5, 10
	client, err := dynamic.NewForConfig(rc)
	if err != nil {
		return nil, fmt.Errorf("kubernetes client: %w", err)
	}
	in, err := NewForClient(cfg, client, logger, reg)
	if err != nil {
		return nil, err
	}
	in.host = rc.Host
	return in, nil
}

// NewForClient returns an Informer using client (tests use client-go's
// fake dynamic client). reg may be nil.
func NewForClient(cfg Config, client dynamic.Interface, logger *slog.Logger, reg prometheus.Registerer) (*Informer, error) {
	if cfg.Node == "" {
		return nil, errors.New("kubernetes: node name is empty: pass --node")
	}
	s, err := newStore(cfg, logger, reg)
	if err != nil {
		return nil, err
	}
	clientLog := logr.FromSlogHandler(ClientGoHandler(s.logger.Handler()))
	in := &Informer{
		Store:     s,
		client:    client,
		clientLog: clientLog,
		owners:    make(map[types.UID]ownerResult),
		forbidden: make(map[lookup]string),
		logged:    make(map[string]bool),
		queue: workqueue.NewTypedRateLimitingQueueWithConfig(workqueue.DefaultTypedControllerRateLimiter[string](),
			workqueue.TypedRateLimitingQueueConfig[string]{DelayingQueue: workqueue.NewTypedDelayingQueueWithConfig(
				workqueue.TypedDelayingQueueConfig[string]{Name: "tandem-pods", Logger: &clientLog})}),
	}
	selector := fields.OneTermEqualSelector("spec.nodeName", cfg.Node).String()
	lw := &cache.ListWatch{
		ListWithContextFunc: func(ctx context.Context, o metav1.ListOptions) (runtime.Object, error) {
			o.FieldSelector = selector
			l, err := client.Resource(podsResource).List(ctx, o)
			in.apiResult(listPods, err)
			return l, err
		},
		WatchFuncWithContext: func(ctx context.Context, o metav1.ListOptions) (watch.Interface, error) {
			o.FieldSelector = selector
			// client-go's watch-list retries some errors (connection
			// refused) without returning them: count them here.
			w, err := client.Resource(podsResource).Watch(ctx, o)
			in.apiResult(watchPods, err)
			return w, err
		},
	}
	// The wrapper keeps a client's "no watch-list" answer (the fake
	// dynamic client's IsWatchListSemanticsUnSupported). trimPod turns
	// each unstructured pod into a pod before the cache keeps it.
	in.informer = cache.NewSharedIndexInformerWithOptions(cache.ToListWatcherWithWatchListSemantics(lw, client),
		&unstructured.Unstructured{}, cache.SharedIndexInformerOptions{})
	if err := in.informer.SetTransform(trimPod); err != nil {
		return nil, fmt.Errorf("kubernetes informer: %w", err)
	}
	if err := in.informer.SetWatchErrorHandlerWithContext(func(_ context.Context, _ *cache.Reflector, err error) {
		if last := in.lastErr.Load(); last != nil && errors.Is(err, *last) {
			return // counted when the request failed
		}
		in.apiError(watchPods, "", err)
	}); err != nil {
		return nil, fmt.Errorf("kubernetes informer: %w", err)
	}
	enqueue := func(obj any) {
		if key, err := cache.DeletionHandlingMetaNamespaceKeyFunc(obj); err == nil {
			in.queue.Add(key)
		}
	}
	if _, err := in.informer.AddEventHandlerWithOptions(cache.ResourceEventHandlerFuncs{
		AddFunc:    enqueue,
		UpdateFunc: func(_, obj any) { enqueue(obj) },
		DeleteFunc: enqueue,
	}, cache.HandlerOptions{Logger: &clientLog}); err != nil {
		return nil, fmt.Errorf("kubernetes informer: %w", err)
	}
	return in, nil
}

// Synced reports whether the first list of pods has arrived.
func (in *Informer) Synced() bool { return in.informer.HasSynced() }

// Run runs the informer and its worker until ctx ends. Lookups work
// (answering nil) before the first list arrives and while the API fails.
func (in *Informer) Run(ctx context.Context) {
	// client-go logs what it does for ctx's holder to ctx's logger
	// (contextual logging), not to its process-wide one.
	ctx = klog.NewContext(ctx, in.clientLog)
	var wg sync.WaitGroup
	defer wg.Wait()
	defer in.queue.ShutDown()
	// The informer is not waited for: client-go's reflector may sit out
	// a backoff (up to 30 s) before it sees ctx end, and shutting down
	// must not wait for that.
	go in.informer.RunWithContext(ctx)
	wg.Add(1)
	go func() {
		defer wg.Done()
		for in.processNext(ctx) {
		}
	}()
	tick := time.NewTicker(min(max(in.cfg.LabelTTL/10, time.Second), 30*time.Second))
	defer tick.Stop()
	for {
		select {
		case <-ctx.Done():
			return
		case <-tick.C:
			in.sweep()
		}
	}
}

func (in *Informer) processNext(ctx context.Context) bool {
	key, quit := in.queue.Get()
	if quit {
		return false
	}
	defer in.queue.Done(key)
	obj, exists, err := in.informer.GetIndexer().GetByKey(key)
	if err != nil || !exists {
		in.deletePod(key)
		in.queue.Forget(key)
		return true
	}
	p, ok := obj.(*pod)
	if !ok {
		in.queue.Forget(key)
		return true
	}
	chain, complete := in.ownerChain(ctx, p)
	in.setPod(p.UID, key, buildWorkloads(p, chain, in.cfg.PodLabelAttributes))
	if complete {
		in.queue.Forget(key)
	} else {
		in.queue.AddRateLimited(key) // resolve the owner again later
	}
	return true
}

// ownerChain returns the pod's owners, its controller first, and whether
// every link could be resolved.
func (in *Informer) ownerChain(ctx context.Context, p *pod) ([]owner, bool) {
	ref := metav1.GetControllerOf(p)
	if ref == nil {
		return nil, true
	}
	chain := []owner{{Kind: ref.Kind, Name: ref.Name}}
	switch ref.Kind {
	case "ReplicaSet", "Job":
	default:
		return chain, true
	}
	parent, known, ok := in.parent(ctx, p.Namespace, ref)
	if !known && ref.Kind == "ReplicaSet" {
		// Deployment names its ReplicaSets <deployment>-<pod-template-hash>.
		if h := p.Labels[podTemplateHashLabel]; h != "" && strings.HasSuffix(ref.Name, "-"+h) {
			parent = &owner{Kind: "Deployment", Name: strings.TrimSuffix(ref.Name, "-"+h)}
		}
	}
	if parent != nil {
		chain = append(chain, *parent)
	}
	return chain, ok
}

// parent resolves the controller of a ReplicaSet or Job by one GET,
// cached by the owner's uid (bounded). known is false when the owner could
// not be read (not found, or an error); ok is false on an error, which is
// not retried for ownerRetry.
func (in *Informer) parent(ctx context.Context, namespace string, ref *metav1.OwnerReference) (p *owner, known, ok bool) {
	in.ownersMu.Lock()
	r, cached := in.owners[ref.UID]
	in.ownersMu.Unlock()
	if cached && (r.failed.IsZero() || in.now().Sub(r.failed) < ownerRetry) {
		return r.parent, r.known, r.failed.IsZero()
	}
	ctx, cancel := context.WithTimeout(ctx, ownerTimeout)
	defer cancel()
	l := getReplicaSets
	if ref.Kind == "Job" {
		l = getJobs
	}
	meta, err := in.client.Resource(l.resource).Namespace(namespace).Get(ctx, ref.Name, metav1.GetOptions{})
	r = ownerResult{}
	switch {
	case apierrors.IsNotFound(err):
		// Gone already (or not yet visible): nothing to name. The
		// request was allowed.
		in.apiOK(l)
	case err != nil:
		in.apiError(l, namespace+"/"+ref.Name, err)
		r.failed = in.now()
	default:
		in.apiOK(l)
		r.known = true
		if c := metav1.GetControllerOf(meta); c != nil {
			r.parent = &owner{Kind: c.Kind, Name: c.Name}
		}
	}
	in.ownersMu.Lock()
	if len(in.owners) >= in.cfg.MaxOwners {
		for uid := range in.owners { // evict an arbitrary entry
			delete(in.owners, uid)
			break
		}
	}
	in.owners[ref.UID] = r
	in.ownersMu.Unlock()
	return r.parent, r.known, r.failed.IsZero()
}

// classify names the kind of an API error.
func classify(err error) string {
	var ne net.Error
	switch {
	case apierrors.IsUnauthorized(err):
		return ErrUnauthorized
	case apierrors.IsForbidden(err):
		return ErrForbidden
	case errors.As(err, &ne): // dial, DNS, TLS, timeouts (url.Error)
		return ErrUnreachable
	case errors.Is(err, io.EOF), errors.Is(err, io.ErrUnexpectedEOF):
		return ErrWatch // a watch stream cut short
	}
	return ErrOther
}

// fixes says what to do about each kind of error.
var fixes = map[string]string{
	ErrUnauthorized: "the API server rejected the encoder's credentials (401): check the service-account token projected into the encoder container, or the user of --kubeconfig",
	ErrForbidden:    "RBAC does not allow it (403): add the rule named to the ClusterRole bound to the encoder's ServiceAccount (deploy/kubernetes/daemonset.yaml's tandem-encoder has them all)",
	ErrUnreachable:  "cannot reach the API server: check --kubeconfig, or the in-cluster service (KUBERNETES_SERVICE_HOST) and the network policy",
	ErrWatch:        "the pod watch keeps failing; client-go relists with backoff",
	ErrOther:        "client-go retries with backoff",
}

// apiError records a failed request of lookup l (of the object named
// obj, if any): it sets the readiness warning, counts the error and logs
// it once until the problem goes away. A 403 is a missing ClusterRole rule
// for l, which no other request's success cures: its warning (naming the
// rule to add) stays until a request of l succeeds, and
// tandem_encoder_kubernetes_forbidden{verb,resource} is 1 meanwhile.
// Any other error (401, unreachable, 5xx, a cut watch) is the transient
// warning, cleared by the next request that succeeds.
func (in *Informer) apiError(l lookup, obj string, err error) {
	if apierrors.IsResourceExpired(err) || apierrors.IsGone(err) {
		return // a routine relist, not a failure
	}
	kind := classify(err)
	what := l.String()
	if obj != "" {
		what += " " + obj
	}
	logKey := kind
	in.warnMu.Lock()
	if kind == ErrForbidden {
		in.forbidden[l] = l.forbiddenWarning(err)
		in.m.forbidden.WithLabelValues(l.verb, l.groupResource()).Set(1)
		logKey = ErrForbidden + " " + l.String()
	} else {
		in.transient = fmt.Sprintf("kubernetes %s failed (%s): %v; samples go out without Kubernetes labels until it works", what, kind, err)
	}
	in.publishLocked()
	first := !in.logged[logKey]
	in.logged[logKey] = true
	in.warnMu.Unlock()
	// Counted once the warning is published: a test that waits for the
	// count finds the warning.
	in.m.apiErrors.WithLabelValues(kind).Inc()
	if first {
		fix := fixes[kind]
		if kind == ErrForbidden {
			fix = "add the rule " + l.rule() + " to the encoder's ClusterRole; " + forbiddenCost[l] + " until then"
		}
		in.logger.Warn("kubernetes API error; profiles keep flowing without Kubernetes labels",
			"what", what, "kind", kind, "err", err, "host", in.host, "fix", fix)
	}
}

// apiResult reports a list or watch request's outcome.
func (in *Informer) apiResult(l lookup, err error) {
	if err == nil {
		in.apiOK(l)
		return
	}
	in.lastErr.Store(&err)
	in.apiError(l, "", err)
}

// apiOK records a request of l that the API server allowed: it clears
// the transient warning, and l's forbidden warning.
func (in *Informer) apiOK(l lookup) {
	in.warnMu.Lock()
	_, wasForbidden := in.forbidden[l]
	if in.transient == "" && !wasForbidden {
		in.warnMu.Unlock()
		return
	}
	hadTransient := in.transient != ""
	in.transient = ""
	if wasForbidden {
		delete(in.forbidden, l)
		in.m.forbidden.WithLabelValues(l.verb, l.groupResource()).Set(0)
		delete(in.logged, ErrForbidden+" "+l.String())
	}
	for k := range in.logged {
		if !strings.HasPrefix(k, ErrForbidden+" ") {
			delete(in.logged, k)
		}
	}
	in.publishLocked()
	in.warnMu.Unlock()
	if wasForbidden {
		in.logger.Info("kubernetes API allows the encoder's "+l.String()+" again", "lookup", l.String())
	}
	if hadTransient {
		in.logger.Info("kubernetes API requests succeed again")
	}
}

// publishLocked sets the Store's warning: one line per forbidden lookup
// (in lookups' order), then the transient error. in.warnMu is held.
func (in *Informer) publishLocked() {
	var lines []string
	for _, l := range lookups {
		if w, ok := in.forbidden[l]; ok {
			lines = append(lines, w)
		}
	}
	if in.transient != "" {
		lines = append(lines, in.transient)
	}
	if len(lines) == 0 {
		in.warning.Store(nil)
		return
	}
	msg := strings.Join(lines, "\n")
	in.warning.Store(&msg)
}

// ClientGoHandler returns the handler client-go's own (klog) logging goes
// through: h at debug level, the Informer reporting what matters itself,
// and only records of klog verbosity 0 to 2 (logr maps V(n) to slog level
// -n): from V(3) on client-go logs request and response bodies. The
// Informer logs through it; a binary sets klog's process-wide logger to
// it once, at start-up (klog.SetSlogLogger), for client-go's lines
// outside any Informer's context.
func ClientGoHandler(h slog.Handler) slog.Handler { return debugHandler{h} }

// debugHandler is ClientGoHandler's handler.
type debugHandler struct{ h slog.Handler }

const maxKlogVerbosity = 2

func (d debugHandler) Enabled(ctx context.Context, l slog.Level) bool {
	return l >= -maxKlogVerbosity && d.h.Enabled(ctx, slog.LevelDebug)
}

func (d debugHandler) Handle(ctx context.Context, r slog.Record) error {
	if r.Level < -maxKlogVerbosity {
		return nil
	}
	r.Level = slog.LevelDebug
	return d.h.Handle(ctx, r)
}

func (d debugHandler) WithAttrs(as []slog.Attr) slog.Handler { return debugHandler{d.h.WithAttrs(as)} }
func (d debugHandler) WithGroup(n string) slog.Handler       { return debugHandler{d.h.WithGroup(n)} }
