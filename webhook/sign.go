package webhook

import (
	"net/http"
	"strconv"
	"time"

	standardwebhooks "github.com/standard-webhooks/standard-webhooks/libraries/go"
)

// The headers of a delivery, as the Standard Webhooks specification names
// them.
const (
	HeaderID        = standardwebhooks.HeaderWebhookID
	HeaderTimestamp = standardwebhooks.HeaderWebhookTimestamp
	HeaderSignature = standardwebhooks.HeaderWebhookSignature
)

// sign sets the Standard Webhooks headers of one attempt on h: the message
// id (the event id, the same on every retry), the attempt's Unix time, and
// "v1,<base64 HMAC-SHA256 of id.timestamp.body>" keyed with the webhook's
// key. The signing is the specification's reference library's.
func sign(h http.Header, key []byte, id string, at time.Time, body []byte) error {
	wh, err := standardwebhooks.NewWebhookRaw(key)
	if err != nil {
		return err
	}
	sig, err := wh.Sign(id, at, body)
	if err != nil {
		return err
	}
	h.Set(HeaderID, id)
	h.Set(HeaderTimestamp, strconv.FormatInt(at.Unix(), 10))
	h.Set(HeaderSignature, sig)
	return nil
}
