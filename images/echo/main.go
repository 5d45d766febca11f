// capd-py/echo: a tiny HTTP server for demos and e2e tests (like agnhost's serve-hostname):
// GET / answers with the pod's hostname, so a test can see which pod a Service routed to.
package main

import (
	"fmt"
	"log"
	"net/http"
	"os"
)

func main() {
	host, _ := os.Hostname()
	addr := ":8080"
	if v := os.Getenv("ADDR"); v != "" {
		addr = v
	}
	http.HandleFunc("/", func(w http.ResponseWriter, r *http.Request) { fmt.Fprintln(w, host) })
	http.HandleFunc("/healthz", func(w http.ResponseWriter, r *http.Request) { fmt.Fprintln(w, "ok") })
	log.Printf("serving %s on %s", host, addr)
	log.Fatal(http.ListenAndServe(addr, nil))
}
