package kube

import (
	"log/slog"
	"sync"
	"sync/atomic"
	"time"

	"github.com/prometheus/client_golang/prometheus"
	"k8s.io/apimachinery/pkg/types"

	"github.com/tandem-profiler/tandem/encoder/aggregate"
	"github.com/tandem-profiler/tandem/internal/prom"
)

// podEntry is what the Store knows of one pod.
type podEntry struct {
	key     string   // namespace/name
	ids     []string // its containers' ids
	deleted time.Time
}

// Store answers container-id lookups from the pods of one node. See the
// package documentation.
type Store struct {
	cfg    Config
	logger *slog.Logger
	now    func() time.Time

	mu          sync.RWMutex
	byContainer map[string]*aggregate.Workload
	pods        map[types.UID]*podEntry
	byKey       map[string]types.UID

	warning atomic.Pointer[string]
	m       *metrics
}

type metrics struct {
	hits, misses prometheus.Counter
	apiErrors    *prometheus.CounterVec
	forbidden    *prometheus.GaugeVec
	pods         prometheus.GaugeFunc
	containers   prometheus.GaugeFunc
	evicted      prometheus.Counter
}

// API error kinds (the kind label of tandem_encoder_kubernetes_api_errors_total).
const (
	ErrUnauthorized = "unauthorized"
	ErrForbidden    = "forbidden"
	ErrUnreachable  = "unreachable"
	ErrWatch        = "watch"
	ErrOther        = "other"
)

// newStore returns an empty Store. reg may be nil.
func newStore(cfg Config, logger *slog.Logger, reg prometheus.Registerer) (*Store, error) {
	if cfg.LabelTTL <= 0 {
		cfg.LabelTTL = DefaultLabelTTL
	}
	if cfg.MaxPods <= 0 {
		cfg.MaxPods = DefaultMaxPods
	}
	if cfg.MaxOwners <= 0 {
		cfg.MaxOwners = DefaultMaxOwners
	}
	s := &Store{
		cfg:         cfg,
		logger:      logger,
		now:         time.Now,
		byContainer: make(map[string]*aggregate.Workload),
		pods:        make(map[types.UID]*podEntry),
		byKey:       make(map[string]types.UID),
	}
	lookupsTotal := prometheus.NewCounterVec(prometheus.CounterOpts{
		Name: "tandem_encoder_kubernetes_lookups_total",
		Help: "Container-id lookups of samples' processes, by result (hit: a pod's container; miss: not known).",
	}, []string{"result"})
	s.m = &metrics{
		hits:   lookupsTotal.WithLabelValues("hit"),
		misses: lookupsTotal.WithLabelValues("miss"),
		apiErrors: prometheus.NewCounterVec(prometheus.CounterOpts{
			Name: "tandem_encoder_kubernetes_api_errors_total",
			Help: "Failed Kubernetes API requests and watches, by kind (unauthorized, forbidden, unreachable, watch, other).",
		}, []string{"kind"}),
		forbidden: prometheus.NewGaugeVec(prometheus.GaugeOpts{
			Name: "tandem_encoder_kubernetes_forbidden",
			Help: "1 while the encoder's last request of this verb on this resource was forbidden (403: its ClusterRole lacks the rule; /readyz names it), 0 once one succeeds.",
		}, []string{"verb", "resource"}),
		pods: prometheus.NewGaugeFunc(prometheus.GaugeOpts{
			Name: "tandem_encoder_kubernetes_pods",
			Help: "Pods held (this node's, and deleted ones within the label TTL).",
		}, func() float64 { s.mu.RLock(); defer s.mu.RUnlock(); return float64(len(s.pods)) }),
		containers: prometheus.NewGaugeFunc(prometheus.GaugeOpts{
			Name: "tandem_encoder_kubernetes_containers",
			Help: "Container ids that lookups resolve.",
		}, func() float64 { s.mu.RLock(); defer s.mu.RUnlock(); return float64(len(s.byContainer)) }),
		evicted: prometheus.NewCounter(prometheus.CounterOpts{
			Name: "tandem_encoder_kubernetes_evicted_pods_total",
			Help: "Deleted pods forgotten before their label TTL because the pod bound was reached.",
		}),
	}
	for _, k := range []string{ErrUnauthorized, ErrForbidden, ErrUnreachable, ErrWatch, ErrOther} {
		s.m.apiErrors.WithLabelValues(k)
	}
	for _, l := range lookups {
		s.m.forbidden.WithLabelValues(l.verb, l.groupResource())
	}
	if err := prom.Register(reg, "kubernetes", lookupsTotal, s.m.apiErrors, s.m.forbidden, s.m.pods, s.m.containers, s.m.evicted); err != nil {
		return nil, err
	}
	return s, nil
}

