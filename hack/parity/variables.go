package main

import (
	"context"
	"encoding/json"
	"fmt"
	"math/rand"
	"os"
	"regexp"
	"sort"

	apiextensionsv1 "k8s.io/apiextensions-apiserver/pkg/apis/apiextensions/v1"
	"k8s.io/apimachinery/pkg/util/validation/field"
	"k8s.io/utils/ptr"

	clusterv1 "sigs.k8s.io/cluster-api/api/core/v1beta2"

	variables "capdpy.local/parity/upstreamvariables"
)

const (
	clusterPath = "spec.topology.variables"
	machinePath = "spec.topology.workers.machineDeployments[md-0].variables.overrides"
	classPath   = "spec.variables"
)

type vgen struct {
	r *rand.Rand
}

func (g *vgen) pick(xs []string) string { return xs[g.r.Intn(len(xs))] }
func (g *vgen) chance(p float64) bool  { return g.r.Float64() < p }

var propNames = []string{"a", "b", "enabled", "name", "replicas", "url", "cpu", "items"}
var stringPool = []string{"abc", "", "a", "x.io", "https://example.com/x", "10.0.0.1", "1Gi", "512Mi", "forbidden",
	"Hello", "a,b,c", "  sp", "123", "ABC", "zz9", "2001:db8::1", "10.0.0.0/8", "é☃", "v1.2.3", "a-b"}

// CEL rules upstream's apiserver environment compiles, by the type of `self`.
var stringRules = []string{`self.size() > 2`, `self.startsWith("a")`, `self.matches("^[a-z]+$")`,
	`self.lowerAscii() == self`, `self.contains("x")`, `self.endsWith(".io")`, `self != "forbidden"`,
	`self.split(",").size() < 3`, `self.indexOf("a") >= 0`, `self.trim() == self`, `self.replace("a", "b") != "bbb"`,
	`self.upperAscii() != "ABC"`, `self.substring(1) != ""`, `self.find("[0-9]+") != ""`,
	`self.findAll("[a-z]").size() > 1`, `isURL(self)`, `isIP(self)`, `isCIDR(self)`, `self == oldSelf`,
	`self.size() >= oldSelf.size()`, `int(self) > 0`, `isQuantity(self)`, `self.charAt(0) != "a"`,
	`self.lastIndexOf("b") < 2`, `self.join(",") == self`, `url(self).getHost() != ""`, `ip(self).family() == 4`,
	`quantity(self).isGreaterThan(quantity("1Gi"))`, `self in ["abc", "a", "Hello"]`, `self.size() <= 3 && self != ""`,
	`"%s!".format([self]).size() > 2`, `self.reverse() != self`, `self.quote().size() > 4`, `isSemver(self)`}
var intRules = []string{`self > 0`, `self % 2 == 0`, `self <= 100`, `self >= oldSelf`, `self / (self - 3) > 0`,
	`self * self < 1000`, `double(self) / 2.0 > 1.0`, `string(self).size() < 3`, `self != oldSelf`,
	`self in [1, 2, 3]`, `self - 9223372036854775807 < 0`}
var numberRules = []string{`self > 0.5`, `self < 100.0`, `self != 2.5`, `int(self) > 1`, `self >= oldSelf`}
var boolRules = []string{`self == true`, `!self || oldSelf`, `self == oldSelf`, `self`}
var arrayRules = []string{`self.size() <= 2`, `self.size() > 0`, `self == oldSelf`, `self.exists(x, true)`,
	`self.size() >= oldSelf.size()`, `self.all(x, x == self[0])`, `self.exists_one(x, x == self[0])`}
var stringArrayRules = []string{`self.all(x, x.size() < 5)`, `self.isSorted()`, `self.indexOf("a") != 0`,
	`self.join(",").size() < 10`, `self.map(x, x.upperAscii()).exists(x, x == "ABC")`, `"abc" in self`,
	`self.filter(x, x != "").size() == self.size()`, `self.lastIndexOf("a") < 1`, `self.sort() == self`}
