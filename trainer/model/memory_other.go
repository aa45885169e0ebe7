//go:build !linux

package model

// memoryLimit is unknown off Linux: no check.
func memoryLimit() (int64, string) { return 0, "" }
