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
# With no arguments, also run the warp interaction kernels (the fp32 ones,
# the TF32 tensor-core ones and the native half mma ones, mma.sync
# emulated; float, float16 and bfloat16 storage) on the host (hostcheck/interaction_sim.cpp; needs C++20 <barrier>).
if [ $# -eq 0 ]; then
	tmp=$(mktemp -d) || exit 2
	awk '/^static __device__ __forceinline__ void nn_tri/{p=1} p{print} p&&/^}/{exit}' nn.cu >"$tmp/tri.inc"
	awk '/^\/\/ ---- Interaction storage ----/{p=1} p{print} /^\/\/ ---- end of interaction storage ----/{exit}' nn.cu >"$tmp/st.inc"
	awk '/^\/\/ interaction_fwd4 \/ interaction_bwd4/{p=1} /^\/\/ interaction_fwd_g \/ interaction_bwd_g:/{p=0} p' nn.cu >"$tmp/k4.inc"
	awk '/^\/\/ interaction_fwd_tc \/ interaction_bwd_tc:/{p=1} /^\/\/ ---- Interaction on tensor cores \(native half mma\) ----/{p=0} p' nn.cu >"$tmp/tc.inc"
	awk '/^\/\/ interaction_fwd_hmma \/ interaction_bwd_hmma/{p=1} /^\/\/ ---- FmOrder2 ----/{p=0} p' nn.cu >"$tmp/hm.inc"
	if ! $CXX -std=c++20 -O1 -pthread -Wall -Wno-unknown-pragmas -I"$tmp" hostcheck/interaction_sim.cpp -o "$tmp/sim" ||
		! "$tmp/sim" >"$tmp/log"; then
		cat "$tmp/log" 2>/dev/null
		echo "hostcheck/interaction_sim.cpp failed" >&2
		status=1
	fi
	# The embedding kernels and the float4 sparse update on the host
	# (hostcheck/embed_sim.cpp, embed.cu and optim.cu included whole).
	if ! $CXX -std=c++20 -O1 -pthread -Wall -Wno-unknown-pragmas -Wno-unused-function hostcheck/embed_sim.cpp \
		-Wl,--unresolved-symbols=ignore-all -o "$tmp/esim" ||
		! "$tmp/esim" >"$tmp/elog"; then
		cat "$tmp/elog" 2>/dev/null
		echo "hostcheck/embed_sim.cpp failed" >&2
		status=1
	fi
	# embed.cu, optim.cu, guard.cu and dense.cu (then nn.cu, multicross.cu) through clang's NVPTX back end (when installed):
	# every kernel must stay out of local memory. A compile failure is only
	# a warning (hostcheck/nvptx_shim.h may lack a built-in NVRTC has).
	CLANG=${CLANG:-$(command -v clang-14 || command -v clang || true)}
	if [ -n "$CLANG" ]; then
		for f in embed optim guard dense; do
			{ cat common.cuh; printf '\n#line 1 "%s.cu"\n' "$f"; cat "$f.cu"; } >"$tmp/$f.cu"
			if ! "$CLANG" -x cuda --cuda-device-only --cuda-gpu-arch=sm_80 -nocudainc -nocudalib -Xclang -target-feature \
				-Xclang +ptx70 -O3 -std=c++17 -Wno-pass-failed -include hostcheck/nvptx_shim.h -S "$tmp/$f.cu" -o "$tmp/$f.ptx"; then
				echo "warning: $f.cu: clang NVPTX compile failed (local-memory check skipped)" >&2
			elif local=$(awk '/^\.visible \.entry/{n=$3} /__local_depot/{print n}' "$tmp/$f.ptx") && [ -n "$local" ]; then
				echo "$f.cu: kernels in local memory: $local" >&2
				status=1
			fi
		done
		# nn.cu and multicross.cu the same (hostcheck/nvptx_nn.h: their built-ins;
		# clang cannot apply mc_bwd's "#pragma unroll 2" to the half kernels'
		# row loop, a warning only, silenced: NVRTC is the compiler that counts).
		for f in nn multicross; do
			{ cat common.cuh; printf '\n#line 1 "%s.cu"\n' "$f"; cat "$f.cu"; } >"$tmp/$f.cu"
			if ! "$CLANG" -x cuda --cuda-device-only --cuda-gpu-arch=sm_80 -nocudainc -nocudalib -Xclang -target-feature \
				-Xclang +ptx70 -O3 -std=c++17 -Wno-pass-failed -include hostcheck/nvptx_shim.h \
				-include hostcheck/nvptx_nn.h -S "$tmp/$f.cu" -o "$tmp/$f.ptx"; then
				echo "warning: $f.cu: clang NVPTX compile failed (local-memory check skipped)" >&2
			elif local=$(awk '/^\.visible \.entry/{n=$3} /__local_depot/{print n}' "$tmp/$f.ptx") && [ -n "$local" ]; then
				echo "$f.cu: kernels in local memory: $local" >&2
				status=1
			fi
		done
	fi
	# The overflow guard's finite check on the host (hostcheck/guard_sim.cpp,
	# guard.cu included whole).
	if ! $CXX -std=c++20 -O1 -Wall -Wno-unknown-pragmas -Wno-unused-function hostcheck/guard_sim.cpp -o "$tmp/gsim" ||
		! "$tmp/gsim" >"$tmp/glog"; then
		cat "$tmp/glog" 2>/dev/null
		echo "hostcheck/guard_sim.cpp failed" >&2
		status=1
	fi
	rm -rf "$tmp"
	# The half-precision dense kernels against the float32 ones, bit for bit
	# (hostcheck/dense_sim.cpp: dense.cu whole, nn.cu's BCE section).
	tmp=$(mktemp -d) || exit 2
	awk '/^\/\/ bce_partial: fused sigmoid BCE/{p=1} /^\/\/ softmax_ce_rows:/{p=0} p' nn.cu >"$tmp/bce.inc"
	if ! $CXX -std=c++20 -O1 -pthread -Wall -Wno-unknown-pragmas -Wno-unused-function -I"$tmp" hostcheck/dense_sim.cpp \
		-Wl,--unresolved-symbols=ignore-all -o "$tmp/dsim" || ! "$tmp/dsim" >"$tmp/dlog"; then
		cat "$tmp/dlog" 2>/dev/null
		echo "hostcheck/dense_sim.cpp failed" >&2
		status=1
	fi
	rm -rf "$tmp"
	# The cross-layer kernels on the host (hostcheck/multicross_sim.cpp).
	tmp=$(mktemp -d) || exit 2
	sed 's/extern "C" //' multicross.cu >"$tmp/mc.inc"
	if ! $CXX -std=c++20 -O1 -pthread -Wall -Wno-unknown-pragmas -I"$tmp" hostcheck/multicross_sim.cpp -o "$tmp/sim" ||
		! "$tmp/sim" >"$tmp/log"; then
		cat "$tmp/log" 2>/dev/null
		echo "hostcheck/multicross_sim.cpp failed" >&2
		status=1
	fi
	rm -rf "$tmp"
fi
exit $status
