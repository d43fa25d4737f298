package problem

import (
	"errors"
	"testing"
)

func TestTableRows(t *testing.T) {
	all := All()
	if len(all) == 0 {
		t.Fatal("empty table")
	}
	for i, row := range all {
		if row.Status < 400 || row.Status > 599 || row.Title == "" || row.Description == "" {
			t.Errorf("row %+v is incomplete", row)
		}
		if i > 0 && (all[i-1].Status > row.Status || all[i-1].Status == row.Status && all[i-1].Code >= row.Code) {
			t.Errorf("All is not ordered by status and code at %s", row.Code)
		}
	}
}

func TestNewRefusesCodesOutsideTheTable(t *testing.T) {
	defer func() {
		if recover() == nil {
			t.Error("New accepted a code that is not in the table")
		}
	}()
	New("no_such_code", "")
}

func TestFields(t *testing.T) {
	var none Fields
	if none.Err() != nil || none.Problem() != nil {
		t.Fatal("no fields must be no error (and no typed nil)")
	}
	var f Fields
	f.Add("/name", "is too long")
	f.AddParameter("limit", "must be at most 100")
	var e *Error
	if err := f.Err(); !errors.As(err, &e) || e.Code != ValidationFailed || e.Status() != 400 ||
		e.Detail != "The request has 2 invalid fields." || len(e.Fields) != 2 || e.Fields[1].Parameter != "limit" {
		t.Fatalf("got %+v", e)
	}
}

func TestPointer(t *testing.T) {
	for _, c := range []struct {
		segments []string
		want     string
	}{
		{nil, ""},
		{[]string{"url"}, "/url"},
		{[]string{"headers", "X-A/B~C"}, "/headers/X-A~1B~0C"},
		{[]string{"events", "0"}, "/events/0"},
	} {
		if got := Pointer(c.segments...); got != c.want {
			t.Errorf("Pointer(%q) = %q, want %q", c.segments, got, c.want)
		}
	}
}
