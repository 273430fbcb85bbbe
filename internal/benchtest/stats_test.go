package benchtest_test

import (
	"slices"
	"testing"

	"github.com/metis-agent/metis/internal/benchtest"
)

func TestQuantileIsTheNearestRank(t *testing.T) {
	xs := []float64{1, 2, 3, 4, 5, 6, 7, 8, 9, 10}
	for _, c := range []struct{ q, want float64 }{
		{0, 1}, {0.1, 1}, {0.5, 5}, {0.55, 6}, {0.99, 10}, {1, 10},
	} {
		if got := benchtest.Quantile(xs, c.q); got != c.want {
			t.Errorf("Quantile(1..10, %v) = %v, want %v", c.q, got, c.want)
		}
	}
	if got := benchtest.Quantile(nil, 0.5); got != 0 {
		t.Errorf("Quantile(nil) = %v, want 0", got)
	}
}

func TestMedianOfOddEvenAndEmpty(t *testing.T) {
	odd := []float64{9, 1, 5}
	if got := benchtest.Median(odd); got != 5 {
		t.Errorf("Median(%v) = %v, want 5", odd, got)
	}
	if !slices.Equal(odd, []float64{9, 1, 5}) {
		t.Errorf("Median sorted its argument: %v", odd)
	}
	if got := benchtest.Median([]float64{4, 1, 3, 2}); got != 2.5 {
		t.Errorf("Median(4 1 3 2) = %v, want 2.5", got)
	}
	if got := benchtest.Median(nil); got != 0 {
		t.Errorf("Median(nil) = %v, want 0", got)
	}
}
