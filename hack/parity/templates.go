package main

import (
	"bytes"
	"encoding/json"
	"fmt"
	"math/rand"
	"os"
	"reflect"
	"sort"
	"strings"
	"text/template"
	"time"
	"unicode/utf8"

	"github.com/Masterminds/sprig/v3"
)

// The data templates see. Upstream (internal/controllers/topology/cluster/patches/inline, calculateTemplateData)
// json.Unmarshals every variable into interface{}: numbers are float64, objects map[string]interface{}.
var templateData = map[string]string{
	"values": `{"s":"Hello World","n":3,"f":2.5,"big":1000000,"small":0.00001,"neg":-4,"l":[3,1,2],"sl":["b","a","b"],
		"m":{"b":2,"a":{"x":1}},"e":"","x":null,"t":true,"v":"v1.31.0+k3s1","u":"héllo ☃ wörld","csv":"a,b,,c",
		"objs":[{"a":1,"b":[1,2]},{"a":2}],"el":[],"em":{},"nums":["1","2.5","x"],"ver":"1.30.2","pad":"  pad  ",
		"ml":"line1\nline2\n","html":"<a href=\"x\">&</a>","b64":"aGVsbG8=","path":"/a/b/c.txt",
		"builtin":{"cluster":{"name":"c1","namespace":"default","topology":{"version":"v1.34.4","class":"quick-start"}},
		"controlPlane":{"version":"v1.34.4","replicas":3,"name":"c1-cp"},
		"machineDeployment":{"class":"default-worker","name":"c1-md-0","topologyName":"md-0","version":"v1.33.1","replicas":2}}}`,
	"naming": `{"cluster":{"name":"c1"},"machineDeployment":{"topologyName":"md-0"},"machinePool":{"topologyName":"mp-0"},"random":"x7k2q"}`,
}

// Functions left out of the random generation: their output is random or depends on the clock, or they are
// too slow to run thousands of times (derivePassword, bcrypt, key generation).
var nondeterministic = map[string]bool{
	"shuffle": true, "randInt": true, "genPrivateKey": true, "genCA": true, "genCAWithKey": true,
	"genSelfSignedCert": true, "genSelfSignedCertWithKey": true, "genSignedCert": true, "genSignedCertWithKey": true,
	"buildCustomCert": true, "bcrypt": true, "htpasswd": true, "encryptAES": true, "decryptAES": true,
	"derivePassword": true, "ago": true, "uuidv4": true, "call": true,
	"randAlpha": true, "randAlphaNum": true, "randAscii": true, "randNumeric": true, "randBytes": true,
	// These change their map argument: `set . "k" .` makes a map that contains itself, which Go prints until
	// its stack overflows. The hand-written seeds use them.
	// keys and values return a map's keys in Go's random map order.
	"keys": true, "values": true,
	"set": true, "unset": true, "merge": true, "mergeOverwrite": true, "mustMerge": true, "mustMergeOverwrite": true,
}

var builtinFuncs = map[string]int{ // name -> arity (-1: variadic)
	"and": -1, "or": -1, "not": 1, "len": 1, "index": -1, "slice": -1, "print": -1, "printf": -1, "println": -1,
	"eq": -1, "ne": 2, "lt": 2, "le": 2, "gt": 2, "ge": 2, "html": -1, "js": -1, "urlquery": -1,
}

type fn struct {
	name     string
	in       []reflect.Type
	variadic bool
}

type tgen struct {
	r       *rand.Rand
	funcs   []fn
	fields  []string
	vars    []string
	inRange int
	inDef   bool
	defs    []string
	naming  bool
}

var stringLits = []string{`"a"`, `"Hello"`, `""`, `"a,b,c"`, `"  pad "`, `"v1.2.3"`, `">= 1.2.0"`, `"< v1.25-0"`,
	`"1.30"`, `"^a.*"`, `"[a-z]+"`, `"l"`, `"ab\n"`, "`raw`", `"x"`, `"%d-%s"`, `"%v"`, `"%q"`, `"é☃"`, `","`,
	`"b"`, `"-"`, `"{\"a\":1}"`, `"[1,2]"`, `"3"`, `"2.5"`, `"true"`, `"v1.34.4"`, `"~1.2"`, `"aGVsbG8="`, `"1h30m"`,
	`"/a/b"`, `"a.b.c"`, `"HelloWorld"`, `"hello_world"`}
