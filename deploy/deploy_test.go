// Package deploy holds the files of a deployment of capacityd: the
// HAProxy configuration and its JSON error answers, the PgBouncer
// configuration and an example of its user list (the files the scale-out
// tests run, docs/deploy.md), the Prometheus alert rules and the Grafana
// dashboard. Its tests check that the alerts and the dashboard name only
// metrics the service exports, that the proxy's answers are in the API's
// error shape, and that docs/deploy.md shows the files as they are.
package deploy

import (
	"encoding/json"
	"net/http"
	"os"
	"regexp"
	"strings"
	"testing"

	"github.com/prometheus/client_golang/prometheus"
	"github.com/stretchr/testify/require"
	"go.yaml.in/yaml/v3"

	"github.com/physiciansnet/capacityd/httpapi"
	"github.com/physiciansnet/capacityd/internal/app"
	"github.com/physiciansnet/capacityd/internal/test/apptest"
)

// exportedMetrics starts an instance with every part on, sends it a few
// requests, and returns the metric names it exports: those its /metrics
// page shows, and those registered that have no sample yet (a labelled
// counter shows nothing until a label value is used).
func exportedMetrics(t *testing.T) (scraped, registered map[string]bool) {
	t.Helper()
	inst := apptest.Start(t, apptest.Options{App: app.Options{
		HTTP: httpapi.Config{PublicWriteLimit: httpapi.RateLimit{PerSecond: 100, Burst: 100}, SignupLimit: httpapi.RateLimit{PerSecond: 100, Burst: 100}},
	}})
	id := inst.CreateActivity(t, "metrics", 5)
	require.Equal(t, http.StatusCreated, inst.MustDo(t, http.MethodPost, "/v1/activities/"+id+"/registrations", inst.Token(t, "alice", false), `{}`).Status)
	require.Equal(t, http.StatusOK, inst.MustDo(t, http.MethodGet, "/v1/activities/"+id+"/seats", "", nil).Status)
	require.Equal(t, http.StatusOK, inst.MustDo(t, http.MethodPost, "/v1/notes/metrics/views", "", nil).Status)
	page := inst.MustDo(t, http.MethodGet, "/metrics", "", nil)
	require.Equal(t, http.StatusOK, page.Status)

	scraped = map[string]bool{}
	for _, line := range strings.Split(string(page.Body), "\n") {
		if line == "" || strings.HasPrefix(line, "#") {
			continue
		}
		scraped[strings.FieldsFunc(line, func(r rune) bool { return r == '{' || r == ' ' })[0]] = true
	}
	registered = map[string]bool{}
	descs := make(chan *prometheus.Desc)
	go func() { inst.App.Registry.Describe(descs); close(descs) }()
	fqName := regexp.MustCompile(`fqName: "([^"]+)"`)
	for d := range descs {
		m := fqName.FindStringSubmatch(d.String())
		require.NotNil(t, m, d.String())
		registered[m[1]] = true
	}
	return scraped, registered
}

// exported reports whether a query may name metric: a series the service
// exports, or the _bucket, _sum or _count series of a registered
// histogram. up is Prometheus's own.
func exported(scraped, registered map[string]bool, metric string) bool {
	if metric == "up" || scraped[metric] || registered[metric] {
		return true
	}
	for _, suffix := range []string{"_bucket", "_sum", "_count"} {
		if base, ok := strings.CutSuffix(metric, suffix); ok && registered[base] {
			return true
		}
	}
	return false
}

// metricNames are the names of a PromQL expression that are metrics of
// the service, the Go runtime, the process, Prometheus (up), or
// postgres_exporter's queries of the authority (pg_ha_).
var metricNames = regexp.MustCompile(`\b(?:(?:capacityd|go|process|pg_ha)_[A-Za-z0-9_]+|up)\b`)

// exporterMetrics returns the metrics that
// prometheus/postgres_exporter_queries.yaml has postgres_exporter export:
// <query>_<column> for each column that is not a label.
func exporterMetrics(t *testing.T) map[string]bool {
	t.Helper()
	b, err := os.ReadFile("prometheus/postgres_exporter_queries.yaml")
	require.NoError(t, err)
	var queries map[string]struct {
		Query   string
		Metrics []map[string]struct{ Usage string }
	}
	require.NoError(t, yaml.Unmarshal(b, &queries))
	out := map[string]bool{}
	for q, def := range queries {
		require.NotEmpty(t, def.Query, q)
		for _, m := range def.Metrics {
			for col, c := range m {
				if c.Usage != "LABEL" {
					out[q+"_"+col] = true
				}
			}
		}
	}
	require.NotEmpty(t, out)
	return out
}

func alertExprs(t *testing.T) map[string]string {
	t.Helper()
	b, err := os.ReadFile("prometheus/alerts.yml")
	require.NoError(t, err)
	var file struct {
		Groups []struct {
			Rules []struct {
				Alert       string
				Expr        string
				Labels      map[string]string
				Annotations map[string]string
			}
		}
	}
	require.NoError(t, yaml.Unmarshal(b, &file))
	out := map[string]string{}
	for _, g := range file.Groups {
		for _, r := range g.Rules {
			require.NotEmpty(t, r.Labels["severity"], r.Alert)
			require.NotEmpty(t, r.Annotations["summary"], r.Alert)
			out["alert "+r.Alert] = r.Expr
		}
	}
	require.NotEmpty(t, out)
	return out
}

// dashboardPanel is a panel of the dashboard; rows may hold panels.
type dashboardPanel struct {
	ID      int
	Title   string
	Targets []struct{ Expr string }
	Panels  []dashboardPanel
}

func dashboardExprs(t *testing.T) map[string]string {
	t.Helper()
	b, err := os.ReadFile("grafana/capacityd.json")
	require.NoError(t, err)
	var dash struct {
		UID    string
		Panels []dashboardPanel
	}
	require.NoError(t, json.Unmarshal(b, &dash))
	require.Equal(t, "capacityd", dash.UID)
	out := map[string]string{}
	ids := map[int]bool{}
	var walk func([]dashboardPanel)
	walk = func(ps []dashboardPanel) {
		for _, p := range ps {
			require.False(t, ids[p.ID], "panel id %d twice", p.ID)
			ids[p.ID] = true
			for i, tg := range p.Targets {
				out["panel "+p.Title+" #"+string(rune('A'+i))] = tg.Expr
			}
			walk(p.Panels)
		}
	}
	walk(dash.Panels)
	require.NotEmpty(t, out)
	return out
}

func TestAlertsAndDashboardNameOnlyExportedMetrics(t *testing.T) {
	t.Parallel()
	scraped, registered := exportedMetrics(t)
	require.True(t, scraped["capacityd_http_requests_total"], "the scrape worked")
	require.False(t, exported(scraped, registered, "capacityd_no_such_metric_total"), "the check can fail")

	pgMetrics := exporterMetrics(t)
	queries := alertExprs(t)
	for where, expr := range dashboardExprs(t) {
		queries[where] = expr
	}
	for where, expr := range queries {
		names := metricNames.FindAllString(expr, -1)
		require.NotEmpty(t, names, "%s names no metric: %s", where, expr)
		for _, n := range names {
			if strings.HasPrefix(n, "pg_ha_") {
				require.True(t, pgMetrics[n], "%s names %s, which the postgres_exporter queries do not define", where, n)
				continue
			}
			require.True(t, exported(scraped, registered, n), "%s names %s, which capacityd does not export", where, n)
		}
	}
}
