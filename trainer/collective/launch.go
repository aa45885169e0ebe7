package collective

import (
	"fmt"
	"net"
	"os"
	"strconv"
	"strings"
)

// DefaultPort is the rendezvous port when the master address has none.
const DefaultPort = 29600

// Launch is what a launcher tells one process: its index among the
// processes of the run and where process 0 listens.
type Launch struct {
	// Rank is this process's index in [0, Size).
	Rank, Size int
	// LocalRank is its index among the processes of its node (-1 when
	// the launcher does not say).
	LocalRank int
	// MasterAddr is process 0's rendezvous address, host:port.
	MasterAddr string
	// From names the variables read ("CTRKIT_RANK", "OMPI_COMM_WORLD_RANK"...),
	// for messages.
	From string
}

// launchers are the variable sets FromEnv recognizes, first match wins.
var launchers = []struct{ rank, size, local string }{
	{"CTRKIT_RANK", "CTRKIT_WORLD_SIZE", "CTRKIT_LOCAL_RANK"},
	{"OMPI_COMM_WORLD_RANK", "OMPI_COMM_WORLD_SIZE", "OMPI_COMM_WORLD_LOCAL_RANK"}, // Open MPI's mpirun
	{"PMI_RANK", "PMI_SIZE", "MPI_LOCALRANKID"},                                    // MPICH, Intel MPI
	{"SLURM_PROCID", "SLURM_NTASKS", "SLURM_LOCALID"},                              // srun
	{"RANK", "WORLD_SIZE", "LOCAL_RANK"},                                           // torchrun
}

// FromEnv reads the launcher's variables (getenv, usually os.Getenv). A
// process started without a launcher is process 0 of 1. The master address
// comes from CTRKIT_MASTER_ADDR, else MASTER_ADDR (torchrun's; MASTER_PORT
// gives its port), with DefaultPort when no port is given.
func FromEnv(getenv func(string) string) (Launch, error) {
	if getenv == nil {
		getenv = os.Getenv
	}
	l := Launch{Size: 1, LocalRank: -1}
	for _, v := range launchers {
		rs, ss := getenv(v.rank), getenv(v.size)
		if rs == "" && ss == "" {
			continue
		}
		if rs == "" || ss == "" {
			return l, fmt.Errorf("launcher variables: %s=%q but %s=%q (both or neither)", v.rank, rs, v.size, ss)
		}
		var err error
		if l.Rank, err = strconv.Atoi(strings.TrimSpace(rs)); err != nil {
			return l, fmt.Errorf("launcher variables: %s=%q is not a number", v.rank, rs)
		}
		if l.Size, err = strconv.Atoi(strings.TrimSpace(ss)); err != nil {
			return l, fmt.Errorf("launcher variables: %s=%q is not a number", v.size, ss)
		}
		if l.Size < 1 || l.Rank < 0 || l.Rank >= l.Size {
			return l, fmt.Errorf("launcher variables: %s=%d is not a rank of %s=%d", v.rank, l.Rank, v.size, l.Size)
		}
		if s := getenv(v.local); s != "" {
			if n, err := strconv.Atoi(s); err == nil {
				l.LocalRank = n
			}
		}
		l.From = v.rank + "/" + v.size
		break
	}
	if l.Size == 1 {
		return l, nil
	}
	addr, from := getenv("CTRKIT_MASTER_ADDR"), "CTRKIT_MASTER_ADDR"
	if addr == "" {
		addr, from = getenv("MASTER_ADDR"), "MASTER_ADDR"
		if p := getenv("MASTER_PORT"); addr != "" && p != "" {
			addr = net.JoinHostPort(addr, p)
		}
	}
	if addr == "" {
		return l, fmt.Errorf("%s says %d processes, but no master address: set CTRKIT_MASTER_ADDR=HOST[:PORT] to the host of process 0 (the port defaults to %d)", l.From, l.Size, DefaultPort)
	}
	if _, _, err := net.SplitHostPort(addr); err != nil {
		addr = net.JoinHostPort(strings.Trim(addr, "[]"), strconv.Itoa(DefaultPort))
	}
	if _, p, _ := net.SplitHostPort(addr); p == "" {
		return l, fmt.Errorf("%s=%q has no port", from, addr)
	}
	l.MasterAddr = addr
	l.From += ", " + from
	return l, nil
}
