// Package helmchart renders Tandem's Helm chart (deploy/helm/tandem) with
// Helm's own Go library, as `helm install` and `helm template` do: the
// chart's values schema is applied, templates run in strict mode, and the
// manifests come out in Helm's install order. The chart tests, the
// rendered deploy/kubernetes/daemonset.yaml and the pod test all go
// through Render, so there is one way to turn values into manifests.
// Imported only by tests and repository tooling.
package helmchart
