package loadtest

import (
	"testing"

	"github.com/stretchr/testify/require"
)

func TestSumCommandCallsLeavesINFOOut(t *testing.T) {
	info := "# Commandstats\r\n" +
		"cmdstat_evalsha:calls=12,usec=300,usec_per_call=25.00,rejected_calls=0,failed_calls=0\r\n" +
		"cmdstat_info:calls=5,usec=100,usec_per_call=20.00,rejected_calls=0,failed_calls=0\r\n" +
		"cmdstat_publish:calls=3,usec=9,usec_per_call=3.00,rejected_calls=0,failed_calls=0\r\n"
	require.EqualValues(t, 15, sumCommandCalls(info))
}
