package hub

// FetchLoopOn reports whether Run has started and its fetch loop has not
// ended: from then on, learning of a source waits for its baseline.
func (h *Hub) FetchLoopOn() bool {
	h.fetchedMu.Lock()
	defer h.fetchedMu.Unlock()
	return h.fetchLoopOn
}
