package whatsappcloud

import (
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"io"
	"mime/multipart"
	"net/http"
	"strconv"
	"strings"
	"time"

	"github.com/switchboard/switchboard/internal/channels"
)

// graph is a Graph API client of one account.
type graph struct {
	http *http.Client
	a    account
}

// graphError is the Graph API's error object.
type graphError struct {
	Status    int
	Message   string `json:"message"`
	Type      string `json:"type"`
	Code      int    `json:"code"`
	Subcode   int    `json:"error_subcode"`
	ErrorData struct {
		Details string `json:"details"`
	} `json:"error_data"`
	RetryAfter time.Duration
}

func (e *graphError) Error() string {
	s := fmt.Sprintf("graph API error %d (HTTP %d): %s", e.Code, e.Status, e.Message)
	if e.ErrorData.Details != "" {
		s += ": " + e.ErrorData.Details
	}
	return s
}

// do calls the Graph API: a JSON body (or a prepared multipart one with its content type), decoding the answer
// into out. A Graph error object is returned as *graphError; no answer at all as a plain error.
func (g *graph) do(ctx context.Context, method, path string, body any, contentType string, out any) error {
	var r io.Reader
	switch b := body.(type) {
	case nil:
	case *bytes.Buffer:
		r = b
	default:
		raw, err := json.Marshal(b)
		if err != nil {
			return err
		}
		r, contentType = bytes.NewReader(raw), "application/json"
	}
	req, err := http.NewRequestWithContext(ctx, method, g.a.base+path, r)
	if err != nil {
		return err
	}
	req.Header.Set("Authorization", "Bearer "+g.a.token)
	if contentType != "" {
		req.Header.Set("Content-Type", contentType)
	}
	res, err := g.http.Do(req)
	if err != nil {
		return fmt.Errorf("whatsapp_cloud: %s %s: %w", method, path, err)
	}
	defer res.Body.Close()
	raw, err := io.ReadAll(io.LimitReader(res.Body, 16<<20))
	if err != nil {
		return fmt.Errorf("whatsapp_cloud: %s %s: reading the answer: %w", method, path, err)
	}
	if res.StatusCode >= 300 {
		var wrap struct {
			Error *graphError `json:"error"`
		}
		if json.Unmarshal(raw, &wrap) != nil || wrap.Error == nil {
			return fmt.Errorf("whatsapp_cloud: %s %s: HTTP %d without a Graph error", method, path, res.StatusCode)
		}
		wrap.Error.Status = res.StatusCode
		if s, err := strconv.Atoi(res.Header.Get("Retry-After")); err == nil && s > 0 {
			wrap.Error.RetryAfter = time.Duration(s) * time.Second
		}
		return wrap.Error
	}
	if out != nil {
		if err := json.Unmarshal(raw, out); err != nil {
			return fmt.Errorf("whatsapp_cloud: %s %s: unreadable answer: %w", method, path, err)
		}
	}
	return nil
}

// upload sends media bytes to the account's media endpoint and returns the media ID.
func (g *graph) upload(ctx context.Context, m *channels.Media) (string, error) {
	rc, err := m.Open(ctx)
	if err != nil {
		return "", err
	}
	defer rc.Close()
	var buf bytes.Buffer
	w := multipart.NewWriter(&buf)
	_ = w.WriteField("messaging_product", "whatsapp")
	_ = w.WriteField("type", m.MIMEType)
	name := m.Filename
	if name == "" {
		name = "file"
	}
	fw, err := w.CreateFormFile("file", name)
	if err != nil {
		return "", err
	}
	if _, err := io.Copy(fw, rc); err != nil {
		return "", err
	}
	if err := w.Close(); err != nil {
		return "", err
	}
	var out struct {
		ID string `json:"id"`
	}
	if err := g.do(ctx, http.MethodPost, "/"+g.a.phoneID+"/media", &buf, w.FormDataContentType(), &out); err != nil {
		return "", err
	}
	return out.ID, nil
}

// failureOf maps a Graph error to a message failure with the codes clients act on; Meta's code and words are kept in
// the detail. Errors without a Graph answer (network, 5xx without a body) stay plain errors, which the queue
// retries.
func failureOf(err error, typ channels.MessageType) error {
	ge, ok := err.(*graphError)
	if !ok {
		return err
	}
	detail := ge.Error()
	f := &channels.Failure{Detail: detail}
	switch {
	case ge.Code == 190 || ge.Status == http.StatusUnauthorized:
		f.Code = "not_connected"
	case ge.Code == 4 || ge.Code == 80007 || ge.Code == 130429 || ge.Code == 131048 || ge.Code == 131056 || ge.Status == http.StatusTooManyRequests:
		f.Code, f.Retryable, f.RetryAfter = "rate_limited", true, ge.RetryAfter
	case ge.Code == 131047:
		f.Code = "conversation_window_closed"
	case ge.Code == 131026 || ge.Code == 133010 || ge.Code == 131030:
		f.Code = "recipient_not_on_network"
	case ge.Code >= 132000 && ge.Code < 133000:
		f.Code = "template_rejected"
	case ge.Code == 131052 || ge.Code == 131053 || (typ == channels.TypeMedia && ge.Code == 100):
		f.Code = "media_rejected"
	case ge.Code == 131000 || ge.Code == 131016 || ge.Status >= 500:
		// "Something went wrong" and "service unavailable": Meta's own trouble, worth another try.
		f.Code, f.Retryable = "network_error", true
	default:
		f.Code = "rejected"
	}
	return f
}

// normalizeNumber is a wa_id ("15550100002") as an address.
func normalizeNumber(waID string) string {
	if waID == "" || strings.HasPrefix(waID, "+") {
		return waID
	}
	return "+" + waID
}
