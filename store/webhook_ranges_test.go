package store

import (
	"testing"

	"github.com/stretchr/testify/require"
)

func TestMergeRangesReadsEachEventOnce(t *testing.T) {
	t.Parallel()
	in := []seqRange{
		{activity: 2, from: 10, to: 20},
		{activity: 1, from: 0, to: 256}, // two webhooks' batches of one activity
		{activity: 1, from: 100, to: 300},
		{activity: 1, from: 300, to: 310}, // adjacent: (300, 310] follows (100, 300]
		{activity: 1, from: 400, to: 500}, // a gap: another range
		{activity: 2, from: 12, to: 15},   // inside another
	}
	require.Equal(t, []seqRange{
		{activity: 1, from: 0, to: 310},
		{activity: 1, from: 400, to: 500},
		{activity: 2, from: 10, to: 20},
	}, mergeRanges(in))
	require.Equal(t, seqRange{activity: 2, from: 10, to: 20}, in[0], "the batches' ranges are left as they were")
	require.Empty(t, mergeRanges(nil))
}
