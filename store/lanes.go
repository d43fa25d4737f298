package store

// LaneOf is the lane, of n, of a key's rows when a batch is written in n concurrent transactions: the same key
// always goes to the same lane, so the transactions never wait for each other's row locks (nor deadlock on them).
// It is FNV-1a of the key, allocation-free: callers run it once per row.
func LaneOf(key string, n int) int {
	if n <= 1 {
		return 0
	}
	h := uint32(2166136261)
	for i := 0; i < len(key); i++ {
		h = (h ^ uint32(key[i])) * 16777619
	}
	return int(h % uint32(n))
}
