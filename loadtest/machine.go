package loadtest

import (
	"bufio"
	"context"
	"fmt"
	"os"
	"runtime"
	"strconv"
	"strings"
	"time"

	"github.com/jackc/pgx/v5"
	"github.com/redis/go-redis/v9"
)

// DescribeMachine returns a one-line description of the machine and the
// servers: CPU, memory, load, OS, Go, PostgreSQL and Redis versions.
func DescribeMachine(ctx context.Context, dbURL, redisURL string) string {
	ctx, cancel := context.WithTimeout(ctx, 5*time.Second)
	defer cancel()
	parts := []string{fmt.Sprintf("%d CPUs", runtime.NumCPU())}
	if m := cpuModel(); m != "" {
		parts[0] += " (" + m + ")"
	}
	if g := memoryGiB(); g > 0 {
		parts = append(parts, fmt.Sprintf("%.0f GiB RAM", g))
	}
	if l := loadAverage(); l != "" {
		parts = append(parts, "load average "+l+" at start")
	}
	parts = append(parts, runtime.GOOS+"/"+runtime.GOARCH, runtime.Version())
	if v := postgresVersion(ctx, dbURL); v != "" {
		parts = append(parts, "PostgreSQL "+v)
	}
	if v := redisVersion(ctx, redisURL); v != "" {
		parts = append(parts, "Redis "+v)
	}
	return strings.Join(parts, ", ")
}

func cpuModel() string {
	f, err := os.Open("/proc/cpuinfo")
	if err != nil {
		return ""
	}
	defer f.Close()
	sc := bufio.NewScanner(f)
	for sc.Scan() {
		if k, v, ok := strings.Cut(sc.Text(), ":"); ok && strings.TrimSpace(k) == "model name" {
			return strings.Join(strings.Fields(v), " ")
		}
	}
	return ""
}

func memoryGiB() float64 {
	b, err := os.ReadFile("/proc/meminfo")
	if err != nil {
		return 0
	}
	for _, line := range strings.Split(string(b), "\n") {
		if f := strings.Fields(line); len(f) >= 2 && f[0] == "MemTotal:" {
			kb, _ := strconv.ParseFloat(f[1], 64)
			return kb / (1 << 20)
		}
	}
	return 0
}

func loadAverage() string {
	b, err := os.ReadFile("/proc/loadavg")
	if err != nil {
		return ""
	}
	f := strings.Fields(string(b))
	if len(f) < 3 {
		return ""
	}
	return strings.Join(f[:3], " ")
}

func postgresVersion(ctx context.Context, dbURL string) string {
	conn, err := pgx.Connect(ctx, dbURL)
	if err != nil {
		return ""
	}
	defer conn.Close(context.WithoutCancel(ctx))
	var v string
	var maxConns int
	if conn.QueryRow(ctx, `SELECT current_setting('server_version'), current_setting('max_connections')::int`).Scan(&v, &maxConns) != nil {
		return ""
	}
	return fmt.Sprintf("%s (max_connections %d)", v, maxConns)
}

func redisVersion(ctx context.Context, redisURL string) string {
	if redisURL == "" {
		return ""
	}
	opt, err := redis.ParseURL(redisURL)
	if err != nil {
		return ""
	}
	c := redis.NewClient(opt)
	defer c.Close()
	info, err := c.Info(ctx, "server").Result()
	if err != nil {
		return ""
	}
	for _, line := range strings.Split(info, "\n") {
		if v, ok := strings.CutPrefix(strings.TrimSpace(line), "redis_version:"); ok {
			return v
		}
	}
	return ""
}
