package kube

import (
	"fmt"
	"strings"

	"k8s.io/apimachinery/pkg/runtime/schema"
)

// lookup is one kind of API request the Informer makes, as RBAC names it:
// a verb on a resource. A 403 is a missing ClusterRole rule for exactly
// this pair, so its warning stays until a request of the same lookup
// succeeds (see Informer.apiError).
type lookup struct {
	verb     string
	resource schema.GroupVersionResource
}

// The lookups, with what a 403 on each costs the samples.
var (
	listPods       = lookup{"list", podsResource}
	watchPods      = lookup{"watch", podsResource}
	getReplicaSets = lookup{"get", replicaSetsResource}
	getJobs        = lookup{"get", jobsResource}

	lookups = []lookup{listPods, watchPods, getReplicaSets, getJobs}

	forbiddenCost = map[lookup]string{
		listPods:       "no pod of this node is known: samples go out without Kubernetes labels",
		watchPods:      "pod changes are not watched: new pods are known only after a relist, their first samples without Kubernetes labels",
		getReplicaSets: "ReplicaSets' owners are not read: Deployments are named only by the pod-template-hash naming rule, other owners of ReplicaSets not at all",
		getJobs:        "Jobs' owners are not read: samples of CronJobs' pods carry no k8s.cronjob.name, and their service.name is the Job's name",
	}
)

// String is the lookup as RBAC writes it: "get replicasets.apps", "list pods".
func (l lookup) String() string { return l.verb + " " + l.groupResource() }

func (l lookup) groupResource() string {
	return l.resource.GroupResource().String()
}

// rule is the ClusterRole rule that allows the lookup.
func (l lookup) rule() string {
	return fmt.Sprintf(`{apiGroups: [%q], resources: [%q], verbs: [%q]}`, l.resource.Group, l.resource.Resource, l.verb)
}

// forbiddenWarning is the /readyz warning of a forbidden lookup: what
// failed, what it costs, the fix, and that it stays until the lookup works.
func (l lookup) forbiddenWarning(err error) string {
	msg := strings.ReplaceAll(err.Error(), "\n", " ")
	return fmt.Sprintf("kubernetes %s forbidden (403): %s; %s; fix: add the rule %s to the encoder's ClusterRole (tandem-encoder: deploy/kubernetes/daemonset.yaml, the chart's rbac.yaml); this warning stays until a %s succeeds",
		l, msg, forbiddenCost[l], l.rule(), l)
}