var numLits = []string{"0", "1", "2", "3", "-1", "10", "2.5", "-0.5", "1e3", "0x10", "017", "1_000", "'a'", "5"}
var otherLits = []string{"true", "false", "true", "false", "nil"}

func newTgen(seed int64) *tgen {
	g := &tgen{r: rand.New(rand.NewSource(seed))}
	names := []string{}
	fm := sprig.HermeticTxtFuncMap()
	for name := range fm {
		names = append(names, name)
	}
	sort.Strings(names)
	for _, name := range names {
		if nondeterministic[name] {
			continue
		}
		t := reflect.TypeOf(fm[name])
		f := fn{name: name, variadic: t.IsVariadic()}
		for i := 0; i < t.NumIn(); i++ {
			f.in = append(f.in, t.In(i))
		}
		g.funcs = append(g.funcs, f)
	}
	bnames := []string{}
	for name := range builtinFuncs {
		bnames = append(bnames, name)
	}
	sort.Strings(bnames)
	for _, name := range bnames {
		f := fn{name: name, variadic: builtinFuncs[name] < 0}
		for i := 0; i < builtinFuncs[name]; i++ {
			f.in = append(f.in, reflect.TypeOf((*any)(nil)).Elem())
		}
		if f.variadic {
			f.in = []reflect.Type{reflect.TypeOf([]any{})}
		}
		g.funcs = append(g.funcs, f)
	}
	return g
}

func (g *tgen) pick(xs []string) string { return xs[g.r.Intn(len(xs))] }
func (g *tgen) chance(p float64) bool  { return g.r.Float64() < p }

func (g *tgen) template() string {
	g.vars, g.inRange, g.defs, g.inDef = nil, 0, nil, false
	var b strings.Builder
	n := 1 + g.r.Intn(4)
	for i := 0; i < n; i++ {
		b.WriteString(g.piece(0))
	}
	return b.String()
}

func (g *tgen) open() string {
	if g.chance(0.15) {
		return "{{- "
	}
	if g.chance(0.1) {
		return "{{"
	}
	return "{{ "
}

func (g *tgen) close() string {
	if g.chance(0.15) {
		return " -}}"
	}
	if g.chance(0.1) {
		return "}}"
	}
	return " }}"
}

func (g *tgen) text() string {
	return g.pick([]string{"a", " ", "\n", "x-", "  \n  ", "key: ", "- ", ",", "é", "\t", "[", "]"})
}

func (g *tgen) piece(depth int) string {
	x := g.r.Float64()
	switch {
	case x < 0.2 || depth > 2:
		if depth > 2 && g.chance(0.5) {
			return g.action()
		}
		return g.text()
	case x < 0.62:
		return g.action()
	case x < 0.70:
		s := g.open() + "if " + g.pipeline(0) + g.close() + g.body(depth)
		if g.chance(0.3) {
			s += g.open() + "else if " + g.pipeline(0) + g.close() + g.body(depth)
		}
		if g.chance(0.4) {
			s += g.open() + "else" + g.close() + g.body(depth)
		}
		return s + g.open() + "end" + g.close()
	case x < 0.77:
		decl := ""
		saved := len(g.vars)
		if g.chance(0.5) {
			if g.chance(0.5) {
				decl = "$i, $v := "
				g.vars = append(g.vars, "$i", "$v")
			} else {
				decl = "$v := "
				g.vars = append(g.vars, "$v")
			}
		}
		src := g.pick([]string{".l", ".sl", ".m", ".objs", ".el", ".em", ".s", ".n", ".missing", ".x", "(until 3)",
			"(list 1 2)", "(dict \"k\" 1 \"j\" 2)", "3", ".nums", "(splitList \",\" .csv)"})
		if g.chance(0.2) {
			src = g.pipeline(1)
		}
		g.inRange++
		s := g.open() + "range " + decl + src + g.close() + g.body(depth)
		g.inRange--
		if g.chance(0.3) {
			s += g.open() + "else" + g.close() + g.body(depth)
		}
		g.vars = g.vars[:saved]
		return s + g.open() + "end" + g.close()
	case x < 0.82:
		saved := len(g.vars)
		decl := ""
		if g.chance(0.3) {
			decl = "$w := "
			g.vars = append(g.vars, "$w")
		}
		s := g.open() + "with " + decl + g.pipeline(0) + g.close() + g.body(depth)
		if g.chance(0.3) {
			s += g.open() + "else" + g.close() + g.body(depth)
		}
		g.vars = g.vars[:saved]
		return s + g.open() + "end" + g.close()
	case x < 0.89:
		name := g.pick([]string{"$a", "$b"})
		op := " := "
		known := false
		for _, v := range g.vars {
			if v == name {
				known = true
			}
		}
		if known && g.chance(0.5) {
			op = " = "
		} else if !known && g.chance(0.05) {
			op = " = " // undefined variable
		}
		if op == " := " && !known {
			g.vars = append(g.vars, name)
		}
		return g.open() + name + op + g.pipeline(0) + g.close()
	case x < 0.91:
		return g.pick([]string{"{{/* c */}}", "{{- /* c */ -}}", "{{ /* c */ }}", "{{/* a\nb */}}"})
	case x < 0.94 && g.inRange > 0:
		return g.open() + g.pick([]string{"break", "continue"}) + g.close()
	case x < 0.96 && !g.inDef && depth == 0:
		name := g.pick([]string{"t1", "t2"})
		g.inDef = true
		saved := g.vars
		g.vars = nil
		body := g.body(depth + 1)
		g.vars = saved
		g.inDef = false
		g.defs = append(g.defs, name)
		if g.chance(0.5) {
			return fmt.Sprintf("{{ define %q }}%s{{ end }}{{ template %q %s }}", name, body, name, g.operand(1))
		}
		return fmt.Sprintf("{{ block %q %s }}%s{{ end }}", name, g.operand(1), body)
	case x < 0.97 && !g.inDef && len(g.defs) > 0:
		return fmt.Sprintf("{{ template %q }}", g.pick(g.defs))
	default:
		return g.action()
	}
}

