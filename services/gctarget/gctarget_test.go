package gctarget

import (
	"testing"

	"go.uber.org/zap"
)

func TestApply(t *testing.T) {
	for _, c := range []struct {
		name    string
		percent int
		env     string
		want    int // target set, 0: none
	}{
		{"flag applies", 200, "", 200},
		{"GOGC wins", 200, "50", 0},
		{"zero keeps Go's default", 0, "", 0},
		{"negative keeps Go's default", -1, "", 0},
	} {
		t.Run(c.name, func(t *testing.T) {
			set := 0
			got := apply(zap.NewNop(), c.percent, c.env, func(p int) int { set = p; return 100 })
			if got != c.want || set != c.want {
				t.Fatalf("apply(%d, GOGC=%q) = %d, set %d; want %d", c.percent, c.env, got, set, c.want)
			}
		})
	}
}