var intArrayRules = []string{`self.sum() < 10`, `self.min() >= 0`, `self.max() < 9`, `self.isSorted()`,
	`self.all(x, x > 0)`, `self.map(x, x * 2).sum() < 20`, `self.distinct().size() == self.size()`}
var mapRules = []string{`self.all(k, k.size() < 4)`, `size(self) < 3`, `self.all(k, self[k] != "")`,
	`!("b" in self)`, `self == oldSelf`}

var messageExpressions = map[string][]string{
	"string":  {`"got " + self`, `self`, `"  "`, `"a\nb"`, `string(self.size())`, `"value " + self + " is bad"`},
	"integer": {`"got " + string(self)`, `"static"`, `string(self) + " is not allowed"`},
	"number":  {`"got " + string(self)`},
	"boolean": {`"flag is " + string(self)`},
	"array":   {`"has " + string(self.size()) + " items"`},
	"object":  {`"object has " + string(size(self)) + " fields"`, `"static"`},
}

var reasons = []string{"FieldValueInvalid", "FieldValueForbidden", "FieldValueRequired", "FieldValueDuplicate"}

func (g *vgen) rules(s map[string]any, typ string) {
	var pool []string
	switch typ {
	case "string":
		pool = stringRules
	case "integer":
		pool = intRules
	case "number":
		pool = numberRules
	case "boolean":
		pool = boolRules
	case "array":
		pool = arrayRules
		if items, ok := s["items"].(map[string]any); ok {
			switch items["type"] {
			case "string":
				pool = append(append([]string{}, pool...), stringArrayRules...)
			case "integer":
				pool = append(append([]string{}, pool...), intArrayRules...)
			}
		}
	case "object":
		if props, ok := s["properties"].(map[string]any); ok && len(props) > 0 {
			names := sortedKeys(props)
			p := names[g.r.Intn(len(names))]
			pool = []string{fmt.Sprintf("has(self.%s)", p), fmt.Sprintf("!has(self.%s) || self.%s == self.%s", p, p, p),
				fmt.Sprintf("self.%s == oldSelf.%s", p, p), fmt.Sprintf("self.%s == self.%s", p, p), "size(self) < 3",
				fmt.Sprintf("has(self.%s) == has(oldSelf.%s)", p, p)}
		} else if ap, ok := s["additionalProperties"].(map[string]any); ok && ap["type"] == "string" {
			pool = mapRules
		} else {
			return
		}
	default:
		return
	}
	var rules []any
	for n := 1 + g.r.Intn(2); n > 0; n-- {
		rule := map[string]any{"rule": g.pick(pool)}
		if g.chance(0.3) {
			rule["message"] = g.pick([]string{"must be valid", "value is not allowed", "  padded  "})
		}
		if g.chance(0.25) {
			rule["messageExpression"] = g.pick(messageExpressions[typ])
		}
		if g.chance(0.25) {
			rule["reason"] = g.pick(reasons)
		}
		if typ == "object" && g.chance(0.3) {
			if props, ok := s["properties"].(map[string]any); ok {
				names := sortedKeys(props)
				rule["fieldPath"] = "." + names[g.r.Intn(len(names))]
			}
		}
		rules = append(rules, rule)
	}
	s["x-kubernetes-validations"] = rules
}