func (g *tgen) body(depth int) string {
	var b strings.Builder
	n := g.r.Intn(3)
	for i := 0; i < n; i++ {
		b.WriteString(g.piece(depth + 1))
	}
	if n == 0 && g.chance(0.5) {
		b.WriteString(g.text())
	}
	return b.String()
}

func (g *tgen) action() string {
	return g.open() + g.pipeline(0) + g.close()
}

func (g *tgen) pipeline(depth int) string {
	s := g.command(depth, 0)
	for g.chance(0.2) && depth < 2 {
		s += " | " + g.command(depth, 1)
	}
	return s
}

func (g *tgen) command(depth, piped int) string {
	if piped == 0 && g.chance(0.45) {
		return g.operand(depth)
	}
	f := g.funcs[g.r.Intn(len(g.funcs))]
	if g.naming {
		for _, ok := builtinFuncs[f.name]; !ok; _, ok = builtinFuncs[f.name] {
			f = g.funcs[g.r.Intn(len(g.funcs))]
		}
	}
	n := len(f.in)
	var types []reflect.Type
	if f.variadic {
		fixed := f.in[:n-1]
		types = append(types, fixed...)
		elem := f.in[n-1].Elem()
		for k := g.r.Intn(4); k > 0; k-- {
			types = append(types, elem)
		}
	} else {
		types = append(types, f.in...)
	}
	if g.chance(0.04) && len(types) > 0 {
		types = types[:len(types)-1]
	} else if g.chance(0.02) {
		types = append(types, reflect.TypeOf((*any)(nil)).Elem())
	}
	types = types[:max(0, len(types)-piped)]
	parts := []string{f.name}
	for _, t := range types {
		parts = append(parts, g.arg(t, depth))
	}
	return strings.Join(parts, " ")
}

func (g *tgen) arg(t reflect.Type, depth int) string {
	if g.chance(0.06) {
		return g.operand(depth + 1)
	}
	switch t.Kind() {
	case reflect.String:
		if g.chance(0.3) {
			return g.pick([]string{".s", ".e", ".v", ".u", ".csv", ".ver", ".pad", ".ml", ".html", ".b64", ".path",
				".builtin.cluster.name", ".builtin.controlPlane.version"})
		}
		return g.pick(stringLits)
	case reflect.Int, reflect.Int64, reflect.Int32, reflect.Uint, reflect.Uint32, reflect.Uint64, reflect.Float64,
		reflect.Uint8:
		if g.chance(0.25) {
			return g.pick([]string{".n", ".f", ".neg", ".builtin.controlPlane.replicas"})
		}
		return g.pick(numLits)
	case reflect.Bool:
		return g.pick([]string{"true", "false", ".t"})
	case reflect.Slice:
		return g.pick([]string{".l", ".sl", ".el", ".objs", "(list 1 \"a\" 2)", "(list \"b\" \"a\")", ".nums"})
	case reflect.Map:
		return g.pick([]string{".m", ".em", ".m.a", "(dict \"a\" 1 \"b\" \"x\")", ".builtin"})
	default:
		return g.operand(depth + 1)
	}
}

