package collective

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/ctrkit/ctrkit/trainer/tensor"
)

// joinGroups joins len(locals) "processes" over loopback TCP.
func joinGroups(t *testing.T, locals []int, timeout time.Duration) []*Group {
	t.Helper()
	addr := freePort(t)
	groups := make([]*Group, len(locals))
	errs := make([]error, len(locals))
	var wg sync.WaitGroup
	for p, n := range locals {
		wg.Add(1)
		go func() {
			defer wg.Done()
			l := Launch{Rank: p, Size: len(locals), MasterAddr: addr, From: "test"}
			groups[p], errs[p] = Join(context.Background(), l, n, JoinOptions{Options: Options{Timeout: timeout}})
		}()
	}
	wg.Wait()
	if err := errors.Join(errs...); err != nil {
		t.Fatal(err)
	}
	return groups
}

// TestGatherer: two streams of byte all-gathers of different lengths on
// every rank, over a world of 3 ranks in 2 processes, run at the same
// time as the host collectives of the same ranks, and each rank gets
// every rank's bytes in rank order.
func TestGatherer(t *testing.T) {
	groups := joinGroups(t, []int{1, 2}, 20*time.Second)
	var comms []Comm
	var gs [2][]*Gatherer
	for _, g := range groups {
		cs, err := g.HostComms(cpuBackends(t, g.Local))
		if err != nil {
			t.Fatal(err)
		}
		comms = append(comms, cs...)
		for i := range g.Local {
			for s := range 2 {
				x, err := g.Gatherer(g.Base+i, uint32(s+1))
				if err != nil {
					t.Fatal(err)
				}
				gs[s] = append(gs[s], x)
			}
		}
	}
	part := func(s, r, i int) []byte { return bytes.Repeat([]byte{byte(10*s + r)}, (r*7+i*3+s)%11) }
	var wg sync.WaitGroup
	errs := make(chan error, 16)
	for s := range 2 {
		for r, x := range gs[s] {
			wg.Add(1)
			go func() {
				defer wg.Done()
				defer x.Close()
				for i := range 20 {
					all, err := x.AllGatherBytes(part(s, r, i))
					if err != nil {
						errs <- err
						return
					}
					for p := range all {
						if !bytes.Equal(all[p], part(s, p, i)) {
							errs <- fmt.Errorf("stream %d rank %d call %d: rank %d's part %v", s+1, r, i, p, all[p])
							return
						}
					}
				}
			}()
		}
	}
	onRanks(t, comms, func(c Comm) error { // collectives on the same connections meanwhile
		be := c.Backend()
		buf := be.Alloc(tensor.Float32, 64)
		be.Upload(buf, values(c.Rank(), 64))
		for range 10 {
			if err := c.AllReduce(buf, Sum); err != nil {
				return err
			}
		}
		return nil
	})
	wg.Wait()
	close(errs)
	for err := range errs {
		t.Error(err)
	}
	for _, c := range comms {
		c.Close()
	}
}

// TestGathererCloseAndPeer: Close ends a pending call at once; a peer
// whose process closed is an ErrPeer naming it; stream 0 and foreign
// ranks are refused.
func TestGathererCloseAndPeer(t *testing.T) {
	g, err := NewLocalGroup(2, Options{Timeout: 20 * time.Second})
	if err != nil {
		t.Fatal(err)
	}
	if _, err := g.Gatherer(0, 0); err == nil {
		t.Error("stream 0 accepted")
	}
	if _, err := g.Gatherer(2, 1); err == nil {
		t.Error("rank 2 of 2 accepted")
	}
	x0, _ := g.Gatherer(0, 1)
	done := make(chan error, 1)
	go func() { _, err := x0.AllGatherBytes([]byte("a")); done <- err }()
	x0.Close()
	if err := <-done; err == nil || !bytes.Contains([]byte(err.Error()), []byte("closed")) {
		t.Errorf("closed while waiting: %v", err)
	}
	x1, _ := g.Gatherer(1, 2)
	g.Close() // both ranks leave
	if _, err := x1.AllGatherBytes([]byte("b")); !errors.Is(err, ErrPeer) || !bytes.Contains([]byte(err.Error()), []byte("rank 0")) {
		t.Errorf("peer gone: %v", err)
	}
}

// TestGathererRetry: a Gatherer made again on the same stream (its first
// one dropped unused, as after a failed opening) receives what the peers
// sent on it meanwhile.
func TestGathererRetry(t *testing.T) {
	g, err := NewLocalGroup(2, Options{Timeout: 20 * time.Second})
	if err != nil {
		t.Fatal(err)
	}
	defer g.Close()
	x1, _ := g.Gatherer(1, 3)
	done := make(chan error, 1)
	go func() {
		all, err := x1.AllGatherBytes([]byte("one"))
		if err == nil && string(all[0]) != "zero" {
			err = fmt.Errorf("rank 1 got %q", all[0])
		}
		done <- err
	}()
	if _, err := g.Gatherer(0, 3); err != nil { // dropped unused
		t.Fatal(err)
	}
	x0, _ := g.Gatherer(0, 3)
	all, err := x0.AllGatherBytes([]byte("zero"))
	if err != nil || string(all[1]) != "one" {
		t.Fatalf("%q, %v", all, err)
	}
	if err := <-done; err != nil {
		t.Fatal(err)
	}
}

// TestGathererPeerClosed: a rank that closes its Gatherer (it stopped
// reading) frees a peer waiting for its next part at once, within a
// process and over TCP, with an ErrPeer naming it.
func TestGathererPeerClosed(t *testing.T) {
	local, err := NewLocalGroup(2, Options{Timeout: time.Hour})
	if err != nil {
		t.Fatal(err)
	}
	defer local.Close()
	tcp := joinGroups(t, []int{1, 1}, time.Hour)
	for _, gs := range [][2]*Group{{local, local}, {tcp[0], tcp[1]}} {
		x0, _ := gs[0].Gatherer(0, 7)
		x1, _ := gs[1].Gatherer(1, 7)
		done := make(chan error, 1)
		go func() { _, err := x1.AllGatherBytes([]byte("one")); done <- err }()
		if all, err := x0.AllGatherBytes([]byte("zero")); err != nil || string(all[1]) != "one" {
			t.Fatalf("%q, %v", all, err)
		}
		if err := <-done; err != nil {
			t.Fatal(err)
		}
		x1.Close() // rank 1 stops after one part
		_, err := x0.AllGatherBytes([]byte("a"))
		if !errors.Is(err, ErrPeer) || !strings.Contains(err.Error(), "rank 1 closed its end of the exchange") {
			t.Errorf("peer closed: %v", err)
		}
		x0.Close()
	}
	for _, g := range tcp {
		g.Close()
	}
}
