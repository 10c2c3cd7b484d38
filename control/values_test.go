package control

import (
	"encoding/json"
	"math"
	"slices"
	"testing"
)

func TestValueList(t *testing.T) {
	tests := []struct {
		in      string
		want    valueList
		wantErr bool
	}{
		{in: "[]", want: valueList{}},
		{in: "[0]", want: valueList{{n: 0}}},
		{in: "[1,2, 3 ,18446744073709551615]", want: valueList{{n: 1}, {n: 2}, {n: 3}, {n: math.MaxUint64}}},
		{in: "[1, null,true ,false]", want: valueList{{n: 1}, {kind: valueNull}, {kind: valueTrue}, {kind: valueFalse}}},
		{in: "null", want: nil},
		{in: "[-1]", wantErr: true},
		{in: "[1.5]", wantErr: true},
		{in: "[1e3]", wantErr: true},
		{in: `["1"]`, wantErr: true},
		{in: "[18446744073709551616]", wantErr: true},
		{in: "[[1]]", wantErr: true},
	}
	for _, tt := range tests {
		var got valueList
		err := json.Unmarshal([]byte(tt.in), &got)
		if tt.wantErr != (err != nil) || !slices.Equal(got, tt.want) {
			t.Errorf("Unmarshal(%s) = %v, %v; want %v (error %v)", tt.in, got, err, tt.want, tt.wantErr)
		}
		if err == nil {
			b, err := json.Marshal(got)
			var back valueList
			if err != nil || json.Unmarshal(b, &back) != nil || !slices.Equal(back, got) {
				t.Errorf("round trip of %v: %s, %v", got, b, back)
			}
		}
	}
}
