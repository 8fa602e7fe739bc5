// Package deploy holds what an operator deploys (Kubernetes, Prometheus
// rules, Grafana dashboard); its test checks that every series they use
// is one vramscope watch exports.
package deploy

import (
	"encoding/json"
	"os"
	"regexp"
	"strings"
	"testing"
)

var metricName = regexp.MustCompile(`\b(vramscope_[a-z_]+|DCGM_FI_[A-Z_]+)\b`)

// exported reads the metric names of watch's golden /metrics.
func exported(t *testing.T) map[string]bool {
	b, err := os.ReadFile("../watch/metrics/testdata/metrics.golden")
	if err != nil {
		t.Fatal(err)
	}
	names := map[string]bool{}
	for line := range strings.Lines(string(b)) {
		if f := strings.Fields(line); len(f) >= 3 && f[0] == "#" && f[1] == "TYPE" {
			names[f[2]] = true
		}
	}
	return names
}

func checkNames(t *testing.T, where, expr string, names map[string]bool) {
	t.Helper()
	for _, m := range metricName.FindAllString(expr, -1) {
		if !names[m] {
			t.Errorf("%s uses %s, which watch does not export", where, m)
		}
	}
}

func TestRulesUseExportedSeries(t *testing.T) {
	names := exported(t)
	b, err := os.ReadFile("prometheus/vramscope.rules.yml")
	if err != nil {
		t.Fatal(err)
	}
	n := 0
	for line := range strings.Lines(string(b)) {
		if strings.HasPrefix(strings.TrimSpace(line), "#") {
			continue
		}
		n += len(metricName.FindAllString(line, -1))
		checkNames(t, "vramscope.rules.yml", line, names)
	}
	if n < 5 {
		t.Errorf("found %d series in the rules", n)
	}
}

func TestDashboard(t *testing.T) {
	names := exported(t)
	b, err := os.ReadFile("grafana/vramscope.json")
	if err != nil {
		t.Fatal(err)
	}
	var dash struct {
		UID    string `json:"uid"`
		Panels []struct {
			ID         int    `json:"id"`
			Title      string `json:"title"`
			Datasource struct {
				UID string `json:"uid"`
			} `json:"datasource"`
			Targets []struct {
				Expr string `json:"expr"`
			} `json:"targets"`
		} `json:"panels"`
	}
	if err := json.Unmarshal(b, &dash); err != nil {
		t.Fatal(err)
	}
	if dash.UID == "" || len(dash.Panels) < 8 {
		t.Fatalf("uid %q, %d panels", dash.UID, len(dash.Panels))
	}
	ids := map[int]bool{}
	for _, p := range dash.Panels {
		if ids[p.ID] {
			t.Errorf("panel id %d twice", p.ID)
		}
		ids[p.ID] = true
		if p.Datasource.UID != "${datasource}" || len(p.Targets) == 0 {
			t.Errorf("panel %q: datasource %q, %d targets", p.Title, p.Datasource.UID, len(p.Targets))
		}
		for _, tg := range p.Targets {
			if len(metricName.FindAllString(tg.Expr, -1)) == 0 {
				t.Errorf("panel %q: %q uses no vramscope series", p.Title, tg.Expr)
			}
			checkNames(t, "panel "+p.Title, tg.Expr, names)
		}
	}
}
