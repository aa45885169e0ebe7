package collective

import (
	"context"
	"errors"
	"fmt"
	"math"
	"math/rand/v2"
	"net"
	"os"
	"os/exec"
	"strconv"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/ctrkit/ctrkit/trainer/tensor"
	"github.com/ctrkit/ctrkit/trainer/tensor/cpu"
)

func cpuBackends(t testing.TB, n int) []tensor.Backend {
	t.Helper()
	bes := make([]tensor.Backend, n)
	for i := range bes {
		be, err := cpu.New(cpu.Options{Workers: 1})
		if err != nil {
			t.Fatal(err)
		}
		bes[i] = be
	}
	return bes
}

// onRanks runs fn on every comm concurrently and fails on any error.
func onRanks(t *testing.T, comms []Comm, fn func(c Comm) error) {
	t.Helper()
	errs := make([]error, len(comms))
	var wg sync.WaitGroup
	for i, c := range comms {
		wg.Add(1)
		go func() { defer wg.Done(); errs[i] = fn(c) }()
	}
	wg.Wait()
	if err := errors.Join(errs...); err != nil {
		t.Fatal(err)
	}
}

// values is rank r's input: reproducible, with fractions so sums round.
func values(r, n int) []float32 {
	rng := rand.New(rand.NewPCG(uint64(r), 7))
	v := make([]float32, n)
	for i := range v {
		v[i] = float32(rng.NormFloat64()) * 1e3
	}
	return v
}