func (g *tgen) operand(depth int) string {
	x := g.r.Float64()
	switch {
	case x < 0.4:
		if g.naming {
			return g.pick([]string{".cluster.name", ".machineDeployment.topologyName", ".random", ".machinePool.topologyName",
				".cluster", ".missing", ".cluster.missing", ".random.x", "."})
		}
		if g.chance(0.08) { // fields that fail to evaluate
			return g.pick([]string{".x.y", ".s.y", ".m.a.x.y", ".missing.deeper", ".n.x"})
		}
		return g.pick([]string{".s", ".n", ".f", ".big", ".small", ".neg", ".l", ".sl", ".m", ".m.a", ".m.a.x", ".m.b",
			".e", ".x", ".t", ".v", ".u", ".objs", ".missing", ".builtin.cluster.name",
			".builtin.controlPlane.version", ".builtin.machineDeployment", ".el", ".em", ".", "$", ".csv", ".ver", ".nums",
			".builtin.controlPlane.replicas", ".html", ".ml"})
	case x < 0.5 && len(g.vars) > 0:
		v := g.pick(g.vars)
		if g.chance(0.2) {
			v += g.pick([]string{".a", ".x", ".b"})
		}
		return v
	case x < 0.65:
		return g.pick(stringLits)
	case x < 0.8:
		return g.pick(numLits)
	case x < 0.85:
		return g.pick(otherLits)
	case depth < 2:
		return "(" + g.pipeline(depth+1) + ")"
	default:
		return g.pick(numLits)
	}
}

// mutate damages a template a little (a character dropped, duplicated or inserted), for parse errors.
func (g *tgen) mutate(s string) string {
	if s == "" {
		return s
	}
	i := g.r.Intn(len(s))
	switch g.r.Intn(3) {
	case 0:
		return s[:i] + s[i+1:]
	case 1:
		return s[:i] + s[i:i+1] + s[i:]
	default:
		return s[:i] + g.pick([]string{"{{", "}}", "(", ")", "\"", "|", "$", ".", "-", " ", "end", ":="}) + s[i:]
	}
}

