package store

// Clicks is the repository of recorded clicks and their rollups.
type Clicks struct{ db *DB }