// testCollectives checks every collective of a world against a reference
// computed here in rank order (so the comparison is exact).
func testCollectives(t *testing.T, comms []Comm) {
	w := comms[0].Size()
	for _, n := range []int{0, 1, w - 1, 7, 1000} {
		if n < 0 {
			continue
		}
		want := make([]float32, n)
		maxs := make([]float32, n)
		for r := range w {
			v := values(r, n)
			for i := range want {
				if r == 0 {
					want[i], maxs[i] = v[i], v[i]
				} else {
					want[i] += v[i]
					maxs[i] = max(maxs[i], v[i])
				}
			}
		}
		avg := make([]float32, n)
		for i := range avg {
			avg[i] = float32(float64(want[i]) * (1 / float64(w)))
		}
		for _, tc := range []struct {
			red  Reduction
			want []float32
		}{{Sum, want}, {Max, maxs}, {Avg, avg}} {
			onRanks(t, comms, func(c Comm) error {
				be := c.Backend()
				x := be.Alloc(tensor.Float32, n)
				be.Upload(x, values(c.Rank(), n))
				if err := c.AllReduce(x, tc.red); err != nil {
					return err
				}
				got := make([]float32, n)
				if err := be.Download(got, x); err != nil {
					return err
				}
				for i := range got {
					if math.Float32bits(got[i]) != math.Float32bits(tc.want[i]) {
						return fmt.Errorf("AllReduce %s n=%d rank %d [%d] = %v, want %v", tc.red, n, c.Rank(), i, got[i], tc.want[i])
					}
				}
				return nil
			})
		}
		// ReduceScatter and AllGather over blocks of n elements.
		onRanks(t, comms, func(c Comm) error {
			be := c.Backend()
			x := be.Alloc(tensor.Float32, w*n)
			full := make([]float32, 0, w*n)
			for range w {
				full = append(full, values(c.Rank(), n)...)
			}
			be.Upload(x, full)
			y := be.Alloc(tensor.Float32, n)
			if err := c.ReduceScatter(y, x, Sum); err != nil {
				return err
			}
			got := make([]float32, n)
			if err := be.Download(got, y); err != nil {
				return err
			}
			for i := range got {
				if got[i] != want[i] {
					return fmt.Errorf("ReduceScatter rank %d [%d] = %v, want %v", c.Rank(), i, got[i], want[i])
				}
			}
			g := be.Alloc(tensor.Float32, w*n)
			s := be.Alloc(tensor.Float32, n)
			be.Upload(s, values(c.Rank(), n))
			if err := c.AllGather(g, s); err != nil {
				return err
			}
			all := make([]float32, w*n)
			if err := be.Download(all, g); err != nil {
				return err
			}
			for r := range w {
				v := values(r, n)
				for i := range v {
					if all[r*n+i] != v[i] {
						return fmt.Errorf("AllGather rank %d block %d [%d] = %v, want %v", c.Rank(), r, i, all[r*n+i], v[i])
					}
				}
			}
			return nil
		})
	}
	// AllToAllV: rank i sends (i+j) mod 3 + j elements to rank j, each
	// element encoding (i, j, k); int64 values.
	count := func(i, j int) int { return (i+j)%3 + j }
	onRanks(t, comms, func(c Comm) error {
		be, i := c.Backend(), c.Rank()
		var src []int64
		send := make([]int, w)
		recv := make([]int, w)
		for j := range w {
			send[j], recv[j] = count(i, j), count(j, i)
			for k := range send[j] {
				src = append(src, int64(i*10000+j*100+k))
			}
		}
		nr := 0
		for _, v := range recv {
			nr += v
		}
		x := be.Alloc(tensor.Int64, max(len(src), 1))
		be.Upload(x.Prefix(len(src)), src)
		y := be.Alloc(tensor.Int64, nr+3) // room beyond Σ recv stays
		be.Fill(y, -5)
		if err := c.AllToAllV(y, recv, x, send); err != nil {
			return err
		}
		got := make([]int64, nr+3)
		if err := be.Download(got, y); err != nil {
			return err
		}
		o := 0
		for j := range w {
			for k := range recv[j] {
				if want := int64(j*10000 + i*100 + k); got[o] != want {
					return fmt.Errorf("AllToAllV rank %d from %d [%d] = %d, want %d", i, j, k, got[o], want)
				}
				o++
			}
		}
		for ; o < len(got); o++ {
			if got[o] != -5 {
				return fmt.Errorf("AllToAllV rank %d wrote beyond its counts: [%d] = %d", i, o, got[o])
			}
		}
		return nil
	})
	for root := range w {
		onRanks(t, comms, func(c Comm) error {
			be := c.Backend()
			x := be.Alloc(tensor.Int32, 5)
			be.Upload(x, []int32{int32(c.Rank()), 1, 2, 3, 4})
			if err := c.Broadcast(x, root); err != nil {
				return err
			}
			got := make([]int32, 5)
			if err := be.Download(got, x); err != nil {
				return err
			}
			if got[0] != int32(root) || got[4] != 4 {
				return fmt.Errorf("Broadcast from %d: rank %d has %v", root, c.Rank(), got)
			}
			return nil
		})
	}
}

func TestLocalCollectives(t *testing.T) {
	for _, w := range []int{1, 2, 3, 4} {
		t.Run(fmt.Sprint(w), func(t *testing.T) {
			comms, err := NewLocal(cpuBackends(t, w), Options{Timeout: 10 * time.Second})
			if err != nil {
				t.Fatal(err)
			}
			testCollectives(t, comms)
			for _, c := range comms {
				c.Close()
			}
		})
	}
}

func TestMismatchIsAnError(t *testing.T) {
	comms, err := NewLocal(cpuBackends(t, 2), Options{Timeout: 5 * time.Second})
	if err != nil {
		t.Fatal(err)
	}
	errs := make([]error, 2)
	var wg sync.WaitGroup
	for i, c := range comms {
		wg.Add(1)
		go func() {
			defer wg.Done()
			be := c.Backend()
			x := be.Alloc(tensor.Float32, 8)
			if i == 0 {
				errs[i] = c.AllReduce(x, Sum)
			} else {
				errs[i] = c.AllGather(be.Alloc(tensor.Float32, 16), x)
			}
			c.Close() // a failed rank leaves; its peer must not hang
		}()
	}
	wg.Wait()
	if !errors.Is(errs[0], ErrMismatch) && !errors.Is(errs[1], ErrMismatch) {
		t.Fatalf("want ErrMismatch, got %v / %v", errs[0], errs[1])
	}
	for _, e := range errs {
		if e != nil && !strings.Contains(e.Error(), "AllReduce") && !strings.Contains(e.Error(), "left") && !strings.Contains(e.Error(), "closed") {
			t.Errorf("message does not name the calls: %v", e)
		}
	}
}

