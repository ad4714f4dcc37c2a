package kubetest

import (
	"encoding/base64"
	"encoding/json"
	"encoding/pem"
	"errors"
	"fmt"
	"net/http"
	"net/http/httptest"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"sync"
	"testing"

	appsv1 "k8s.io/api/apps/v1"
	batchv1 "k8s.io/api/batch/v1"
	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metainternalversion "k8s.io/apimachinery/pkg/apis/meta/internalversion"
	metainternalversionvalidation "k8s.io/apimachinery/pkg/apis/meta/internalversion/validation"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/runtime/schema"
	utilruntime "k8s.io/apimachinery/pkg/util/runtime"
)

// listParams decodes list options from a query into the internal version,
// as apimachinery's meta internalversion/scheme does for the API server.
var listParams = func() runtime.ParameterCodec {
	s := runtime.NewScheme()
	utilruntime.Must(metainternalversion.AddToScheme(s))
	return runtime.NewParameterCodec(s)
}()

// Request is one request the server answered.
type Request struct {
	Method, Path, RawQuery string
	FieldSelector          string
	Watch                  bool
	Status                 int
}

// Server is the test API server.
type Server struct {
	URL   string
	Token string
	Node  string
	// User is who the token authenticates as, named in 403 answers.
	User string

	srv *httptest.Server

	mu       sync.Mutex
	rv       int64
	pods     map[string]*corev1.Pod // namespace/name
	rs       map[string]*appsv1.ReplicaSet
	jobs     map[string]*batchv1.Job
	watchers map[chan event]struct{}
	requests []Request
	closed   chan struct{}
	denied   map[Access]bool // Forbid
	failNext map[string]int  // FailNext: resource -> status
	warning  string          // Warn
}

// Access is what RBAC allows or denies: a verb on a resource of a group
// ("" for the core group). A pod list is verb list, a pod watch (and
// watch-list) verb watch, an owner's GET verb get, as the API server's
// request info names them.
type Access struct {
	Verb, Group, Resource string
}

// DefaultUser is the user Start's token authenticates as: the chart's
// encoder ServiceAccount.
const DefaultUser = "system:serviceaccount:tandem:tandem-encoder"

type event struct {
	Type   string          `json:"type"`
	Object json.RawMessage `json:"object"`
}

// Start starts a server for node's pods that wants token; it stops at the
// end of the test.
func Start(t testing.TB, token, node string) *Server {
	s := &Server{
		Token: token, Node: node, User: DefaultUser, rv: 1,
		denied: map[Access]bool{}, failNext: map[string]int{},
		pods: map[string]*corev1.Pod{}, rs: map[string]*appsv1.ReplicaSet{}, jobs: map[string]*batchv1.Job{},
		watchers: map[chan event]struct{}{}, closed: make(chan struct{}),
	}
	// TLS: client-go sends a kubeconfig's credentials only over TLS.
	s.srv = httptest.NewTLSServer(http.HandlerFunc(s.serve))
	s.URL = s.srv.URL
	t.Cleanup(s.Close)
	return s
}

// Close ends every watch and stops the server.
func (s *Server) Close() {
	s.mu.Lock()
	select {
	case <-s.closed:
	default:
		close(s.closed)
	}
	s.mu.Unlock()
	s.srv.CloseClientConnections()
	s.srv.Close()
}

// Kubeconfig writes a kubeconfig for the server with the token into dir
// and returns its path.
func (s *Server) Kubeconfig(t testing.TB, dir string) string {
	t.Helper()
	return s.KubeconfigWithToken(t, dir, s.Token)
}

// KubeconfigWithToken is Kubeconfig with another token.
func (s *Server) KubeconfigWithToken(t testing.TB, dir, token string) string {
	t.Helper()
	cfg := fmt.Sprintf(`apiVersion: v1
kind: Config
clusters:
- name: test
  cluster:
    server: %s
    certificate-authority-data: %s
users:
- name: encoder
  user:
    token: %s
contexts:
- name: test
  context: {cluster: test, user: encoder}
current-context: test
`, s.URL, base64.StdEncoding.EncodeToString(pem.EncodeToMemory(&pem.Block{Type: "CERTIFICATE", Bytes: s.srv.Certificate().Raw})), token)
	p := filepath.Join(dir, "kubeconfig")
	if err := os.WriteFile(p, []byte(cfg), 0o600); err != nil {
		t.Fatal(err)
	}
	return p
}