var templateSeeds = []string{
	`{{ .builtin.controlPlane.version }}`,
	`{{ semverCompare "< v1.25-0" .builtin.controlPlane.version }}`,
	`{{ semverCompare ">= 1.34" .builtin.controlPlane.version }}`,
	`{{ if semverCompare "^1.34" .builtin.machineDeployment.version }}new{{ else }}old{{ end }}`,
	`{{ .builtin.cluster.name }}-{{ .builtin.machineDeployment.topologyName }}`,
	`{{ toYaml .m }}`, `{{ fromJson "{}" }}`,
	`{{ toJson .m }}|{{ toPrettyJson .objs }}|{{ toRawJson .html }}`,
	`{{ printf "%v %s %q %5.2f|%-4s|%05d|%x|%t|%c|%U" 3 "s" "q\n" 3.14159 "ab" 42 255 true 65 9731 }}`,
	`{{ printf "%d" .n }}|{{ printf "%.0f" .n }}|{{ .n | int }}|{{ .f | int64 }}|{{ .big | toString }}`,
	"- name: {{ .s | quote }}\n  value: {{ .n | add 1 }}\n{{- range .sl }}\n- {{ . | upper }}\n{{- end }}\n",
	`{{ $x := dict "a" 1 }}{{ $_ := set $x "b" 2 }}{{ toJson $x }}`,
	`{{ range $k, $v := .m }}{{ $k }}={{ $v }};{{ end }}`,
	`{{ with .missing }}yes{{ else }}no{{ end }}`,
	`{{ default "d" .missing }}|{{ default "d" .e }}|{{ default 1 .x }}|{{ empty .el }}|{{ coalesce .x .e "c" }}`,
	`{{ ternary "a" "b" .t }}|{{ .s | lower | replace "o" "0" | trunc 5 }}`,
	`{{ regexReplaceAll "[aeiou]" .s "_" }}|{{ regexFind "[0-9]+" .v }}|{{ regexSplit "," .csv -1 }}`,
	`{{ b64enc .s }}|{{ b64dec .b64 }}|{{ sha256sum .s }}|{{ adler32sum .s }}|{{ sha1sum .s }}`,
	`{{ semver .v }}|{{ (semver .v).Major }}|{{ (semver "v1.2.3-rc.1").Prerelease }}`,
	`{{ until 5 }}|{{ untilStep 1 10 3 }}|{{ seq 1 3 }}|{{ seq 5 1 }}|{{ seq 1 2 7 }}`,
	`{{ list 1 2 3 | last }}|{{ first .l }}|{{ rest .sl }}|{{ initial .l }}|{{ uniq .sl }}|{{ sortAlpha .sl }}`,
	`{{ base .path }}|{{ dir .path }}|{{ ext .path }}|{{ clean "/a/../b" }}|{{ isAbs .path }}`,
	`{{ indent 2 .ml }}|{{ nindent 4 "x" }}|{{ trimSuffix "\n" .ml }}|{{ splitList "\n" .ml }}`,
	`{{ camelcase "hello_world" }}|{{ snakecase "HelloWorld" }}|{{ kebabcase "HelloWorld" }}|{{ swapcase "aBc" }}`,
	`{{ abbrev 5 "hello world" }}|{{ abbrevboth 5 10 "1234 5678 9123" }}|{{ initials "First Try" }}`,
	`{{ wrap 5 "Hello World" }}|{{ wrapWith 5 "\t" "Hello World" }}`,
	`{{ toDecimal "0777" }}|{{ duration 95 }}|{{ durationRound "2h10m5s" }}|{{ unixEpoch (toDate "2006-01-02" "2024-05-06") }}`,
	`{{ urlParse "https://u:p@example.com:8080/a?b=c#d" }}|{{ urlJoin (dict "scheme" "https" "host" "x.io" "path" "/p") }}`,
	`{{ toDate "2006-01-02" "2017-12-31" }}|{{ mustToDate "2006-01-02" "x" }}`,
	`{{ .x.y }}`, `{{ .s.y }}`, `{{ index .l 5 }}`, `{{ index .m "zz" }}`, `{{ slice .s 1 3 }}`, `{{ len .u }}`,
	`{{ fail "boom" }}`, `{{ required "x" .missing }}`, `{{ tpl "x" . }}`, `{{ include "x" . }}`,
	`{{ define "a" }}A{{ .s }}{{ end }}{{ template "a" . }}{{ template "b" }}`,
	`{{ range .l }}{{ if eq . 1.0 }}{{ break }}{{ end }}{{ . }}{{ end }}`,
	`{{ 1 }}{{ 1.0 }}{{ 1e100 }}{{ 0x1p-2 }}{{ 'x' }}{{ "\u263a" }}{{ -0 }}`,
	`{{ add 1 2 }}|{{ add1 .n }}|{{ sub 10 .f }}|{{ mul 2 3 4 }}|{{ div 7 2 }}|{{ mod 7 3 }}|{{ max 1 5 3 }}|{{ min 4 .n }}`,
	`{{ addf 1.5 2 }}|{{ subf 10 .f }}|{{ mulf 2 3.5 }}|{{ divf 7 2 }}|{{ maxf 1 5.5 }}|{{ minf 4 .f }}|{{ floor 2.7 }}|{{ ceil 2.1 }}|{{ round 2.555 2 }}`,
	`{{ div 1 0 }}`, `{{ mod 1 0 }}`, `{{ atoi "12" }}|{{ atoi "x" }}|{{ float64 "2.5" }}|{{ int "x" }}`,
	`{{ deepEqual .l (list 3 1 2) }}|{{ kindOf .m }}|{{ typeOf .l }}|{{ kindIs "map" .m }}|{{ typeIsLike "string" .s }}`,
	`{{ keys .m | sortAlpha }}|{{ values .m }}|{{ pick .m "a" }}|{{ omit .m "a" }}|{{ hasKey .m "b" }}|{{ pluck "a" .objs }}`,
	`{{ merge (dict "a" 1) (dict "a" 2 "b" 3) }}|{{ mergeOverwrite (dict "a" 1) (dict "a" 2) }}|{{ dig "a" "x" "d" .m }}`,
	`{{ get .m "b" }}|{{ unset (dict "a" 1) "a" }}|{{ deepCopy .m }}|{{ compact (list "" 1 nil "a") }}`,
	`{{ append .l 4 }}|{{ prepend .l 0 }}|{{ concat .l .sl }}|{{ reverse .sl }}|{{ without .l 1 }}|{{ has 1 .l }}`,
	`{{ chunk 2 .l }}|{{ slice .l 1 }}|{{ mustSlice .l 1 2 }}|{{ join "," .sl }}|{{ splitn "," 2 .csv }}|{{ split "," .csv }}`,
	`{{ cat "a" 1 nil "b" }}|{{ repeat 3 "ab" }}|{{ substr 1 3 .u }}|{{ trunc -3 .s }}|{{ nospace " a b " }}|{{ plural "one" "many" 2 }}`,
	`{{ squote .s }}|{{ quote .n .x }}|{{ title "hello world" }}|{{ untitle "Hello" }}|{{ contains "ll" .s }}|{{ hasPrefix "He" .s }}`,
	`{{ trimAll "-" "--a--" }}|{{ trimPrefix "a" "aab" }}|{{ trim .pad }}|{{ upper .u }}|{{ lower "ÀB" }}`,
	`{{ regexMatch "^v[0-9]+" .v }}|{{ regexFindAll "[a-z]" .s 3 }}|{{ regexReplaceAllLiteral "o" .s "$1" }}|{{ regexQuoteMeta "a.b" }}`,
	`{{ mustRegexMatch "(" .s }}`, `{{ regexMatch "(" .s }}`,
	`{{ sha512sum .s }}|{{ b32enc .s }}|{{ b32dec "NBSWY3DP" }}|{{ fromJson "{\"a\":[1,2]}" }}|{{ mustFromJson "x" }}`,
	`{{ toStrings .l }}|{{ toString .m }}|{{ int64 "12" }}|{{ .f | toString }}|{{ ternary 1 2 false }}`,
	`{{ get (fromJson "{\"a\":1}") "a" }}|{{ (fromJson "[1,2]") }}|{{ fromJsonArray "[1,2]" }}|{{ mustFromJsonArray "{}" }}`,
	`{{ semverCompare "1.2.x" "1.2.7" }}|{{ semverCompare ">=1.0.0 <2.0.0 || >=3.0.0" "3.1.0" }}|{{ semverCompare "x" "1.0" }}`,
	`{{ .builtin.machineDeployment.replicas | int | add 1 }}|{{ mustAppend .l 1 }}|{{ mustFirst .el }}|{{ mustLast .el }}`,
	`{{ and 1 0 "x" }}|{{ or 0 "" .x }}|{{ not .e }}|{{ eq .n 3.0 }}|{{ eq .s "a" "Hello World" }}|{{ lt 1 2 }}|{{ ne .x nil }}`,
	`{{ eq .n 3 }}`, `{{ lt .s 1 }}`, `{{ html .html }}|{{ js .html }}|{{ urlquery .html }}|{{ print 1 2 "a" "b" 3 }}|{{ println .s }}`,
	`{{ list }}{{ dict }}{{ tuple 1 "a" }}|{{ empty (dict) }}|{{ all 1 .x }}|{{ any 0 "" .s }}`,
	`{{ len 3 }}`, `{{ index 1 1 }}`, `{{ slice .l 2 1 }}`, `{{ .s.x.y }}`, `{{ $.s }}`, `{{ $x }}`, `{{ nil }}`, `{{ 1 | nil }}`,
	`{{ range $i, $e := .objs }}{{ $i }}:{{ $e.a }}{{ with $e.b }}{{ . }}{{ end }};{{ end }}`,
	`{{ range 3 }}{{ . }}{{ end }}`, `{{ range $i, $c := "héllo" }}{{ $i }}{{ $c }}{{ end }}`,
	`{{ if and .t (gt .n 2.0) }}big{{ else if .t }}small{{ else }}off{{ end }}`,
	`{{- if .builtin.controlPlane.replicas }}{{ .builtin.controlPlane.replicas }}{{- end }}`,
	`{{ printf "%s-%d" .s 3 }}|{{ printf "%6.2f|%-8v|%+d|%x|%X|%o|%b|%e|%g" 3.14159 "ab" 5 "hi" 255 8 5 1234.5678 0.000001 }}`,
	`{{ printf "%v" .m }}|{{ printf "%+v" .objs }}|{{ printf "%#v" .l }}|{{ printf "%T" .m }}|{{ printf "%5t" true }}|{{ printf "%08.3f" -3.5 }}`,
	`{{ toJson 1e21 }}|{{ toJson 1e-7 }}|{{ toJson .small }}|{{ .small }}|{{ 1e21 }}|{{ toJson (list 100.0 1.5 -0.0) }}`,
	"{{ /* unterminated", "{{ .s ", "{{ end }}", "{{ if }}{{ end }}", "{{ range }}{{ end }}", "{{ else }}",
	"{{ 3 4 }}", "{{ .s | 3 }}", "{{ (1 }}", "{{ \"abc }}", "{{ 'ab' }}", "{{ $x := 1 }}{{ $x := }}", "{{ .a.b..c }}",
	"{{ break }}", "{{ range .l }}{{ continue 1 }}{{ end }}", "{{ define \"x\" }}{{ end }}{{ define \"x\" }}y{{ end }}",
	"{{ template }}", "{{ with $x := 1 }}{{ end }}{{ $x }}", "{{ nosuchfunc 1 }}", "{{ printf }}", "{{ .s.Method 1 }}",
}

