package quantity

import "testing"

func TestParseAndCompare(t *testing.T) {
	cases := []struct {
		a, b string
		cmp  int
	}{
		{"1Ki", "1024", 0},
		{"1k", "1000", 0},
		{"500m", "0.5", 0},
		{"1.5Gi", "1536Mi", 0},
		{"2e3", "2k", 0},
		{"1E-3", "1m", 0},
		{"100Mi", "100M", 1},
		{"0", "0m", 0},
		{"-1", "0", -1},
		{".5", "500m", 0},
	}
	for _, c := range cases {
		a, err := Parse(c.a)
		if err != nil {
			t.Fatalf("Parse(%q): %v", c.a, err)
		}
		b, err := Parse(c.b)
		if err != nil {
			t.Fatalf("Parse(%q): %v", c.b, err)
		}
		if got := a.Cmp(b); got != c.cmp {
			t.Errorf("Cmp(%s, %s) = %d, want %d", c.a, c.b, got, c.cmp)
		}
	}
}

func TestParseRejects(t *testing.T) {
	for _, s := range []string{"", "abc", "1Kb", "1.2.3", "--1", "1 Gi", "1e99", "Ki", "0x10"} {
		if _, err := Parse(s); err == nil {
			t.Errorf("Parse(%q) accepted", s)
		}
	}
	long := make([]byte, MaxLen+1)
	for i := range long {
		long[i] = '1'
	}
	if _, err := Parse(string(long)); err == nil {
		t.Error("overlong quantity accepted")
	}
}

func TestString(t *testing.T) {
	cases := map[string]string{
		"16318080Ki": "16318080Ki",
		"1024":       "1Ki",
		"1000":       "1000",
		"110":        "110",
		"0.5":        "500m",
		"2":          "2",
		"1Gi":        "1Gi",
		"1.5Gi":      "1536Mi",
		"0":          "0",
	}
	for in, want := range cases {
		if got := MustParse(in).String(); got != want {
			t.Errorf("String(%s) = %s, want %s", in, got, want)
		}
	}
	if got := Milli(1500); got != "1500m" {
		t.Errorf("Milli(1500) = %s", got)
	}
	if got := Milli(4000); got != "4" {
		t.Errorf("Milli(4000) = %s", got)
	}
	if got := Bytes(100 << 20); got != "100Mi" {
		t.Errorf("Bytes = %s", got)
	}
}

func TestArithmetic(t *testing.T) {
	c := MustParse("16Gi").Sub(MustParse("100Mi"))
	if c.String() != "16284Mi" {
		t.Errorf("16Gi-100Mi = %s", c)
	}
	if v, ok := MustParse("1500m").Int64(); !ok || v != 2 {
		t.Errorf("Int64(1500m) = %d, %v (rounds up)", v, ok)
	}
	if v, _ := MustParse("1.5").MilliValue(); v != 1500 {
		t.Errorf("MilliValue = %d", v)
	}
}

func FuzzParse(f *testing.F) {
	for _, s := range []string{"1", "500m", "1.5Gi", "2e3", "-1Ki", ".5", "1E-3"} {
		f.Add(s)
	}
	f.Fuzz(func(t *testing.T, s string) {
		q, err := Parse(s)
		if err != nil {
			return
		}
		// What String prints must parse back to the same value.
		back, err := Parse(q.String())
		if err != nil {
			t.Fatalf("Parse(String(%q)=%q): %v", s, q.String(), err)
		}
		if back.Cmp(q) != 0 && q.rat().Sign() >= 0 {
			// Only sub-nano fractions round; they round up.
			if back.Cmp(q) < 0 {
				t.Fatalf("round trip of %q lost value: %s", s, q.String())
			}
		}
	})
}
