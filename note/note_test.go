package note_test

import (
	"strings"
	"testing"

	"github.com/stretchr/testify/require"

	"github.com/physiciansnet/capacityd"
	"github.com/physiciansnet/capacityd/note"
)

func TestValidateID(t *testing.T) {
	t.Parallel()
	for _, id := range []string{"a", "Z", "0", "_", "-", "note-42_Ab", strings.Repeat("x", 128)} {
		require.NoError(t, note.ValidateID(id), "%q", id)
	}
	for _, id := range []string{"", strings.Repeat("x", 129), "a b", "a/b", "a.b", "a%41", "é", "a\x00", "\xff", "a\n", "日本"} {
		err := note.ValidateID(id)
		require.Error(t, err, "%q", id)
		require.Equal(t, capacityd.EInvalid, capacityd.ErrorCode(err), "%q", id)
	}
}