func (g *vgen) schema(depth int) map[string]any {
	types := []string{"string", "integer", "number", "boolean", "object", "array"}
	if depth > 1 {
		types = types[:4]
	}
	typ := types[g.r.Intn(len(types))]
	s := map[string]any{"type": typ}
	switch typ {
	case "string":
		if g.chance(0.2) {
			s["minLength"] = g.r.Intn(3)
		}
		if g.chance(0.2) {
			s["maxLength"] = 2 + g.r.Intn(5)
		}
		if g.chance(0.1) {
			s["pattern"] = g.pick([]string{"^[a-z]+$", "^v[0-9]", "a|b", "[0-9]"})
		}
		if g.chance(0.1) {
			s["enum"] = []any{"abc", "a", "Hello"}
		}
		if g.chance(0.1) {
			s["format"] = g.pick([]string{"uri", "ipv4", "hostname", "date-time", "uuid", "cidr", "duration"})
		}
	case "integer":
		if g.chance(0.3) {
			s["minimum"] = g.r.Intn(3)
			if g.chance(0.3) {
				s["exclusiveMinimum"] = true
			}
		}
		if g.chance(0.3) {
			s["maximum"] = 5 + g.r.Intn(100)
		}
	case "number":
		if g.chance(0.3) {
			s["minimum"] = 1
		}
	case "object":
		if g.chance(0.15) {
			s["additionalProperties"] = g.schema(depth + 1)
			if g.chance(0.3) {
				s["maxProperties"] = 2
			}
		} else if g.chance(0.1) {
			s["x-kubernetes-preserve-unknown-fields"] = true
		} else {
			props := map[string]any{}
			for n := 1 + g.r.Intn(3); n > 0; n-- {
				props[g.pick(propNames)] = g.schema(depth + 1)
			}
			s["properties"] = props
			if g.chance(0.3) {
				names := sortedKeys(props)
				s["required"] = []any{names[0]}
			}
		}
	case "array":
		s["items"] = g.schema(depth + 1)
		if g.chance(0.3) {
			s["maxItems"] = 3
		}
		if g.chance(0.2) {
			s["minItems"] = 1
		}
		if g.chance(0.1) {
			s["uniqueItems"] = true
		}
	}
	if g.chance(0.45) {
		g.rules(s, typ)
		// Mostly bounded: without maxLength / maxItems / maxProperties upstream's static cost estimate refuses
		// most rules (those cases are kept, but fewer).
		if _, ok := s["x-kubernetes-validations"]; ok && g.chance(0.85) {
			switch typ {
			case "string":
				if _, ok := s["maxLength"]; !ok {
					s["maxLength"] = 8 + g.r.Intn(40)
				}
			case "array":
				if _, ok := s["maxItems"]; !ok {
					s["maxItems"] = 2 + g.r.Intn(6)
				}
				if items, ok := s["items"].(map[string]any); ok && items["type"] == "string" {
					if _, ok := items["maxLength"]; !ok {
						items["maxLength"] = 8
					}
				}
			case "object":
				if _, ok := s["additionalProperties"]; ok {
					s["maxProperties"] = 3
				}
			}
		}
	}
	if g.chance(0.15) {
		s["default"] = g.value(s, 0)
	}
	if g.chance(0.05) {
		s["example"] = g.value(s, 0)
	}
	return s
}

// value makes a value for schema s: mostly one that fits, sometimes one that does not.
func (g *vgen) value(s map[string]any, depth int) any {
	if g.chance(0.06) {
		return g.wrongValue()
	}
	switch s["type"] {
	case "string":
		if e, ok := s["enum"].([]any); ok && g.chance(0.6) {
			return e[g.r.Intn(len(e))]
		}
		return g.pick(stringPool)
	case "integer":
		return []int{0, 1, 2, 3, 4, 7, 42, 101, -1, 9}[g.r.Intn(10)]
	case "number":
		return []float64{0.5, 2.5, 3, 100.25, -1, 7}[g.r.Intn(6)]
	case "boolean":
		return g.chance(0.5)
	case "array":
		items, _ := s["items"].(map[string]any)
		out := []any{}
		for n := g.r.Intn(4); n > 0; n-- {
			out = append(out, g.value(items, depth+1))
		}
		return out
	case "object":
		out := map[string]any{}
		if props, ok := s["properties"].(map[string]any); ok {
			for _, k := range sortedKeys(props) {
				if g.chance(0.75) {
					out[k] = g.value(props[k].(map[string]any), depth+1)
				}
			}
		}
		if ap, ok := s["additionalProperties"].(map[string]any); ok {
			for n := g.r.Intn(4); n > 0; n-- {
				out[g.pick(propNames)] = g.value(ap, depth+1)
			}
		}
		if g.chance(0.08) {
			out["extra"] = 1
		}
		return out
	}
	return nil
}

