package dirtytrack

// The eBPF object and its Go bindings (dirtytrack_bpfel.go, dirtytrack_bpfel.o)
// are committed, so `go build` needs no clang. To rebuild them after changing
// bpf/dirtytrack.c or bpf/vmlinux.h (needs clang and libbpf-dev, see
// scripts/install-deps):
//
//	go generate ./cgroupfs/dirtytrack
//
//go:generate go run github.com/cilium/ebpf/cmd/bpf2go -cc clang -cflags "-O2 -g -Wall -Werror -mcpu=v3" -target bpfel dirtytrack bpf/dirtytrack.c -- -I./bpf
