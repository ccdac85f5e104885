package registration

import (
	"crypto/subtle"
)

// admitted checks a signup's admission: the activity's window, then, where
// it has a queue, the signup's token, which must be an admitted,
// unexpired place of the signup's own user that no other signup of the
// batch used.
func (d *decision) admitted(c SignupCommand) error {
	if !d.act.Open(d.st.At) {
		return RegistrationClosed(d.act)
	}
	if d.act.Queue == nil || c.WalkIn {
		return nil
	}
	a, ok := d.st.Admissions[c.AdmissionToken]
	if c.AdmissionToken == "" || !ok || d.usedTokens[c.AdmissionToken] ||
		subtle.ConstantTimeCompare([]byte(a.UserID), []byte(c.UserID)) != 1 || !d.st.At.Before(a.ExpiresAt) {
		return AdmissionRequired(d.act.ID)
	}
	return nil
}

// useToken records that a signup's admission token made a registration.
func (d *decision) useToken(c SignupCommand) {
	if d.act.Queue == nil || c.AdmissionToken == "" {
		return
	}
	if d.usedTokens == nil {
		d.usedTokens = make(map[string]bool)
	}
	d.usedTokens[c.AdmissionToken] = true
	d.tokens = append(d.tokens, c.AdmissionToken)
}

// patchOnSale applies a patch's window and queue, when the window they
// leave closes after it opens. It runs before any other field of the
// patch is applied: a refused patch changes nothing.
func (d *decision) patchOnSale(p ActivityPatch) error {
	opens, closes := p.OpensAt.Or(d.act.OpensAt), p.ClosesAt.Or(d.act.ClosesAt)
	if err := ValidateWindow(opens, closes); err != nil {
		return err
	}
	d.act.OpensAt, d.act.ClosesAt = opens, closes
	d.act.Queue = p.Queue.Or(d.act.Queue)
	return nil
}
