#!/bin/sh
# Syntax- and type-check the CUDA kernels with the host C++ compiler (no
# CUDA needed): each .cu file is compiled after shim.h and common.cuh.
# NVRTC on the GPU machine is the real compiler; this catches typos early.
cd "$(dirname "$0")/kernels" || exit 2
CXX=${CXX:-g++}
status=0
for f in ${@:-*.cu}; do
	f=$(basename "$f")
	if ! { cat common.cuh; printf '\n#line 1 "%s"\n' "$f"; cat "$f"; } |
		$CXX -std=c++17 -fsyntax-only -Wall -Wno-unused-function -Wno-unknown-pragmas -include hostcheck/shim.h -x c++ - ; then
		status=1
	fi
done
exit $status