// Requests returns the requests so far.
func (s *Server) Requests() []Request {
	s.mu.Lock()
	defer s.mu.Unlock()
	return append([]Request(nil), s.requests...)
}

// SetPod adds or replaces a pod (ADDED or MODIFIED to watchers).
func (s *Server) SetPod(p *corev1.Pod) {
	p = p.DeepCopy()
	p.TypeMeta = metav1.TypeMeta{Kind: "Pod", APIVersion: "v1"}
	s.mu.Lock()
	defer s.mu.Unlock()
	s.rv++
	p.ResourceVersion = strconv.FormatInt(s.rv, 10)
	key := p.Namespace + "/" + p.Name
	typ := "ADDED"
	if _, ok := s.pods[key]; ok {
		typ = "MODIFIED"
	}
	s.pods[key] = p
	s.broadcastLocked(typ, p)
}

// DeletePod deletes a pod (DELETED to watchers).
func (s *Server) DeletePod(namespace, name string) {
	s.mu.Lock()
	defer s.mu.Unlock()
	key := namespace + "/" + name
	p, ok := s.pods[key]
	if !ok {
		return
	}
	delete(s.pods, key)
	s.rv++
	p = p.DeepCopy()
	p.ResourceVersion = strconv.FormatInt(s.rv, 10)
	s.broadcastLocked("DELETED", p)
}

// SetReplicaSet and SetJob add owners that GET finds.
func (s *Server) SetReplicaSet(r *appsv1.ReplicaSet) {
	r = r.DeepCopy()
	r.TypeMeta = metav1.TypeMeta{Kind: "ReplicaSet", APIVersion: "apps/v1"}
	s.mu.Lock()
	defer s.mu.Unlock()
	s.rs[r.Namespace+"/"+r.Name] = r
}

func (s *Server) SetJob(j *batchv1.Job) {
	j = j.DeepCopy()
	j.TypeMeta = metav1.TypeMeta{Kind: "Job", APIVersion: "batch/v1"}
	s.mu.Lock()
	defer s.mu.Unlock()
	s.jobs[j.Namespace+"/"+j.Name] = j
}

// Forbid denies a, as a ClusterRole without its rule does: each request
// for it is answered 403 with the API server's Status (reason Forbidden,
// details naming the resource, the message naming the user, verb,
// resource, API group and namespace), until Allow.
func (s *Server) Forbid(a Access) {
	s.mu.Lock()
	defer s.mu.Unlock()
	s.denied[a] = true
}

// Allow undoes Forbid.
func (s *Server) Allow(a Access) {
	s.mu.Lock()
	defer s.mu.Unlock()
	delete(s.denied, a)
}

// FailNext answers the next request for resource (any verb) with status
// (500 InternalError or 503 ServiceUnavailable, with the API server's
// Status), as an API server whose etcd is unavailable does.
func (s *Server) FailNext(resource string, status int) {
	s.mu.Lock()
	defer s.mu.Unlock()
	s.failNext[resource] = status
}

// EndWatches ends every open watch cleanly, as the API server does at a
// watch's timeout: a client watches again.
func (s *Server) EndWatches() {
	s.mu.Lock()
	defer s.mu.Unlock()
	for ch := range s.watchers {
		close(ch)
		delete(s.watchers, ch)
	}
}

// authorize answers a request RBAC (Forbid) or a failure (FailNext)
// rejects, and reports whether it did.
func (s *Server) authorize(w http.ResponseWriter, r *http.Request, a Access, namespace, name string) bool {
	s.mu.Lock()
	denied := s.denied[a]
	status, fail := s.failNext[a.Resource]
	if !denied && fail {
		delete(s.failNext, a.Resource)
	}
	s.mu.Unlock()
	var se *apierrors.StatusError
	switch {
	case denied:
		// k8s.io/apiserver's responsewriters.Forbidden and forbiddenMessage.
		msg := fmt.Sprintf("User %q cannot %s resource %q in API group %q", s.User, a.Verb, a.Resource, a.Group)
		if namespace != "" {
			msg += fmt.Sprintf(" in the namespace %q", namespace)
		} else {
			msg += " at the cluster scope"
		}
		se = apierrors.NewForbidden(schema.GroupResource{Group: a.Group, Resource: a.Resource}, name, errors.New(msg))
	case fail && status == http.StatusServiceUnavailable:
		se = apierrors.NewServiceUnavailable("etcd is unavailable")
	case fail:
		se = apierrors.NewInternalError(errors.New("etcd is unavailable"))
	default:
		return false
	}
	st := se.ErrStatus
	st.TypeMeta = metav1.TypeMeta{Kind: "Status", APIVersion: "v1"}
	s.record(r, int(st.Code))
	w.Header().Set("Content-Type", "application/json")
	w.WriteHeader(int(st.Code))
	_ = json.NewEncoder(w).Encode(&st)
	return true
}

