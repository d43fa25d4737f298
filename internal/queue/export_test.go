package queue

// Stopping reports whether Run stopped claiming and waits for the attempts in flight.
func (e *Engine[T, R]) Stopping() bool {
	e.mu.Lock()
	defer e.mu.Unlock()
	return e.draining
}