// The naming templates of upstream's internal/topology/names: Go builtins only, missingkey=error.
var namingSeeds = []string{
	`{{ .cluster.name }}-{{ .machineDeployment.topologyName }}-{{ .random }}`,
	`{{ .cluster.name }}-{{ .random }}`, `{{ .cluster.name }}-{{ .missing }}`, `{{ .cluster.missing.x }}`,
	`{{ printf "%.5s" .cluster.name }}-{{ .random }}`, `{{ upper .cluster.name }}`, `{{ index . "random" }}`,
	`{{ index . "nope" }}`, `{{ .machinePool.topologyName | printf "%s-mp" }}`, `{{ len .cluster }}`,
}

func runTemplate(text, dataKey string, naming bool) (string, string, time.Duration) {
	var data map[string]any
	if err := json.Unmarshal([]byte(templateData[dataKey]), &data); err != nil {
		panic(err)
	}
	start := time.Now()
	var tpl *template.Template
	var err error
	if naming {
		tpl, err = template.New("template name generator").Option("missingkey=error").Parse(text)
	} else {
		tpl, err = template.New("tpl").Funcs(sprig.HermeticTxtFuncMap()).Parse(text)
	}
	if err != nil {
		return "", err.Error(), time.Since(start)
	}
	var buf bytes.Buffer
	if err := tpl.Execute(&buf, data); err != nil {
		return "", err.Error(), time.Since(start)
	}
	return buf.String(), "", time.Since(start)
}

