package trizktest

import (
	"bufio"
	"fmt"
	"io"
	"net/http"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"syscall"
	"testing"
)

// Trizk is a trizk server for one test: trizk-server --port 0 --testing.
type Trizk struct {
	Addr    string // host:port for the client
	testing string // the test controls' URL
}

// StartTrizk starts a server; it is stopped and its data removed when the test ends.
func StartTrizk(t testing.TB) *Trizk {
	t.Helper()
	dir := t.TempDir()
	cmd := exec.Command("trizk-server", "--port", "0", "--testing",
		"--data-dir", filepath.Join(dir, "data"))
	stdout, err := cmd.StdoutPipe()
	if err != nil {
		t.Fatal(err)
	}
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { cmd.Process.Signal(syscall.SIGTERM); cmd.Wait() })
	fields := map[string]string{}
	lines := bufio.NewScanner(stdout)
	for lines.Scan() {
		if line := lines.Text(); strings.HasPrefix(line, "trizk-server ready") {
			for _, field := range strings.Fields(line) {
				if k, v, ok := strings.Cut(field, "="); ok {
					fields[k] = v
				}
			}
			break
		}
	}
	if fields["testing"] == "" {
		t.Fatal("trizk-server did not start")
	}
	return &Trizk{Addr: "127.0.0.1:" + fields["port"], testing: fields["testing"]}
}

// ExpireSession expires a session now; it returns once the closeSession is committed.
func (s *Trizk) ExpireSession(t testing.TB, id int64) bool {
	return strings.Contains(s.call(t, "POST", fmt.Sprintf("/expire?session=%d", id)), "true")
}

// DropConnections closes every client connection; sessions stay.
func (s *Trizk) DropConnections(t testing.TB) { s.call(t, "POST", "/drop") }

// Advance moves the server's clock: session timeouts, TTL nodes, containers.
func (s *Trizk) Advance(t testing.TB, seconds float64) {
	s.call(t, "POST", "/advance?seconds="+strconv.FormatFloat(seconds, 'f', -1, 64))
}

// Dump returns the tree, the sessions and the watches as JSON.
func (s *Trizk) Dump(t testing.TB) string { return s.call(t, "GET", "/dump") }

func (s *Trizk) call(t testing.TB, method, target string) string {
	t.Helper()
	req, err := http.NewRequest(method, s.testing+target, nil)
	if err != nil {
		t.Fatal(err)
	}
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	body, err := io.ReadAll(resp.Body)
	if err != nil || resp.StatusCode != http.StatusOK {
		t.Fatalf("%s %s: %d %s %v", method, target, resp.StatusCode, body, err)
	}
	return string(body)
}