func TestPeerLeftAndTimeout(t *testing.T) {
	comms, err := NewLocal(cpuBackends(t, 2), Options{Timeout: 200 * time.Millisecond})
	if err != nil {
		t.Fatal(err)
	}
	// Rank 1 never calls: rank 0 times out with ErrPeer.
	x := comms[0].Backend().Alloc(tensor.Float32, 4)
	t0 := time.Now()
	err = comms[0].AllReduce(x, Sum)
	if !errors.Is(err, ErrPeer) || time.Since(t0) > 5*time.Second {
		t.Fatalf("want a timely ErrPeer, got %v after %v", err, time.Since(t0))
	}
	// Rank 1 leaves: rank 0 learns at once (well under the timeout).
	comms2, _ := NewLocal(cpuBackends(t, 2), Options{Timeout: time.Minute})
	comms2[1].Close()
	t0 = time.Now()
	err = comms2[0].AllReduce(comms2[0].Backend().Alloc(tensor.Float32, 4), Sum)
	if !errors.Is(err, ErrPeer) || !strings.Contains(err.Error(), "closed its communicator") || time.Since(t0) > 10*time.Second {
		t.Fatalf("want ErrPeer naming the closed rank, got %v", err)
	}
}

func TestRefusals(t *testing.T) {
	comms, _ := NewLocal(cpuBackends(t, 2), Options{})
	c, be := comms[0], comms[0].Backend()
	for name, err := range map[string]error{
		"avg of ints":     c.AllReduce(be.Alloc(tensor.Int32, 2), Avg),
		"block mismatch":  c.AllGather(be.Alloc(tensor.Float32, 5), be.Alloc(tensor.Float32, 2)),
		"counts":          c.AllToAllV(be.Alloc(tensor.Float32, 2), []int{1}, be.Alloc(tensor.Float32, 2), []int{1, 1}),
		"overflow":        c.AllToAllV(be.Alloc(tensor.Float32, 2), []int{1, 1}, be.Alloc(tensor.Float32, 2), []int{2, 1}),
		"broadcast root":  c.Broadcast(be.Alloc(tensor.Float32, 2), 2),
		"dtype":           c.ReduceScatter(be.Alloc(tensor.Int32, 1), be.Alloc(tensor.Float32, 2), Sum),
		"unknown reducer": c.AllReduce(be.Alloc(tensor.Float32, 2), Reduction(9)),
	} {
		if err == nil {
			t.Errorf("%s: no error", name)
		}
	}
}

// freePort returns a loopback port nobody listens on (now).
func freePort(t *testing.T) string {
	l, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	defer l.Close()
	return l.Addr().String()
}

// TestJoinTCP: three "processes" (goroutines joining over loopback TCP),
// driving 1, 2 and 1 ranks, give the same results as one process.
func TestJoinTCP(t *testing.T) {
	addr := freePort(t)
	locals := []int{1, 2, 1}
	groups := make([]*Group, len(locals))
	errs := make([]error, len(locals))
	var wg sync.WaitGroup
	for p, n := range locals {
		wg.Add(1)
		go func() {
			defer wg.Done()
			if p > 0 {
				time.Sleep(time.Duration(p) * 50 * time.Millisecond) // workers may start first or later
			}
			l := Launch{Rank: p, Size: len(locals), MasterAddr: addr, From: "test"}
			groups[p], errs[p] = Join(context.Background(), l, n, JoinOptions{
				Options: Options{Timeout: 20 * time.Second},
				Payload: func() ([]byte, error) { return []byte("nccl-id"), nil },
			})
		}()
	}
	wg.Wait()
	if err := errors.Join(errs...); err != nil {
		t.Fatal(err)
	}
	var comms []Comm
	for p, g := range groups {
		if g.World != 4 || string(g.Payload) != "nccl-id" {
			t.Fatalf("process %d: world %d payload %q", p, g.World, g.Payload)
		}
		cs, err := g.HostComms(cpuBackends(t, g.Local))
		if err != nil {
			t.Fatal(err)
		}
		comms = append(comms, cs...)
	}
	for i, c := range comms {
		if c.Rank() != i {
			t.Fatalf("comm %d has rank %d", i, c.Rank())
		}
	}
	testCollectives(t, comms)
	for _, c := range comms {
		c.Close()
	}
}

