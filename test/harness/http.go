package harness

import (
	"bufio"
	"net/http"
	"strconv"
	"strings"
	"testing"
	"time"
)

// EncoderMetric reads one metric from the /metrics of an encoder at addr,
// summing its label sets (name may carry labels: `x_total{type="batch"}`);
// a metric that was never touched reads as 0. It fails t if /metrics
// cannot be read.
func EncoderMetric(t testing.TB, addr, name string) float64 {
	t.Helper()
	resp, err := http.Get("http://" + addr + "/metrics")
	if err != nil {
		t.Fatalf("read encoder metrics: %v", err)
	}
	defer resp.Body.Close()
	var sum float64
	sc := bufio.NewScanner(resp.Body)
	for sc.Scan() {
		line := sc.Text()
		if !strings.HasPrefix(line, name) || (len(line) > len(name) && line[len(name)] != ' ' && line[len(name)] != '{') {
			continue
		}
		f := strings.Fields(line)
		v, err := strconv.ParseFloat(f[len(f)-1], 64)
		if err == nil {
			sum += v
		}
	}
	return sum
}

// HTTPOK reports whether a GET of http://url answers 200 within a second.
func HTTPOK(url string) bool {
	c := http.Client{Timeout: time.Second}
	resp, err := c.Get("http://" + url)
	if err != nil {
		return false
	}
	resp.Body.Close()
	return resp.StatusCode == http.StatusOK
}
