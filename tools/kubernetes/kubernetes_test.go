package kubernetes

import (
	"strings"
	"testing"
)

func TestStagingVersion(t *testing.T) {
	for _, tc := range []struct{ in, want string }{
		{"v1.37.2", "v0.37.2"},
		{"v1.40.10", "v0.40.10"},
		{"1.37.2", ""},
		{"v1.37", ""},
	} {
		got, err := stagingVersion(tc.in)
		if (err != nil) != (tc.want == "") || got != tc.want {
			t.Errorf("stagingVersion(%q) = %q, %v; want %q", tc.in, got, err, tc.want)
		}
	}
	if _, err := stagingVersion(Version); err != nil {
		t.Errorf("version.txt: %v", err)
	}
}

func TestStagingModules(t *testing.T) {
	gomod := `module k8s.io/kubernetes

require k8s.io/api v0.0.0

replace (
	k8s.io/api => ./staging/src/k8s.io/api
	k8s.io/client-go => ./staging/src/k8s.io/client-go
	example.com/other => example.com/other v1.0.0
)

replace k8s.io/kubectl => ./staging/src/k8s.io/kubectl
`
	got := strings.Join(stagingModules([]byte(gomod)), " ")
	if want := "k8s.io/api k8s.io/client-go k8s.io/kubectl"; got != want {
		t.Errorf("staging modules %q, want %q", got, want)
	}
	mod := scratchGoMod("v1.37.2", "v0.37.2", []string{"k8s.io/api"})
	if !strings.Contains(mod, "require k8s.io/kubernetes v1.37.2") || !strings.Contains(mod, "k8s.io/api => k8s.io/api v0.37.2") {
		t.Errorf("scratch go.mod:\n%s", mod)
	}
}

func TestVersionLDFlags(t *testing.T) {
	got := versionLDFlags("v1.37.2")
	for _, want := range []string{"-X k8s.io/component-base/version.gitVersion=v1.37.2", "-X k8s.io/component-base/version.gitMajor=1", "-X k8s.io/client-go/pkg/version.gitMinor=37"} {
		if !strings.Contains(got, want) {
			t.Errorf("ldflags %q lack %q", got, want)
		}
	}
}