func TestJoinUnreachable(t *testing.T) {
	addr := freePort(t)
	_, err := Join(context.Background(), Launch{Rank: 1, Size: 2, MasterAddr: addr, From: "CTRKIT_RANK/CTRKIT_WORLD_SIZE, CTRKIT_MASTER_ADDR"}, 1,
		JoinOptions{Options: Options{Timeout: 600 * time.Millisecond}})
	if err == nil || !strings.Contains(err.Error(), addr) || !strings.Contains(err.Error(), "CTRKIT_MASTER_ADDR") {
		t.Fatalf("want an error naming %s and the variable, got %v", addr, err)
	}
	// The master waits for a process that never comes.
	_, err = Join(context.Background(), Launch{Rank: 0, Size: 3, MasterAddr: freePort(t), From: "test"}, 1,
		JoinOptions{Options: Options{Timeout: 300 * time.Millisecond}})
	if err == nil || !strings.Contains(err.Error(), "missing processes 1, 2") {
		t.Fatalf("want the missing processes named, got %v", err)
	}
}

func TestFromEnv(t *testing.T) {
	env := func(kv ...string) func(string) string {
		m := map[string]string{}
		for i := 0; i < len(kv); i += 2 {
			m[kv[i]] = kv[i+1]
		}
		return func(k string) string { return m[k] }
	}
	for _, tc := range []struct {
		env        func(string) string
		rank, size int
		addr, err  string
	}{
		{env(), 0, 1, "", ""},
		{env("CTRKIT_RANK", "1", "CTRKIT_WORLD_SIZE", "2", "CTRKIT_MASTER_ADDR", "node0"), 1, 2, "node0:29600", ""},
		{env("OMPI_COMM_WORLD_RANK", "3", "OMPI_COMM_WORLD_SIZE", "4", "CTRKIT_MASTER_ADDR", "10.0.0.1:1234"), 3, 4, "10.0.0.1:1234", ""},
		{env("SLURM_PROCID", "0", "SLURM_NTASKS", "2", "MASTER_ADDR", "n1", "MASTER_PORT", "5000"), 0, 2, "n1:5000", ""},
		{env("RANK", "1", "WORLD_SIZE", "2"), 0, 0, "", "CTRKIT_MASTER_ADDR"},
		{env("CTRKIT_RANK", "2", "CTRKIT_WORLD_SIZE", "2"), 0, 0, "", "is not a rank"},
		{env("CTRKIT_RANK", "x", "CTRKIT_WORLD_SIZE", "2"), 0, 0, "", "not a number"},
		{env("CTRKIT_RANK", "0"), 0, 0, "", "both or neither"},
	} {
		l, err := FromEnv(tc.env)
		if tc.err != "" {
			if err == nil || !strings.Contains(err.Error(), tc.err) {
				t.Errorf("want error %q, got %v (%+v)", tc.err, err, l)
			}
			continue
		}
		if err != nil || l.Rank != tc.rank || l.Size != tc.size || l.MasterAddr != tc.addr {
			t.Errorf("got %+v %v, want rank %d size %d addr %q", l, err, tc.rank, tc.size, tc.addr)
		}
	}
}