func (s *Server) broadcastLocked(typ string, obj any) {
	b, err := json.Marshal(obj)
	if err != nil {
		panic(err) // our own types
	}
	for ch := range s.watchers {
		select {
		case ch <- event{Type: typ, Object: b}:
		default: // a watcher that does not read is cut off, as a real server does
			close(ch)
			delete(s.watchers, ch)
		}
	}
}

func (s *Server) record(r *http.Request, status int) {
	q := r.URL.Query()
	s.mu.Lock()
	s.requests = append(s.requests, Request{Method: r.Method, Path: r.URL.Path, RawQuery: r.URL.RawQuery,
		FieldSelector: q.Get("fieldSelector"), Watch: q.Get("watch") == "true" || q.Get("watch") == "1", Status: status})
	s.mu.Unlock()
}

func (s *Server) fail(w http.ResponseWriter, r *http.Request, code int, reason metav1.StatusReason, msg string) {
	s.record(r, code)
	w.Header().Set("Content-Type", "application/json")
	w.WriteHeader(code)
	_ = json.NewEncoder(w).Encode(&metav1.Status{TypeMeta: metav1.TypeMeta{Kind: "Status", APIVersion: "v1"},
		Status: metav1.StatusFailure, Message: msg, Reason: reason, Code: int32(code)})
}

// Warn adds text as a warning to every answer from now on ("" stops
// it), as the API server warns of a deprecated API or field: a Warning
// header with code 299, which client-go logs.
func (s *Server) Warn(text string) {
	s.mu.Lock()
	defer s.mu.Unlock()
	s.warning = text
}

func (s *Server) serve(w http.ResponseWriter, r *http.Request) {
	s.mu.Lock()
	warning := s.warning
	s.mu.Unlock()
	if warning != "" {
		w.Header().Add("Warning", "299 - "+strconv.Quote(warning))
	}
	if r.Header.Get("Authorization") != "Bearer "+s.Token {
		s.fail(w, r, http.StatusUnauthorized, metav1.StatusReasonUnauthorized, "Unauthorized")
		return
	}
	if r.Method != http.MethodGet {
		s.fail(w, r, http.StatusMethodNotAllowed, metav1.StatusReasonMethodNotAllowed, "only GET is served")
		return
	}
	parts := strings.Split(strings.Trim(r.URL.Path, "/"), "/")
	switch {
	case r.URL.Path == "/api/v1/pods":
		verb := "list"
		if q := r.URL.Query().Get("watch"); q == "true" || q == "1" {
			verb = "watch"
		}
		if !s.authorize(w, r, Access{Verb: verb, Resource: "pods"}, "", "") {
			s.servePods(w, r)
		}
	case len(parts) == 7 && parts[0] == "apis" && parts[1] == "apps" && parts[2] == "v1" && parts[3] == "namespaces" && parts[5] == "replicasets":
		if s.authorize(w, r, Access{Verb: "get", Group: "apps", Resource: "replicasets"}, parts[4], parts[6]) {
			return
		}
		s.get(w, r, func() any {
			if v, ok := s.rs[parts[4]+"/"+parts[6]]; ok {
				return v
			}
			return nil
		})
	case len(parts) == 7 && parts[0] == "apis" && parts[1] == "batch" && parts[2] == "v1" && parts[3] == "namespaces" && parts[5] == "jobs":
		if s.authorize(w, r, Access{Verb: "get", Group: "batch", Resource: "jobs"}, parts[4], parts[6]) {
			return
		}
		s.get(w, r, func() any {
			if v, ok := s.jobs[parts[4]+"/"+parts[6]]; ok {
				return v
			}
			return nil
		})
	default:
		s.fail(w, r, http.StatusNotFound, metav1.StatusReasonNotFound, "not served by kubetest: "+r.URL.Path)
	}
}

