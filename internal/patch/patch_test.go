package patch

import (
	"testing"

	"github.com/oapi-codegen/nullable"
)

func TestApply(t *testing.T) {
	three := 3
	for name, tc := range map[string]struct {
		f    Field[int]
		want *int
	}{
		"left alone": {Field[int]{}, &three},
		"cleared":    {Clear[int](), nil},
		"set":        {Set(7), new(int)},
	} {
		got := &three
		tc.f.Apply(&got)
		switch {
		case tc.want == nil && got != nil, tc.want != nil && got == nil:
			t.Errorf("%s: %v", name, got)
		case name == "set" && *got != 7, name == "left alone" && got != &three:
			t.Errorf("%s: %v", name, *got)
		}
	}
	if v, ok := Set("x").Value(); !ok || v != "x" {
		t.Error("Value of a set field")
	}
	if _, ok := Clear[string]().Value(); ok || !Clear[string]().Given() || (Field[string]{}).Given() {
		t.Error("Given/Value of cleared and absent fields")
	}
}

// Of reads a generated API type's clearable field: absent, null and a value.
func TestOf(t *testing.T) {
	var absent nullable.Nullable[int]
	if Of(absent).Given() {
		t.Error("an absent field is given")
	}
	if f := Of(nullable.NewNullNullable[int]()); !f.Given() {
		t.Error("a null field is not given")
	} else if _, ok := f.Value(); ok {
		t.Error("a null field has a value")
	}
	if v, ok := Of(nullable.NewNullableWithValue(5)).Value(); !ok || v != 5 {
		t.Errorf("a set field reads %v, %v", v, ok)
	}
}
