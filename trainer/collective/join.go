package collective

import (
	"context"
	"encoding/json"
	"fmt"
	"io"
	"net"
	"strings"
	"time"
)

// JoinOptions tune Join.
type JoinOptions struct {
	Options
	// Payload, on process 0, makes the bytes every process receives in
	// Group.Payload (e.g. an NCCL unique id); nil: none.
	Payload func() ([]byte, error)
}

// hello is what a process tells the master, and (Process only) a lower
// process when it connects to it.
type hello struct {
	Process   int    `json:"process"`
	Processes int    `json:"processes"`
	Local     int    `json:"local"`
	Addr      string `json:"addr"`
}

// table is the master's answer.
type table struct {
	Locals  []int    `json:"locals"`
	Addrs   []string `json:"addrs"`
	Payload []byte   `json:"payload"`
	Error   string   `json:"error,omitempty"`
}

// maxControl bounds a control message.
const maxControl = 1 << 20

func writeControl(c net.Conn, proc int, v any) error {
	b, err := json.Marshal(v)
	if err != nil {
		return err
	}
	var hb [headerBytes]byte
	header{op: opControl, src: proc, n: int64(len(b))}.put(hb[:])
	bufs := net.Buffers{hb[:], b}
	_, err = bufs.WriteTo(c)
	return err
}

func readControl(c net.Conn, v any) error {
	var hb [headerBytes]byte
	if _, err := io.ReadFull(c, hb[:]); err != nil {
		return err
	}
	h, err := parseHeader(hb[:])
	if err != nil {
		return err
	}
	if h.op != opControl || h.n > maxControl {
		return fmt.Errorf("unexpected %s during the rendezvous", h)
	}
	b := make([]byte, h.n)
	if _, err := io.ReadFull(c, b); err != nil {
		return err
	}
	return json.Unmarshal(b, v)
}

// Join connects this process (driving local ranks) with the other
// processes of l, as the package doc describes, and returns its Group.
// One process (l.Size == 1) needs no network.
func Join(ctx context.Context, l Launch, local int, o JoinOptions) (*Group, error) {
	if local < 1 {
		return nil, fmt.Errorf("collective: a process with %d ranks", local)
	}
	if l.Size <= 1 {
		g, err := NewLocalGroup(local, o.Options)
		if err != nil {
			return nil, err
		}
		if o.Payload != nil {
			if g.Payload, err = o.Payload(); err != nil {
				return nil, err
			}
		}
		return g, nil
	}
	ctx, cancel := context.WithTimeout(ctx, o.timeout())
	defer cancel()
	var (
		tab   table
		conns = make([]*peerConn, l.Size)
		err   error
	)
	if l.Rank == 0 {
		tab, err = master(ctx, l, local, o, conns)
	} else {
		tab, err = worker(ctx, l, local, conns)
	}
	if err != nil {
		for _, pc := range conns {
			if pc != nil {
				pc.c.Close()
			}
		}
		return nil, err
	}
	var owner []int
	base := 0
	for p, n := range tab.Locals {
		if p == l.Rank {
			base = len(owner)
		}
		for range n {
			owner = append(owner, p)
		}
	}
	r := newRouter(owner, l.Rank, o.timeout())
	r.conns = conns
	r.start()
	return &Group{World: len(owner), Base: base, Local: local, Process: l.Rank, Processes: l.Size, Payload: tab.Payload, r: r}, nil
}

// deadline applies ctx's deadline to c.
func deadline(ctx context.Context, c net.Conn) {
	if d, ok := ctx.Deadline(); ok {
		c.SetDeadline(d)
	}
}

func master(ctx context.Context, l Launch, local int, o JoinOptions, conns []*peerConn) (table, error) {
	_, port, _ := net.SplitHostPort(l.MasterAddr)
	var lc net.ListenConfig
	ln, err := lc.Listen(ctx, "tcp", net.JoinHostPort("", port))
	if err != nil {
		return table{}, fmt.Errorf("rendezvous: process 0 cannot listen on port %s (from %s): %v", port, l.From, err)
	}
	defer ln.Close()
	stop := context.AfterFunc(ctx, func() { ln.Close() })
	defer stop()
	tab := table{Locals: make([]int, l.Size), Addrs: make([]string, l.Size)}
	tab.Locals[0] = local
	joined := 1
	for joined < l.Size {
		c, err := ln.Accept()
		if err != nil {
			var missing []string
			for p := 1; p < l.Size; p++ {
				if conns[p] == nil {
					missing = append(missing, fmt.Sprint(p))
				}
			}
			return table{}, fmt.Errorf("rendezvous: %d of %d processes joined process 0 at %s within %v; missing processes %s (started? same %s?)",
				joined, l.Size, l.MasterAddr, o.timeout(), strings.Join(missing, ", "), l.From)
		}
		deadline(ctx, c)
		var h hello
		if err := readControl(c, &h); err != nil {
			c.Close()
			continue // a stray connection (port scanner, health check)
		}
		bad := ""
		switch {
		case h.Processes != l.Size:
			bad = fmt.Sprintf("process %d says %d processes, process 0 has %d", h.Process, h.Processes, l.Size)
		case h.Process <= 0 || h.Process >= l.Size:
			bad = fmt.Sprintf("process index %d of %d", h.Process, l.Size)
		case conns[h.Process] != nil:
			bad = fmt.Sprintf("two processes claim index %d (%s and %s)", h.Process, conns[h.Process].addr, c.RemoteAddr())
		case h.Local < 1:
			bad = fmt.Sprintf("process %d has %d ranks", h.Process, h.Local)
		}
		if bad != "" {
			writeControl(c, 0, table{Error: bad})
			c.Close()
			return table{}, fmt.Errorf("rendezvous: %s", bad)
		}
		conns[h.Process] = &peerConn{c: c, addr: c.RemoteAddr().String()}
		tab.Locals[h.Process] = h.Local
		tab.Addrs[h.Process] = h.Addr
		joined++
	}
	if o.Payload != nil {
		if tab.Payload, err = o.Payload(); err != nil {
			return table{}, err
		}
	}
	for p := 1; p < l.Size; p++ {
		if err := writeControl(conns[p].c, 0, tab); err != nil {
			return table{}, fmt.Errorf("rendezvous: answering process %d at %s: %v", p, conns[p].addr, err)
		}
	}
	// Wait for every process to have its mesh: each says so.
	for p := 1; p < l.Size; p++ {
		var ok hello
		if err := readControl(conns[p].c, &ok); err != nil {
			return table{}, fmt.Errorf("rendezvous: process %d at %s did not finish connecting: %v", p, conns[p].addr, err)
		}
	}
	for p := 1; p < l.Size; p++ {
		if err := writeControl(conns[p].c, 0, hello{}); err != nil {
			return table{}, fmt.Errorf("rendezvous: releasing process %d at %s: %v", p, conns[p].addr, err)
		}
		conns[p].c.SetDeadline(time.Time{})
	}
	return tab, nil
}