func (g *vgen) wrongValue() any {
	return []any{"str", 5, 2.5, true, nil, []any{1}, map[string]any{"z": 1}}[g.r.Intn(7)]
}

// perturb derives an "old value" for transition rules: the same value, or a changed one.
func (g *vgen) perturb(s map[string]any, v any) any {
	if g.chance(0.5) {
		return v
	}
	return g.value(s, 0)
}

func sortedKeys(m map[string]any) []string {
	out := make([]string, 0, len(m))
	for k := range m {
		out = append(out, k)
	}
	sort.Strings(out)
	return out
}

func rawJSON(v any) []byte {
	b, err := marshal(v)
	if err != nil {
		panic(err)
	}
	return b
}

func decodeDefs(defs []any) []clusterv1.ClusterClassVariable {
	var out []clusterv1.ClusterClassVariable
	if err := json.Unmarshal(rawJSON(defs), &out); err != nil {
		panic(err)
	}
	return out
}

func statusVariables(defs []clusterv1.ClusterClassVariable) []clusterv1.ClusterClassStatusVariable {
	var out []clusterv1.ClusterClassStatusVariable
	for _, d := range defs {
		out = append(out, clusterv1.ClusterClassStatusVariable{
			Name: d.Name,
			Definitions: []clusterv1.ClusterClassStatusVariableDefinition{{
				From: "inline", Required: d.Required, Schema: d.Schema, DeprecatedV1Beta1Metadata: d.DeprecatedV1Beta1Metadata,
			}},
		})
	}
	return out
}

func clusterVariables(values []any) []clusterv1.ClusterVariable {
	var out []clusterv1.ClusterVariable
	for _, v := range values {
		m := v.(map[string]any)
		// As apiextensionsv1.JSON.UnmarshalJSON: a JSON null leaves Raw nil.
		var raw []byte
		if m["value"] != nil {
			raw = rawJSON(m["value"])
		}
		out = append(out, clusterv1.ClusterVariable{Name: m["name"].(string), Value: apiextensionsv1.JSON{Raw: raw}})
	}
	return out
}

// selfTypeN: CEL names the object type of `self` selfType<random number> in compile errors.
var selfTypeN = regexp.MustCompile(`selfType[0-9]+`)

func errStrings(errs field.ErrorList) []string {
	out := []string{}
	for _, e := range errs {
		out = append(out, selfTypeN.ReplaceAllString(e.Error(), "selfType<N>"))
	}
	return out
}

// stable returns upstream's errors sorted: upstream iterates Go maps (properties, definitions) in random order,
// so the order of its messages is not reproducible; the messages themselves are compared byte for byte.
func stable(f func() []string) ([]string, bool) {
	out := f()
	sort.Strings(out)
	return out, true
}

func classErrors(defs []any) ([]string, bool) {
	return stable(func() []string {
		return errStrings(variables.ValidateClusterClassVariables(context.Background(), nil, decodeDefs(defs), field.NewPath(classPath)))
	})
}

