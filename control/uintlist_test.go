package control

import (
	"encoding/json"
	"math"
	"slices"
	"testing"
)

func TestUintList(t *testing.T) {
	tests := []struct {
		in      string
		want    uintList
		wantErr bool
	}{
		{in: "[]", want: uintList{}},
		{in: "[0]", want: uintList{0}},
		{in: "[1,2, 3 ,18446744073709551615]", want: uintList{1, 2, 3, math.MaxUint64}},
		{in: "null", want: nil},
		{in: "[-1]", wantErr: true},
		{in: "[1.5]", wantErr: true},
		{in: "[1e3]", wantErr: true},
		{in: `["1"]`, wantErr: true},
		{in: "[18446744073709551616]", wantErr: true},
	}
	for _, tt := range tests {
		var got uintList
		err := json.Unmarshal([]byte(tt.in), &got)
		if tt.wantErr != (err != nil) || !slices.Equal(got, tt.want) {
			t.Errorf("Unmarshal(%s) = %v, %v; want %v (error %v)", tt.in, got, err, tt.want, tt.wantErr)
		}
		if err == nil {
			b, err := json.Marshal(got)
			var back uintList
			if err != nil || json.Unmarshal(b, &back) != nil || !slices.Equal(back, got) {
				t.Errorf("round trip of %v: %s, %v", got, b, back)
			}
		}
	}
}
