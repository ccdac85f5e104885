package loadtest

import (
	"bufio"
	"strconv"
	"strings"
)

// SumMetric sums, in Prometheus text exposition, the samples of the metric
// name (exactly; not its _bucket/_sum/_count series) whose label set
// contains every one of labels (each written as name="value").
func SumMetric(text, name string, labels ...string) (float64, bool) {
	var sum float64
	found := false
	sc := bufio.NewScanner(strings.NewReader(text))
	sc.Buffer(make([]byte, 0, 64*1024), 1024*1024)
	for sc.Scan() {
		line := strings.TrimSpace(sc.Text())
		if line == "" || line[0] == '#' {
			continue
		}
		series, value, ok := cutValue(line)
		if !ok {
			continue
		}
		metric, labelSet := series, ""
		if i := strings.IndexByte(series, '{'); i >= 0 {
			metric, labelSet = series[:i], series[i:]
		}
		if metric != name || !hasLabels(labelSet, labels) {
			continue
		}
		sum += value
		found = true
	}
	return sum, found
}

// cutValue splits "series value [timestamp]" into the series and value.
func cutValue(line string) (string, float64, bool) {
	end := strings.LastIndexByte(line, '}')
	rest := line
	series := ""
	if end >= 0 {
		series, rest = line[:end+1], strings.TrimSpace(line[end+1:])
	} else {
		f := strings.Fields(line)
		if len(f) < 2 {
			return "", 0, false
		}
		series, rest = f[0], strings.Join(f[1:], " ")
	}
	f := strings.Fields(rest)
	if len(f) == 0 {
		return "", 0, false
	}
	v, err := strconv.ParseFloat(f[0], 64)
	return series, v, err == nil
}

func hasLabels(set string, labels []string) bool {
	for _, l := range labels {
		if !strings.Contains(set, "{"+l) && !strings.Contains(set, ","+l) {
			return false
		}
	}
	return true
}