// TestProcesses runs two real processes (this test binary re-executed)
// joining over loopback as a launcher would start them.
func TestProcesses(t *testing.T) {
	if os.Getenv("CTRKIT_COLLECTIVE_CHILD") != "" {
		return
	}
	addr := freePort(t)
	outs := make([]string, 2)
	errs := make([]error, 2)
	var wg sync.WaitGroup
	for r := range 2 {
		wg.Add(1)
		go func() {
			defer wg.Done()
			cmd := exec.Command(os.Args[0], "-test.run", "^TestChildProcess$", "-test.v")
			cmd.Env = append(os.Environ(), "CTRKIT_COLLECTIVE_CHILD=1", "CTRKIT_RANK="+strconv.Itoa(r), "CTRKIT_WORLD_SIZE=2", "CTRKIT_MASTER_ADDR="+addr)
			b, err := cmd.CombinedOutput()
			outs[r], errs[r] = string(b), err
		}()
	}
	wg.Wait()
	for r := range 2 {
		if errs[r] != nil || !strings.Contains(outs[r], "sum=") {
			t.Fatalf("process %d: %v\n%s", r, errs[r], outs[r])
		}
	}
	line := func(s string) string { return s[strings.Index(s, "sum="):][:25] }
	if line(outs[0]) != line(outs[1]) {
		t.Fatalf("processes disagree: %q vs %q", line(outs[0]), line(outs[1]))
	}
}

func TestChildProcess(t *testing.T) {
	if os.Getenv("CTRKIT_COLLECTIVE_CHILD") == "" {
		t.Skip("run by TestProcesses")
	}
	l, err := FromEnv(nil)
	if err != nil {
		t.Fatal(err)
	}
	g, err := Join(context.Background(), l, 1, JoinOptions{Options: Options{Timeout: 20 * time.Second}})
	if err != nil {
		t.Fatal(err)
	}
	cs, err := g.HostComms(cpuBackends(t, 1))
	if err != nil {
		t.Fatal(err)
	}
	c := cs[0]
	be := c.Backend()
	x := be.Alloc(tensor.Float32, 100)
	be.Upload(x, values(c.Rank(), 100))
	if err := c.AllReduce(x, Sum); err != nil {
		t.Fatal(err)
	}
	got := make([]float32, 100)
	be.Download(got, x)
	var h uint64
	for _, v := range got {
		h = h*31 + uint64(math.Float32bits(v))
	}
	fmt.Printf("sum=%020d rank=%d\n", h, c.Rank())
	c.Close()
}

func TestMeasure(t *testing.T) {
	comms, err := NewLocal(cpuBackends(t, 3), Options{Timeout: 10 * time.Second})
	if err != nil {
		t.Fatal(err)
	}
	bw, err := Measure(comms, MeasureOps, []int64{1 << 10, 1 << 16}, 2)
	if err != nil {
		t.Fatal(err)
	}
	if len(bw) != 2*len(MeasureOps) {
		t.Fatalf("%d results", len(bw))
	}
	for _, b := range bw {
		if !b.Checked || b.Seconds <= 0 || b.AlgGBps <= 0 || b.Ranks != 3 {
			t.Errorf("bad figure %+v", b)
		}
	}
}

func FuzzHeader(f *testing.F) {
	var b [headerBytes]byte
	header{seq: 3, src: 1, dst: 2, op: opAllReduce, dtype: tensor.Float32, n: 64}.put(b[:])
	f.Add(b[:])
	f.Fuzz(func(t *testing.T, in []byte) {
		if len(in) < headerBytes {
			return
		}
		h, err := parseHeader(in[:headerBytes])
		if err != nil {
			return
		}
		if h.n < 0 || h.n > maxFrame {
			t.Fatalf("accepted length %d", h.n)
		}
		var out [headerBytes]byte
		h.put(out[:])
		h2, err := parseHeader(out[:])
		if err != nil || h2 != h {
			t.Fatalf("round trip %+v -> %+v (%v)", h, h2, err)
		}
	})
}
