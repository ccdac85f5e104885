package loadtest

import (
	"bufio"
	"context"
	"fmt"
	"strconv"
	"strings"

	"github.com/redis/go-redis/v9"
)

// redisCommands returns the commands the Redis server ran since its
// statistics were reset, from INFO commandstats, leaving out INFO itself
// (the reading's own command). The count is the server's: a Redis shared
// with other clients counts theirs too.
func redisCommands(ctx context.Context, rdb *redis.Client) (int64, error) {
	text, err := rdb.Info(ctx, "commandstats").Result()
	if err != nil {
		return 0, fmt.Errorf("loadtest: read Redis commandstats: %w", err)
	}
	return sumCommandCalls(text), nil
}

// sumCommandCalls adds the calls of every cmdstat_ line of INFO
// commandstats but INFO's ("cmdstat_get:calls=21,usec=…").
func sumCommandCalls(info string) int64 {
	var n int64
	sc := bufio.NewScanner(strings.NewReader(info))
	for sc.Scan() {
		name, stats, ok := strings.Cut(strings.TrimSpace(sc.Text()), ":")
		if !ok || !strings.HasPrefix(name, "cmdstat_") || name == "cmdstat_info" {
			continue
		}
		for _, kv := range strings.Split(stats, ",") {
			if v, ok := strings.CutPrefix(kv, "calls="); ok {
				c, _ := strconv.ParseInt(v, 10, 64)
				n += c
			}
		}
	}
	return n
}
