package main

import (
	"time"
)

// Go durations as upstream parses and prints them (time.ParseDuration, time.Duration.String: metav1.Duration
// fields, timeouts in messages and query strings). capd-py's one implementation (capd_py/api/godur.py) must agree.
var durationTexts = []string{
	"0", "-0", "+0", "", "0s", "1s", "10s", "90s", "1m", "1m30s", "1h", "1h30m", "1h30m0s", "1.5h", ".5h", "1.h",
	"300ms", "1500ms", "1us", "1µs", "1μs", "1ns", "2h45m30.5s", "-1m", "+1m", "1d", "1", "s", "1 s", " 1s", "1s ",
	"1S", "1H", "1m1m", "1s1h", "10m0s", "100h", "0.000000001s", "0.0000000001s", "9223372036s",
	"9223372037s", "2562047h", "2562048h", "1e3s", "1_000s", "00001s", "1.0000000001s", "-1.5s", "3.14159s",
}

var durationNanos = []int64{
	0, 1, 999, 1000, 1500, 999999, 1000000, 1500000, 999999999, 1000000000, 1500000000, 45000000000, 60000000000,
	90000000000, 600000000000, 3600000000000, 5400000000000, 5400500000000, 86400000000000, 360000000000000,
	-1, -1500000000, -5400000000000, 1234567890123, 9223372036854775807, -9223372036854775808,
}

func generateDurationCases() []map[string]any {
	var cases []map[string]any
	for _, t := range durationTexts {
		d, err := time.ParseDuration(t)
		c := map[string]any{"kind": "parse", "text": t}
		if err != nil {
			c["error"] = true
		} else {
			c["nanos"] = int64(d)
		}
		cases = append(cases, c)
	}
	for _, n := range durationNanos {
		cases = append(cases, map[string]any{"kind": "string", "nanos": n, "text": time.Duration(n).String()})
	}
	return cases
}