func (s *Server) get(w http.ResponseWriter, r *http.Request, find func() any) {
	s.mu.Lock()
	obj := find()
	s.mu.Unlock()
	if obj == nil {
		s.fail(w, r, http.StatusNotFound, metav1.StatusReasonNotFound, "not found")
		return
	}
	s.record(r, http.StatusOK)
	w.Header().Set("Content-Type", "application/json")
	_ = json.NewEncoder(w).Encode(obj)
}

func (s *Server) servePods(w http.ResponseWriter, r *http.Request) {
	q := r.URL.Query()
	// The list options are decoded and validated as the real API server's
	// list handler does (400 when they do not decode, 422 when they
	// contradict: sendInitialEvents without resourceVersionMatch=NotOlderThan
	// or on a plain list, resourceVersionMatch on a plain watch, ...).
	var opts metainternalversion.ListOptions
	if err := listParams.DecodeParameters(q, metav1.SchemeGroupVersion, &opts); err != nil {
		s.fail(w, r, http.StatusBadRequest, metav1.StatusReasonBadRequest, err.Error())
		return
	}
	if errs := metainternalversionvalidation.ValidateListOptions(&opts, true); len(errs) > 0 {
		s.fail(w, r, http.StatusUnprocessableEntity, metav1.StatusReasonInvalid, "ListOptions is invalid: "+errs.ToAggregate().Error())
		return
	}
	if want := "spec.nodeName=" + s.Node; q.Get("fieldSelector") != want {
		s.fail(w, r, http.StatusForbidden, metav1.StatusReasonForbidden,
			fmt.Sprintf("pods are served node-scoped only: fieldSelector must be %q, got %q", want, q.Get("fieldSelector")))
		return
	}
	if !opts.Watch {
		s.record(r, http.StatusOK)
		s.mu.Lock()
		list := corev1.PodList{TypeMeta: metav1.TypeMeta{Kind: "PodList", APIVersion: "v1"},
			ListMeta: metav1.ListMeta{ResourceVersion: strconv.FormatInt(s.rv, 10)}}
		for _, p := range s.pods {
			list.Items = append(list.Items, *p)
		}
		s.mu.Unlock()
		w.Header().Set("Content-Type", "application/json")
		_ = json.NewEncoder(w).Encode(&list)
		return
	}
	s.watch(w, r, opts.SendInitialEvents != nil && *opts.SendInitialEvents)
}

func (s *Server) watch(w http.ResponseWriter, r *http.Request, initial bool) {
	fl, ok := w.(http.Flusher)
	if !ok {
		s.fail(w, r, http.StatusInternalServerError, metav1.StatusReasonInternalError, "no flusher")
		return
	}
	s.record(r, http.StatusOK)
	ch := make(chan event, 256)
	s.mu.Lock()
	var first []event
	if initial {
		for _, p := range s.pods {
			b, _ := json.Marshal(p)
			first = append(first, event{Type: "ADDED", Object: b})
		}
		b, _ := json.Marshal(&corev1.Pod{TypeMeta: metav1.TypeMeta{Kind: "Pod", APIVersion: "v1"},
			ObjectMeta: metav1.ObjectMeta{ResourceVersion: strconv.FormatInt(s.rv, 10),
				Annotations: map[string]string{metav1.InitialEventsAnnotationKey: "true"}}})
		first = append(first, event{Type: "BOOKMARK", Object: b})
	}
	s.watchers[ch] = struct{}{}
	s.mu.Unlock()
	defer func() {
		s.mu.Lock()
		delete(s.watchers, ch)
		s.mu.Unlock()
	}()
	w.Header().Set("Content-Type", "application/json")
	w.WriteHeader(http.StatusOK)
	enc := json.NewEncoder(w)
	for _, e := range first {
		_ = enc.Encode(e)
	}
	fl.Flush()
	for {
		select {
		case e, ok := <-ch:
			if !ok {
				return
			}
			if enc.Encode(e) != nil {
				return
			}
			fl.Flush()
		case <-r.Context().Done():
			return
		case <-s.closed:
			return
		}
	}
}
