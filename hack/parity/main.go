// Command parity generates capd-py's conformance corpus for ClusterClass patch templates and variables, for YAML
// as Kubernetes reads it (yaml.go: sigs.k8s.io/yaml) and for Go durations (durations.go), by running every case
// through upstream's own code:
// Go's text/template with sprig's HermeticTxtFuncMap (the versions sigs.k8s.io/cluster-api v1.13 links) and a
// verbatim copy of the cluster-api module's internal/topology/variables package (copied into the build directory
// by hack/parity/run.sh, since internal/ packages cannot be imported), which validates with
// k8s.io/apiextensions-apiserver's structural schemas, kube-openapi and the apiserver's CEL.
//
// Generation is deterministic: hand-written seeds plus cases drawn from math/rand seeded with -seed. The
// output is JSON lines, gzipped (no name, no timestamp: the same input gives the same bytes).
package main

import (
	"bytes"
	"compress/gzip"
	"encoding/json"
	"flag"
	"fmt"
	"os"
	"path/filepath"
)

func main() {
	out := flag.String("out", "tests/fixtures/parity", "output directory")
	seed := flag.Int64("seed", 27, "random seed")
	nTemplates := flag.Int("templates", 6000, "number of random templates")
	nVariables := flag.Int("variables", 3000, "number of random variable cases")
	flag.Parse()

	if err := os.MkdirAll(*out, 0o755); err != nil {
		fail(err)
	}
	tpl := generateTemplateCases(*seed, *nTemplates)
	write(filepath.Join(*out, "templates.jsonl.gz"), tpl)
	vars := generateVariableCases(*seed, *nVariables)
	write(filepath.Join(*out, "variables.jsonl.gz"), vars)
	write(filepath.Join(*out, "yaml.jsonl.gz"), generateYAMLCases())
	write(filepath.Join(*out, "durations.jsonl.gz"), generateDurationCases())
}

func write(path string, cases []map[string]any) {
	var raw bytes.Buffer
	for _, c := range cases {
		b, err := marshal(c)
		if err != nil {
			fail(fmt.Errorf("%s: %w", path, err))
		}
		raw.Write(b)
		raw.WriteByte('\n')
	}
	var gz bytes.Buffer
	w, err := gzip.NewWriterLevel(&gz, gzip.BestCompression)
	if err != nil {
		fail(err)
	}
	if _, err := w.Write(raw.Bytes()); err != nil {
		fail(err)
	}
	if err := w.Close(); err != nil {
		fail(err)
	}
	if err := os.WriteFile(path, gz.Bytes(), 0o644); err != nil {
		fail(err)
	}
	fmt.Fprintf(os.Stderr, " ✓ %s: %d cases, %d bytes (%d uncompressed)\n", path, len(cases), gz.Len(), raw.Len())
}

// marshal is json.Marshal without HTML escaping (the corpus is read by Python's json module).
func marshal(v any) ([]byte, error) {
	var b bytes.Buffer
	enc := json.NewEncoder(&b)
	enc.SetEscapeHTML(false)
	if err := enc.Encode(v); err != nil {
		return nil, err
	}
	return bytes.TrimRight(b.Bytes(), "\n"), nil
}

func fail(err error) {
	fmt.Fprintln(os.Stderr, "parity:", err)
	os.Exit(1)
}
