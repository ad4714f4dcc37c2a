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
// 404. Every request is recorded for the test to check.
//
// A Server is safe for concurrent use.
package kubetest