func generateVariableCases(seed int64, n int) []map[string]any {
	g := &vgen{r: rand.New(rand.NewSource(seed + 1))}
	var cases []map[string]any
	counts := map[string]int{}
	addClass := func(defs []any, origin string) bool {
		errs, ordered := classErrors(defs)
		c := map[string]any{"kind": "class", "variables": defs, "errors": errs, "origin": origin}
		if !ordered {
			c["unordered"] = true
		}
		cases = append(cases, c)
		counts["class"]++
		return len(errs) == 0
	}
	addValues := func(defs []any, values, old []any, machine bool, origin string) {
		path := clusterPath
		if machine {
			path = machinePath
		}
		cv := clusterVariables(values)
		var ov []clusterv1.ClusterVariable
		if old != nil {
			ov = clusterVariables(old)
		}
		sv := statusVariables(decodeDefs(defs))
		errs, ordered := stable(func() []string {
			if machine {
				return errStrings(variables.ValidateMachineVariables(context.Background(), cv, ov, sv, field.NewPath(path)))
			}
			return errStrings(variables.ValidateClusterVariables(context.Background(), cv, ov, sv, field.NewPath(path)))
		})
		c := map[string]any{"kind": "values", "variables": defs, "values": values, "path": path, "errors": errs,
			"origin": origin}
		if machine {
			c["overrides"] = true
		}
		if old != nil {
			c["oldValues"] = old
		}
		if !ordered {
			c["unordered"] = true
		}
		cases = append(cases, c)
		counts["values"]++
		if len(errs) > 0 {
			counts["values with errors"]++
		}
	}
	addDefault := func(defs []any, values []any, machine bool, origin string) {
		sv := statusVariables(decodeDefs(defs))
		var got []clusterv1.ClusterVariable
		var errs field.ErrorList
		if machine {
			got, errs = variables.DefaultMachineVariables(clusterVariables(values), sv, field.NewPath(machinePath))
		} else {
			got, errs = variables.DefaultClusterVariables(clusterVariables(values), sv, field.NewPath(clusterPath))
		}
		out := []any{}
		for _, v := range got {
			var value any
			if err := json.Unmarshal(v.Value.Raw, &value); err != nil {
				panic(err)
			}
			out = append(out, map[string]any{"name": v.Name, "value": value})
		}
		c := map[string]any{"kind": "default", "variables": defs, "values": values, "defaulted": out,
			"errors": errStrings(errs), "origin": origin}
		if machine {
			c["overrides"] = true
		}
		cases = append(cases, c)
		counts["default"]++
	}

	for _, s := range variableSeeds() {
		if addClass(s.defs, "seed") {
			for _, vals := range s.values {
				addValues(s.defs, vals, nil, false, "seed")
			}
			for i, old := range s.old {
				addValues(s.defs, s.values[i], old, false, "seed")
			}
		}
	}
	for made := 0; made < n; made++ {
		var defs []any
		var schemas []map[string]any
		names := []string{"cpu", "location", "httpProxy", "count"}
		for k := 1 + g.r.Intn(2); k > 0; k-- {
			s := g.schema(0)
			d := map[string]any{"name": names[len(defs)], "schema": map[string]any{"openAPIV3Schema": s}}
			if g.chance(0.3) {
				d["required"] = true
			}
			defs = append(defs, d)
			schemas = append(schemas, s)
		}
		if !addClass(defs, "random") {
			continue
		}
		for k := 1 + g.r.Intn(3); k > 0; k-- {
			var values, old []any
			for i, d := range defs {
				if g.chance(0.85) {
					v := g.value(schemas[i], 0)
					values = append(values, map[string]any{"name": d.(map[string]any)["name"], "value": v})
					if g.chance(0.3) {
						old = append(old, map[string]any{"name": d.(map[string]any)["name"], "value": g.perturb(schemas[i], v)})
					}
				}
			}
			if g.chance(0.03) {
				values = append(values, map[string]any{"name": "undefined", "value": 1})
			}
			if values == nil {
				values = []any{}
			}
			machine := g.chance(0.2)
			addValues(defs, values, old, machine, "random")
			if k == 1 && g.chance(0.3) {
				addDefault(defs, values, machine, "random")
			}
		}
	}
	for _, k := range sortedKeys(map[string]any{"class": 0, "values": 0, "values with errors": 0, "default": 0}) {
		fmt.Fprintf(os.Stderr, "variables: %s: %d\n", k, counts[k])
	}
	_ = ptr.To(true)
	return cases
}
