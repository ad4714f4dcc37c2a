package repo

import (
	"strings"
	"testing"

	"sigs.k8s.io/yaml"

	psapi "k8s.io/pod-security-admission/api"
	"k8s.io/pod-security-admission/policy"
)

// TestChartPodSecurity evaluates the rendered pod with Pod Security
// admission's own checks, as the namespace's warn and audit labels
// (restricted) do: no finding names the encoder container, whatever the
// output (the pprof files' hostPath is reported as a volume of the pod,
// with the sampler's tracefs). The init container that prepares that
// hostPath stays within "baseline": no baseline finding names it.
func TestChartPodSecurity(t *testing.T) {
	eval, err := policy.NewEvaluator(policy.DefaultChecks(), nil)
	if err != nil {
		t.Fatal(err)
	}
	for _, values := range []string{
		"",
		`output: {pprof: {hostPath: ""}}`,
		`output: {remoteStore: {address: "c:4317"}}`,
		`debugFiles: {hostPath: /usr/lib/debug}`,
	} {
		t.Run(values, func(t *testing.T) {
			v := map[string]any{}
			if err := yaml.Unmarshal([]byte(values), &v); err != nil {
				t.Fatal(err)
			}
			m, _ := render(t, v)
			pod := m.daemonSets[0].Spec.Template
			for _, tc := range []struct {
				level psapi.Level
				not   []string
			}{
				{psapi.LevelRestricted, []string{`"encoder"`}},
				{psapi.LevelBaseline, []string{`"encoder"`, `"prepare-profiles"`}},
			} {
				var findings []string
				for _, r := range eval.EvaluatePod(psapi.LevelVersion{Level: tc.level, Version: psapi.LatestVersion()}, &pod.ObjectMeta, &pod.Spec) {
					if !r.Allowed {
						findings = append(findings, r.ForbiddenReason+" ("+r.ForbiddenDetail+")")
					}
				}
				t.Logf("%s: %s", tc.level, strings.Join(findings, "; "))
				for _, f := range findings {
					for _, name := range tc.not {
						if strings.Contains(f, name) {
							t.Errorf("Pod Security %s names container %s: %s", tc.level, name, f)
						}
					}
				}
			}
		})
	}
}
