package main

import (
	"encoding/json"
	"fmt"
	"strings"

	"sigs.k8s.io/yaml"
)

// YAML as Kubernetes reads it: sigs.k8s.io/yaml's YAMLToJSON, the conversion kubectl, client-go and the API
// machinery apply to every YAML manifest (go-yaml v2's YAML 1.1 resolution, then JSON). Each case is a YAML
// document and the JSON it becomes, or the error; capd-py's loader (capd_py/api/yamlio.py) must give the same.
// The scalars are the ones where YAML 1.1 readers disagree: timestamps, booleans beyond true/false, octal, hex,
// binary, underscores, sexagesimal numbers, floats without a dot, special floats, nulls, and their quoted forms.
var yamlScalars = []string{
	// timestamps (YAML 1.1 types them; go-yaml v2 keeps them as strings in an interface{})
	"2024-01-01", "2024-1-1", "2001-12-14t21:59:43.10-05:00", "2001-12-14 21:59:43.10 -5", "2002-12-14",
	"2001-12-15T02:59:43.1Z", "20240101", "2024-01-01T00:00:00",
	// booleans and their neighbours
	"true", "True", "TRUE", "tRUE", "false", "False", "FALSE", "yes", "Yes", "YES", "no", "No", "NO", "on", "On",
	"ON", "off", "Off", "OFF", "y", "Y", "n", "N", "t", "f", "yEs", "oN",
	// nulls
	"", "~", "null", "Null", "NULL", "nULL", "none", "None",
	// integers
	"0", "-0", "+0", "1", "+1", "-1", "42", "0042", "007", "08", "09", "0o17", "0O17", "0x1F", "0X1F", "-0x1F",
	"0b1010", "-0b1010", "0B1010", "1_000", "1__0", "_1", "1_", "0x_1F", "9223372036854775807",
	"9223372036854775808", "18446744073709551615", "18446744073709551616", "-9223372036854775808",
	"-9223372036854775809", "1:30", "1:30:00", "-1:30", "190:20:30",
	// floats
	"1.0", "1.", ".5", "-.5", "+.5", "1.5e3", "1e3", "1E3", "1e+3", "1e-3", "-1e3", "1.0e+3", "6.8523015e+5",
	"685.230_15e+03", "685_230.15", "1_000.5", "0.1", "1.10", "3.0", "1e400", "-1e400", "1e-400", "0e0",
	".inf", ".Inf", ".INF", "+.inf", "-.inf", "-.Inf", ".nan", ".NaN", ".NAN", "inf", "nan", "Infinity",
	"190:20:30.15", "1.5.3", "1e", "e3", ".", "..", "-", "+", "-.", "0x", "0b", "0o",
	// versions, quantities and other strings that look like numbers
	"1.34", "1.34.0", "v1.34.0", "1.10", "100m", "1Gi", "1e3m", "0.5Gi", "10.0.0.1", "10.96.0.0/12", "::1",
	"1,000", "1 000", "12:30", "22:22", "0:0", "00:00:00",
	// plain strings and quoted forms
	"hello", "'2024-01-01'", "\"2024-01-01\"", "'yes'", "\"on\"", "'0x1F'", "\"1e3\"", "'~'", "\"\"", "''",
	"!!str 2024-01-01", "!!str yes", "!!str 1e3", "!!int \"42\"", "!!float \"1\"", "!!bool \"true\"",
	"!!timestamp 2024-01-01", "!!null \"\"", "!!str", "<<",
}

// documents: where a scalar sits (a key, a list item, a nested map) and a few whole manifests
var yamlDocuments = []string{
	"a: 1\nb: [1, 2.5, yes, 2024-01-01]\n",
	"apiVersion: v1\nkind: ConfigMap\nmetadata:\n  name: x\ndata:\n  released: 2024-01-01\n",
	"1: one\n2.5: two\ntrue: three\n~: four\n2024-01-01: five\n0x1F: six\n1e3: seven\n",
	"yes: 1\nno: 2\non: 3\noff: 4\ny: 5\nn: 6\n",
	"base: &b {x: 1, y: 2}\nderived:\n  <<: *b\n  y: 3\n",
	"list:\n- &a 1:30\n- *a\n",
	"a: |\n  2024-01-01\n  yes\nb: >\n  1e3\n",
	"a: 1\na: 2\n",
	"{\"json\": [1, 2.0, true, null]}\n",
	"a: 123456789012345678901234567890\n",
	"a: [.inf, -.inf]\n",
	"a: .nan\n",
	"- 1\n- \"2\"\n- 3.0\n",
	"? [1, 2]\n: complex key\n",
	"a: !!binary aGVsbG8=\n",
}

func yamlCase(doc string) map[string]any {
	c := map[string]any{"yaml": doc}
	out, err := yaml.YAMLToJSON([]byte(doc))
	if err != nil {
		c["error"] = true
		return c
	}
	// the JSON as a value (decoded with UseNumber: the corpus keeps Go's number text, e.g. 1e+06 vs 1000000)
	dec := json.NewDecoder(strings.NewReader(string(out)))
	dec.UseNumber()
	var v any
	if err := dec.Decode(&v); err != nil {
		fail(fmt.Errorf("yaml case %q: Go wrote JSON it cannot read back: %w", doc, err))
	}
	c["json"] = string(out)
	return c
}

func generateYAMLCases() []map[string]any {
	var cases []map[string]any
	for _, s := range yamlScalars {
		cases = append(cases, yamlCase("v: "+s+"\n"), yamlCase(s+": v\n"), yamlCase("- "+s+"\n"))
	}
	for _, d := range yamlDocuments {
		cases = append(cases, yamlCase(d))
	}
	return cases
}
