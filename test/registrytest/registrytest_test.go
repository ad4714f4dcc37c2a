package registrytest

import (
	"bytes"
	"io"
	"strings"
	"testing"

	"github.com/google/go-containerregistry/pkg/name"
	"github.com/google/go-containerregistry/pkg/v1/remote"
	"helm.sh/helm/v3/pkg/chart/loader"
	"helm.sh/helm/v3/pkg/registry"

	"github.com/tandem-profiler/tandem/tools/helmchart"
)

// TestServeRelease publishes the release to a registry on loopback, pulls
// the chart back from oci://127.0.0.1:PORT/... with Helm's registry
// client (helm pull), renders it as helm template does with the values a
// user sets for their own registry, and fetches the image each rendering
// names from the registry.
func TestServeRelease(t *testing.T) {
	p := ServeRelease(t)
	if !strings.HasPrefix(p.Chart, "oci://127.0.0.1:") {
		t.Fatalf("chart at %s, want oci://127.0.0.1:PORT/...", p.Chart)
	}
	client, err := registry.NewClient(registry.ClientOptPlainHTTP(), registry.ClientOptWriter(io.Discard))
	if err != nil {
		t.Fatal(err)
	}
	pulled, err := client.Pull(strings.TrimPrefix(p.Chart, "oci://") + ":" + p.ChartVersion)
	if err != nil {
		t.Fatalf("pull %s --version %s: %v", p.Chart, p.ChartVersion, err)
	}
	ch, err := loader.LoadArchive(bytes.NewReader(pulled.Chart.Data))
	if err != nil {
		t.Fatal(err)
	}
	if ch.Metadata.Version != p.ChartVersion {
		t.Errorf("pulled chart version %s, want %s", ch.Metadata.Version, p.ChartVersion)
	}
	for _, tc := range []struct {
		name  string
		image map[string]any
		want  string
	}{
		{"repository set, the chart's default tag", map[string]any{"repository": p.ImageRepository}, p.ImageRepository + ":" + p.ImageTag},
		{"repository and digest set", map[string]any{"repository": p.ImageRepository, "digest": p.ImageDigest}, p.ImageRepository + "@" + p.ImageDigest},
	} {
		t.Run(tc.name, func(t *testing.T) {
			r, err := helmchart.RenderChart(ch, helmchart.DefaultRelease, map[string]any{"image": tc.image})
			if err != nil {
				t.Fatal(err)
			}
			var images []string
			for _, m := range r.Manifests {
				for _, line := range strings.Split(m.YAML, "\n") {
					if s := strings.TrimSpace(line); strings.HasPrefix(s, "image:") {
						images = append(images, strings.Trim(strings.TrimSpace(strings.TrimPrefix(s, "image:")), `"'`))
					}
				}
			}
			if len(images) == 0 {
				t.Fatal("no image rendered")
			}
			for _, img := range images {
				if img != tc.want {
					t.Errorf("rendered image %s, want %s", img, tc.want)
				}
				ref, err := name.ParseReference(img, name.Insecure)
				if err != nil {
					t.Fatal(err)
				}
				desc, err := remote.Get(ref)
				if err != nil {
					t.Fatalf("the rendered image %s is not in the registry: %v", img, err)
				}
				if desc.Digest.String() != p.ImageDigest {
					t.Errorf("%s has digest %s, want %s", img, desc.Digest, p.ImageDigest)
				}
			}
		})
	}
}