func worker(ctx context.Context, l Launch, local int, conns []*peerConn) (table, error) {
	var d net.Dialer
	var mc net.Conn
	var err error
	for {
		if mc, err = d.DialContext(ctx, "tcp", l.MasterAddr); err == nil {
			break
		}
		select {
		case <-ctx.Done():
			return table{}, fmt.Errorf("rendezvous: process %d cannot reach process 0 at %s (from %s): %v", l.Rank, l.MasterAddr, l.From, err)
		case <-time.After(200 * time.Millisecond):
		}
	}
	conns[0] = &peerConn{c: mc, addr: l.MasterAddr}
	deadline(ctx, mc)
	ip := mc.LocalAddr().(*net.TCPAddr).IP
	var lc net.ListenConfig
	ln, err := lc.Listen(ctx, "tcp", net.JoinHostPort(ip.String(), "0"))
	if err != nil {
		return table{}, fmt.Errorf("rendezvous: process %d cannot listen on %s: %v", l.Rank, ip, err)
	}
	defer ln.Close()
	stop := context.AfterFunc(ctx, func() { ln.Close() })
	defer stop()
	if err := writeControl(mc, l.Rank, hello{Process: l.Rank, Processes: l.Size, Local: local, Addr: ln.Addr().String()}); err != nil {
		return table{}, fmt.Errorf("rendezvous: process %d writing to process 0 at %s: %v", l.Rank, l.MasterAddr, err)
	}
	var tab table
	if err := readControl(mc, &tab); err != nil {
		return table{}, fmt.Errorf("rendezvous: process %d: no table from process 0 at %s: %v", l.Rank, l.MasterAddr, err)
	}
	if tab.Error != "" {
		return table{}, fmt.Errorf("rendezvous: process 0 refused process %d: %s", l.Rank, tab.Error)
	}
	if len(tab.Locals) != l.Size || len(tab.Addrs) != l.Size {
		return table{}, fmt.Errorf("rendezvous: process 0's table has %d entries for %d processes", len(tab.Locals), l.Size)
	}
	// Accept the higher processes while dialing the lower ones.
	acc := make(chan error, 1)
	go func() {
		for n := l.Size - 1 - l.Rank; n > 0; n-- {
			c, err := ln.Accept()
			if err != nil {
				acc <- fmt.Errorf("rendezvous: process %d: waiting for processes above it: %v", l.Rank, err)
				return
			}
			deadline(ctx, c)
			var h hello
			if err := readControl(c, &h); err != nil || h.Process <= l.Rank || h.Process >= l.Size || conns[h.Process] != nil {
				c.Close()
				n++
				continue
			}
			conns[h.Process] = &peerConn{c: c, addr: c.RemoteAddr().String()}
		}
		acc <- nil
	}()
	var derr error
	for q := 1; q < l.Rank && derr == nil; q++ {
		c, err := d.DialContext(ctx, "tcp", tab.Addrs[q])
		if err != nil {
			derr = fmt.Errorf("rendezvous: process %d cannot reach process %d at %s: %v", l.Rank, q, tab.Addrs[q], err)
			break
		}
		deadline(ctx, c)
		if err := writeControl(c, l.Rank, hello{Process: l.Rank}); err != nil {
			c.Close()
			derr = fmt.Errorf("rendezvous: process %d writing to process %d at %s: %v", l.Rank, q, tab.Addrs[q], err)
			break
		}
		conns[q] = &peerConn{c: c, addr: tab.Addrs[q]}
	}
	if derr != nil {
		ln.Close()
		<-acc
		return table{}, derr
	}
	if err := <-acc; err != nil {
		return table{}, err
	}
	if err := writeControl(mc, l.Rank, hello{Process: l.Rank}); err != nil {
		return table{}, fmt.Errorf("rendezvous: process %d writing to process 0: %v", l.Rank, err)
	}
	var ok hello
	if err := readControl(mc, &ok); err != nil {
		return table{}, fmt.Errorf("rendezvous: process %d: process 0 did not release the group: %v", l.Rank, err)
	}
	for _, pc := range conns {
		if pc != nil {
			pc.c.SetDeadline(time.Time{})
		}
	}
	return tab, nil
}