// Lookup returns the Workload of a container id, or nil. It never blocks
// on the API and does not allocate.
func (s *Store) Lookup(containerID string) *aggregate.Workload {
	if containerID == "" {
		return nil
	}
	s.mu.RLock()
	w := s.byContainer[containerID]
	s.mu.RUnlock()
	if w == nil {
		s.m.misses.Inc()
	} else {
		s.m.hits.Inc()
	}
	return w
}

// Warning returns what /readyz reports as a warning, one line per
// problem: each lookup the API server forbids (403), until that lookup
// succeeds, naming the ClusterRole rule that allows it; then the last
// other API error (401, unreachable, 5xx, a failing watch), until any
// request succeeds. "" when all is well.
func (s *Store) Warning() string {
	if p := s.warning.Load(); p != nil {
		return *p
	}
	return ""
}

// setPod publishes the Workloads of a live pod, replacing what it had.
// Unchanged Workloads keep their pointers.
func (s *Store) setPod(uid types.UID, key string, ws map[string]*aggregate.Workload) {
	s.mu.Lock()
	defer s.mu.Unlock()
	if old, ok := s.byKey[key]; ok && old != uid {
		s.deleteLocked(old) // the name now belongs to another pod
	}
	e := s.pods[uid]
	if e == nil {
		s.makeRoomLocked()
		e = &podEntry{key: key}
		s.pods[uid] = e
	}
	s.byKey[key] = uid
	e.deleted = time.Time{}
	for _, id := range e.ids {
		if _, still := ws[id]; !still {
			delete(s.byContainer, id)
		}
	}
	e.ids = e.ids[:0]
	for id, w := range ws {
		if old := s.byContainer[id]; old != nil && sameWorkload(old, w) {
			w = old
		}
		s.byContainer[id] = w
		e.ids = append(e.ids, id)
	}
}

// deletePod marks a pod deleted: its containers answer until the label TTL.
func (s *Store) deletePod(key string) {
	s.mu.Lock()
	defer s.mu.Unlock()
	uid, ok := s.byKey[key]
	if !ok {
		return
	}
	delete(s.byKey, key)
	if e := s.pods[uid]; e != nil && e.deleted.IsZero() {
		e.deleted = s.now()
	}
}

func (s *Store) deleteLocked(uid types.UID) {
	e := s.pods[uid]
	if e == nil {
		return
	}
	for _, id := range e.ids {
		delete(s.byContainer, id)
	}
	delete(s.pods, uid)
	if s.byKey[e.key] == uid {
		delete(s.byKey, e.key)
	}
}

// makeRoomLocked keeps len(pods) below MaxPods by forgetting the deleted
// pod deleted first (counted); live pods are never evicted.
func (s *Store) makeRoomLocked() {
	for len(s.pods) >= s.cfg.MaxPods {
		var oldest types.UID
		var at time.Time
		for uid, e := range s.pods {
			if !e.deleted.IsZero() && (at.IsZero() || e.deleted.Before(at)) {
				oldest, at = uid, e.deleted
			}
		}
		if at.IsZero() {
			return // all live: the API's own limit bounds them
		}
		s.deleteLocked(oldest)
		s.m.evicted.Inc()
	}
}

// sweep forgets pods deleted more than the label TTL ago.
func (s *Store) sweep() {
	now := s.now()
	s.mu.Lock()
	defer s.mu.Unlock()
	for uid, e := range s.pods {
		if !e.deleted.IsZero() && now.Sub(e.deleted) >= s.cfg.LabelTTL {
			s.deleteLocked(uid)
		}
	}
}
