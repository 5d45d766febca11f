package main

import "encoding/json"

type variableSeed struct {
	defs   []any
	values [][]any // each: a list of {name, value}
	old    [][]any // old values for values[i] (transition rules), by index
}

func j(s string) any {
	var v any
	if err := json.Unmarshal([]byte(s), &v); err != nil {
		panic(s + ": " + err.Error())
	}
	return v
}

func seedDef(name, schema string) any {
	return map[string]any{"name": name, "schema": map[string]any{"openAPIV3Schema": j(schema)}}
}

func vals(kv ...string) []any {
	out := []any{}
	for i := 0; i < len(kv); i += 2 {
		out = append(out, map[string]any{"name": kv[i], "value": j(kv[i+1])})
	}
	return out
}

// Hand-written cases: upstream's own test shapes, the CEL features ClusterClass authors use (messages, message
// expressions, reasons, field paths, transition rules, the Kubernetes CEL libraries), and broken definitions.
func variableSeeds() []variableSeed {
	return []variableSeed{
		{defs: []any{seedDef("cpu", `{"type":"integer","x-kubernetes-validations":[{"rule":"self >= 1","message":"must be positive"}]}`)},
			values: [][]any{vals("cpu", "0"), vals("cpu", "1"), vals("cpu", `"x"`)}},
		{defs: []any{seedDef("cpu", `{"type":"integer","x-kubernetes-validations":[{"rule":"self > 1","messageExpression":"'value ' + string(self) + ' too small'"}]}`)},
			values: [][]any{vals("cpu", "1"), vals("cpu", "5")}},
		{defs: []any{seedDef("cpu", `{"type":"integer","x-kubernetes-validations":[{"rule":"self >= oldSelf","message":"cannot shrink","reason":"FieldValueForbidden"}]}`)},
			values: [][]any{vals("cpu", "1"), vals("cpu", "3")}, old: [][]any{vals("cpu", "2"), vals("cpu", "2")}},
		{defs: []any{seedDef("p", `{"type":"object","properties":{"enabled":{"type":"boolean"},"url":{"type":"string"}},
			"x-kubernetes-validations":[{"rule":"!self.enabled || has(self.url)","message":"url required","fieldPath":".url","reason":"FieldValueRequired"},
			{"rule":"!has(self.url) || isURL(self.url)","fieldPath":".url"}]}`)},
			values: [][]any{vals("p", `{"enabled":true}`), vals("p", `{"enabled":true,"url":"not a url"}`), vals("p", `{"enabled":true,"url":"https://x.io"}`), vals("p", `{}`)}},
		{defs: []any{seedDef("l", `{"type":"array","maxItems":5,"items":{"type":"string","maxLength":10},"x-kubernetes-validations":[{"rule":"self.all(x, x.matches('^[a-z]+$'))","message":"lowercase only"},{"rule":"self.isSorted()"}]}`)},
			values: [][]any{vals("l", `["a","b"]`), vals("l", `["b","a"]`), vals("l", `["A"]`)}},
		{defs: []any{seedDef("q", `{"type":"string","x-kubernetes-validations":[{"rule":"isQuantity(self) && quantity(self).compareTo(quantity('1Gi')) <= 0","message":"at most 1Gi"}]}`)},
			values: [][]any{vals("q", `"512Mi"`), vals("q", `"2Gi"`), vals("q", `"x"`)}},
		{defs: []any{seedDef("ip", `{"type":"string","x-kubernetes-validations":[{"rule":"isIP(self) && ip(self).family() == 4","messageExpression":"self + ' is not an IPv4 address'"}]}`)},
			values: [][]any{vals("ip", `"10.0.0.1"`), vals("ip", `"2001:db8::1"`), vals("ip", `"x"`)}},
		{defs: []any{seedDef("c", `{"type":"string","x-kubernetes-validations":[{"rule":"isCIDR(self) && cidr(self).prefixLength() >= 16"}]}`)},
			values: [][]any{vals("c", `"10.0.0.0/8"`), vals("c", `"10.1.0.0/16"`)}},
		{defs: []any{seedDef("s", `{"type":"string","x-kubernetes-validations":[{"rule":"self.split('.').size() == 3 && self.lowerAscii().startsWith('v')","message":"v<major>.<minor>.<patch>"}]}`)},
			values: [][]any{vals("s", `"v1.2.3"`), vals("s", `"1.2"`)}},
		{defs: []any{seedDef("n", `{"type":"integer","x-kubernetes-validations":[{"rule":"10 / self > 1"}]}`)},
			values: [][]any{vals("n", "0"), vals("n", "3"), vals("n", "20")}},
		{defs: []any{seedDef("m", `{"type":"object","additionalProperties":{"type":"string"},"x-kubernetes-validations":[{"rule":"self.all(k, k.startsWith('x-'))","message":"keys start with x-"}]}`)},
			values: [][]any{vals("m", `{"x-a":"1"}`), vals("m", `{"a":"1"}`)}},
		{defs: []any{seedDef("o", `{"type":"object","properties":{"a":{"type":"integer"},"b":{"type":"integer"}},"x-kubernetes-validations":[{"rule":"self.a < self.b","messageExpression":"'a (' + string(self.a) + ') must be below b (' + string(self.b) + ')'"}]}`)},
			values: [][]any{vals("o", `{"a":1,"b":2}`), vals("o", `{"a":3,"b":2}`), vals("o", `{"a":1}`)}},
		{defs: []any{seedDef("f", `{"type":"string","x-kubernetes-validations":[{"rule":"self != 'forbidden'","reason":"FieldValueDuplicate","message":"dup"}]}`)},
			values: [][]any{vals("f", `"forbidden"`)}},
		{defs: []any{seedDef("nested", `{"type":"object","properties":{"inner":{"type":"object","properties":{"list":{"type":"array","items":{"type":"integer","x-kubernetes-validations":[{"rule":"self % 2 == 0","message":"even"}]}}}}}}`)},
			values: [][]any{vals("nested", `{"inner":{"list":[2,3,4,5]}}`)}},
		{defs: []any{seedDef("fmt", `{"type":"string","x-kubernetes-validations":[{"rule":"false","messageExpression":"'%s has %d chars'.format([self, self.size()])"}]}`)},
			values: [][]any{vals("fmt", `"abc"`)}},
		{defs: []any{seedDef("bad", `{"type":"string","x-kubernetes-validations":[{"rule":"self.nope()"}]}`)}},
		{defs: []any{seedDef("bad", `{"type":"string","x-kubernetes-validations":[{"rule":"self > 1"}]}`)}},
		{defs: []any{seedDef("bad", `{"type":"object","properties":{"a":{"type":"string"}},"x-kubernetes-validations":[{"rule":"self.b == 1"}]}`)}},
		{defs: []any{seedDef("bad", `{"type":"string","x-kubernetes-validations":[{"rule":"self == 'a'","reason":"Nope"}]}`)}},
		{defs: []any{seedDef("bad", `{"type":"object","properties":{"a":{"type":"string"}},"x-kubernetes-validations":[{"rule":"true","fieldPath":".missing"}]}`)}},
		{defs: []any{seedDef("bad", `{"type":"string","x-kubernetes-validations":[{"rule":"true","messageExpression":"1"}]}`)}},
		{defs: []any{seedDef("bad", `{"type":"array","items":{"type":"string"},"x-kubernetes-validations":[{"rule":"self.all(x, self.all(y, x.matches(y)))"}]}`)}},
		{defs: []any{seedDef("bad", `{"type":"string","default":"abc","x-kubernetes-validations":[{"rule":"self.size() < 2","message":"short"}]}`)}},
		{defs: []any{seedDef("bad", `{"type":"string","x-kubernetes-validations":[{"rule":""}]}`)}},
		{defs: []any{seedDef("bad", `{"type":"string","x-kubernetes-validations":[{"rule":"true","message":"a\nb"}]}`)}},
		{defs: []any{seedDef("bad", `{"type":"strin"}`)}},
		{defs: []any{seedDef("bad", `{"type":"object","properties":{"a":{"type":"integer","default":"x"}}}`)}},
		{defs: []any{seedDef("builtin", `{"type":"string"}`), seedDef("a.b", `{"type":"string"}`), seedDef("", `{"type":"string"}`)}},
		{defs: []any{seedDef("dup", `{"type":"string"}`), seedDef("dup", `{"type":"integer"}`)}},
	}
}
