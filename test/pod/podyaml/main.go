package main

import (
	"flag"
	"fmt"
	"os"

	"sigs.k8s.io/yaml"

	"github.com/tandem-profiler/tandem/test/pod"
)

func main() {
	chart := flag.String("chart", "deploy/helm/tandem", "the chart's directory")
	valuesFile := flag.String("values", "", "YAML file of chart values (as helm install -f)")
	socketDir := flag.String("socket-dir", "/tmp/tandem-socket", "mode 0777 directory for the socket (the emptyDir a kubelet would make)")
	flag.Parse()
	values := map[string]any{}
	if *valuesFile != "" {
		data, err := os.ReadFile(*valuesFile)
		if err == nil {
			err = yaml.Unmarshal(data, &values)
		}
		if err != nil {
			fmt.Fprintf(os.Stderr, "podyaml: values %s: %v\n", *valuesFile, err)
			os.Exit(2)
		}
	}
	host, err := os.Hostname()
	if err == nil {
		var manifest []byte
		manifest, err = pod.PodYAML(pod.PodConfig{ChartDir: *chart, Values: values, SocketDir: *socketDir, NodeName: host})
		if err == nil {
			_, err = os.Stdout.Write(manifest)
		}
	}
	if err != nil {
		fmt.Fprintf(os.Stderr, "podyaml: %v\n", err)
		os.Exit(1)
	}
}
