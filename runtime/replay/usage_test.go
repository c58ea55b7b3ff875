package replay

import (
	"strings"
	"testing"
)

// TestCostText: a call without a price is "not tracked", never $0.
func TestCostText(t *testing.T) {
	for _, c := range []struct {
		u     Usage
		calls int
		want  string
	}{
		{Usage{CostUSD: 0.0535}, 8, "$0.0535"},
		{Usage{}, 0, "$0.0000"},
		{Usage{UnpricedCalls: 3}, 3, "cost not tracked"},
		{Usage{CostUSD: 0.01, UnpricedCalls: 2}, 5, "$0.0100 (2 of 5 model calls not tracked"},
	} {
		if got := c.u.CostText(c.calls); !strings.HasPrefix(got, c.want) {
			t.Errorf("%+v over %d calls: %q, want %q…", c.u, c.calls, got, c.want)
		}
	}
}
