// Package kubetest is a Kubernetes API server for tests: the part of the
// REST API a node-scoped pod informer uses, over real HTTPS (client-go
// sends a kubeconfig's token only over TLS).
//
// It serves list and watch of pods (plain list then watch, and the
// watch-list stream client-go uses by default: initial ADDED events, then
// the bookmark marked k8s.io/initial-events-end), and GET of ReplicaSets
// and Jobs, in JSON. It is as strict as it needs to be to catch a client
// that is not node-scoped or not authenticated: every request must carry
// the bearer token (401 otherwise), pod lists and watches must select
// fieldSelector=spec.nodeName=<node> (403 otherwise, as RBAC-less
// clients would get from a real cluster's node authorizer), their list
// options must decode and pass apimachinery's ValidateListOptions, as the
// real list handler requires (400 or 422 otherwise), and anything else is
// 404. Forbid denies a verb on a resource as a ClusterRole without its
// rule does (403 with the API server's Status: reason Forbidden, details,
// and its message naming user, verb, resource, group and namespace),
// FailNext answers a resource's next request 500 or 503, and EndWatches
// ends the open watches as a watch timeout does. Warn adds a warning (a
// Warning header, as for a deprecated API) to every answer. Every
// request is recorded for the test to check.
//
// A Server is safe for concurrent use.
package kubetest
