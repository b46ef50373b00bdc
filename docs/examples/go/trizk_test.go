package trizktest

import (
	"strings"
	"testing"
)

func TestRecipe(t *testing.T) {
	s := StartTrizk(t)
	if !strings.HasPrefix(s.Addr, "127.0.0.1:") {
		t.Fatal(s.Addr)
	}
	s.Advance(t, 60)
	s.DropConnections(t)
	if s.ExpireSession(t, 12345) {
		t.Fatal("an unknown session was expired")
	}
	if !strings.Contains(s.Dump(t), `"/zookeeper"`) {
		t.Fatal("no tree in the dump")
	}
}
