package events

import (
	"testing"

	"github.com/switchboard/switchboard/store"
)

func TestMatches(t *testing.T) {
	data, err := DecodeData([]byte(`{"action":"opened","amount":1200,"repo":{"full_name":"acme/api","tags":["a","b"]},
		"draft":false,"a/b":{"~x":1},"none":null}`))
	if err != nil {
		t.Fatal(err)
	}
	f := func(pointer, op string, value any, values ...any) store.WebhookFilter {
		return store.WebhookFilter{Pointer: pointer, Op: op, Value: value, Values: values}
	}
	cases := []struct {
		name    string
		filters []store.WebhookFilter
		want    bool
	}{
		{"no filters", nil, true},
		{"equals string", []store.WebhookFilter{f("/action", FilterEquals, "opened")}, true},
		{"equals other string", []store.WebhookFilter{f("/action", FilterEquals, "closed")}, false},
		{"equals number by value", []store.WebhookFilter{f("/amount", FilterEquals, 1200.0)}, true},
		{"equals number as string", []store.WebhookFilter{f("/amount", FilterEquals, "1200")}, false},
		{"equals false", []store.WebhookFilter{f("/draft", FilterEquals, false)}, true},
		{"equals array", []store.WebhookFilter{f("/repo/tags", FilterEquals, []any{"a", "b"})}, true},
		{"equals missing", []store.WebhookFilter{f("/nope", FilterEquals, "x")}, false},
		{"in", []store.WebhookFilter{f("/action", FilterIn, nil, "reopened", "opened")}, true},
		{"not in", []store.WebhookFilter{f("/action", FilterIn, nil, "closed")}, false},
		{"exists", []store.WebhookFilter{f("/repo/full_name", FilterExists, nil)}, true},
		{"exists null", []store.WebhookFilter{f("/none", FilterExists, true)}, true},
		{"exists missing", []store.WebhookFilter{f("/repo/owner", FilterExists, nil)}, false},
		{"does not exist", []store.WebhookFilter{f("/repo/owner", FilterExists, false)}, true},
		{"escaped pointer", []store.WebhookFilter{f("/a~1b/~0x", FilterEquals, 1.0)}, true},
		{"array index", []store.WebhookFilter{f("/repo/tags/1", FilterEquals, "b")}, true},
		{"prefix", []store.WebhookFilter{f("/repo/full_name", FilterPrefix, "acme/")}, true},
		{"prefix of a number", []store.WebhookFilter{f("/amount", FilterPrefix, "12")}, false},
		{"all must hold", []store.WebhookFilter{f("/action", FilterEquals, "opened"), f("/draft", FilterEquals, true)}, false},
		{"unknown op", []store.WebhookFilter{f("/action", "matches", "o.*")}, false},
	}
	for _, c := range cases {
		if got := Matches(c.filters, data); got != c.want {
			t.Errorf("%s: Matches = %v, want %v", c.name, got, c.want)
		}
	}
}
