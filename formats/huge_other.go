//go:build !linux

package formats

func adviseHuge([]byte) {}