func generateTemplateCases(seed int64, n int) []map[string]any {
	g := newTgen(seed)
	seen := map[string]bool{}
	var cases []map[string]any
	skipped := map[string]int{}
	add := func(text string, naming bool, origin string) bool {
		data := "values"
		if naming {
			data = "naming"
		}
		key := data + "\x00" + text
		if seen[key] || !utf8.ValidString(text) {
			return false
		}
		seen[key] = true
		out, errText, _ := runTemplate(text, data, naming)
		switch {
		case !utf8.ValidString(out) || !utf8.ValidString(errText):
			skipped["not UTF-8"]++
			return false
		case len(out) > 4000 || len(errText) > 4000:
			skipped["longer than 4000 bytes"]++
			return false
		}
		if again, againErr, _ := runTemplate(text, data, naming); again != out || againErr != errText {
			skipped["output differs between runs (sprig's keys/values follow Go's map order)"]++
			return false
		}
		c := map[string]any{"template": text, "data": data, "origin": origin}
		if naming {
			c["mode"] = "naming"
		}
		if errText != "" {
			c["error"] = errText
		} else {
			c["output"] = out
		}
		cases = append(cases, c)
		return true
	}
	for _, s := range templateSeeds {
		add(s, false, "seed")
	}
	for _, s := range namingSeeds {
		add(s, true, "seed")
	}
	for made := 0; made < n; {
		g.naming = g.chance(0.08)
		text := g.template()
		if g.chance(0.12) {
			text = g.mutate(text)
		}
		if add(text, g.naming, "random") {
			made++
		}
	}
	keys := []string{}
	for k := range skipped {
		keys = append(keys, k)
	}
	sort.Strings(keys)
	for _, k := range keys {
		fmt.Fprintf(os.Stderr, "templates skipped (%s): %d\n", k, skipped[k])
	}
	return cases
}
