package httpapi

import (
	"bytes"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"net/http"
	"strconv"
	"unicode/utf16"
	"unicode/utf8"

	"github.com/pingd/pingd/hub"
)

// readJSON decodes a capped JSON object body into v, answering 400 or
// 413 itself when it cannot.
func (s *site) readJSON(w http.ResponseWriter, r *http.Request, v any) bool {
	if !s.limitBody(w, r, func(msg string) { writeJSONError(w, http.StatusRequestEntityTooLarge, msg) }) {
		return false
	}
	body, err := io.ReadAll(r.Body)
	if err != nil {
		if isTooLarge(err) {
			writeJSONError(w, http.StatusRequestEntityTooLarge, s.tooLargeMessage())
		} else {
			writeJSONError(w, http.StatusBadRequest, "could not read the request body")
		}
		return false
	}
	if !utf8.Valid(body) {
		// encoding/json would quietly turn the bad bytes into U+FFFD.
		writeJSONError(w, http.StatusBadRequest, "invalid JSON: the body is not valid UTF-8")
		return false
	}
	if err := checkSurrogateEscapes(body); err != nil {
		writeJSONError(w, http.StatusBadRequest, "invalid JSON: "+err.Error())
		return false
	}
	dec := json.NewDecoder(bytes.NewReader(body))
	dec.DisallowUnknownFields()
	if err := dec.Decode(v); err != nil {
		writeJSONError(w, http.StatusBadRequest, "invalid JSON: "+err.Error())
		return false
	}
	if _, err := dec.Token(); err != io.EOF {
		writeJSONError(w, http.StatusBadRequest, "invalid JSON: more than one value in the body")
		return false
	}
	return true
}

// checkSurrogateEscapes refuses a \u escape of a UTF-16 surrogate that is
// not half of a pair: encoding/json would quietly decode it as U+FFFD, as
// it would invalid bytes. It walks escapes only; json.Unmarshal judges
// the rest of the syntax.
func checkSurrogateEscapes(body []byte) error {
	hex4 := func(i int) (rune, bool) {
		if i+6 > len(body) || body[i] != '\\' || body[i+1] != 'u' {
			return 0, false
		}
		n, err := strconv.ParseUint(string(body[i+2:i+6]), 16, 16)
		return rune(n), err == nil
	}
	for i := 0; i < len(body); i++ {
		if body[i] != '\\' {
			continue
		}
		r, ok := hex4(i)
		if !ok {
			i++ // a one-character escape, such as \\ or \"
			continue
		}
		if utf16.IsSurrogate(r) {
			// Only a high half followed by a low one makes a character.
			if low, ok := hex4(i + 6); ok && utf16.DecodeRune(r, low) != utf8.RuneError {
				i += 11
				continue
			}
			return fmt.Errorf("%s at byte %d is half of a UTF-16 surrogate pair", body[i:i+6], i)
		}
		i += 5
	}
	return nil
}

// writeHubError maps a hub error to its status: ErrInvalid 400,
// ErrNotFound 404, ErrExists 409, ErrForbidden 403, anything else 500
// (logged, and not shown to the client).
func (s *site) writeHubError(w http.ResponseWriter, r *http.Request, err error, what string) {
	switch {
	case errors.Is(err, hub.ErrInvalid):
		writeJSONError(w, http.StatusBadRequest, err.Error())
	case errors.Is(err, hub.ErrNotFound):
		writeJSONError(w, http.StatusNotFound, err.Error())
	case errors.Is(err, hub.ErrExists):
		writeJSONError(w, http.StatusConflict, err.Error())
	case errors.Is(err, hub.ErrForbidden):
		writeJSONError(w, http.StatusForbidden, err.Error())
	default:
		s.log.ErrorContext(r.Context(), what, "err", err)
		writeJSONError(w, http.StatusInternalServerError, what+": internal error")
	}
}

func writeJSON(w http.ResponseWriter, code int, v any) {
	b, err := json.MarshalIndent(v, "", "  ")
	if err != nil {
		writeText(w, http.StatusInternalServerError, "internal error: cannot encode the answer")
		return
	}
	setJSONHeaders(w)
	w.WriteHeader(code)
	_, _ = w.Write(append(b, '\n'))
}

// setJSONHeaders marks an answer as the admin API's JSON.
func setJSONHeaders(w http.ResponseWriter) {
	w.Header().Set("Content-Type", "application/json")
	w.Header().Set("X-Content-Type-Options", "nosniff")
}

func writeJSONError(w http.ResponseWriter, code int, msg string) {
	writeJSON(w, code, map[string]string{"error": msg})
}
