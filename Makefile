# ctrkit developer targets. `make` alone lists them.
GO      ?= go
PKG     ?= ./...
FUZZTIME ?= 5m
# The default minimization budget (60s per new input) leaves a short run
# minimizing instead of fuzzing; a few executions per new input keep it
# fuzzing (docs/PERFORMANCE.md: executions per target in 2 minutes).
FUZZMINTIME ?= 10x

.PHONY: help build test ci bench fuzz gpu kernels-check clean

help: ## list the targets
	@grep -E '^[a-z-]+:.*## ' $(MAKEFILE_LIST) | awk -F':.*## ' '{printf "  make %-8s %s\n", $$1, $$2}'

build: ## build the ctrkit binary into ./ctrkit (static, no cgo)
	CGO_ENABLED=0 $(GO) build -o ctrkit ./cmd/ctrkit

test: ## run the tests (the README's command)
	$(GO) test $(PKG)

ci: ## run what CI runs: gofmt, vet, tests, every benchmark once
	bash .ci/run

bench: ## run the benchmarks (PKG=./formats/raw to pick one package)
	$(GO) test -run '^$$' -bench . -benchmem $(PKG)

fuzz: ## fuzz every Fuzz* target in the repository for FUZZTIME each (default 5m)
	@set -e; for f in $$(grep -rl --include='*_test.go' '^func Fuzz' . | sort); do \
		for t in $$(sed -n 's/^func \(Fuzz[A-Za-z0-9_]*\)(.*/\1/p' $$f); do \
			echo "== $$t ($$(dirname $$f))"; \
			$(GO) test -run '^$$' -fuzz "^$$t\$$" -fuzztime $(FUZZTIME) -fuzzminimizetime $(FUZZMINTIME) $$(dirname $$f); \
		done; \
	done

gpu: ## build ctrkit, the GPU test binaries and gpu_check.sh into .gpu/ for the GPU machine
	mkdir -p .gpu
	CGO_ENABLED=0 $(GO) build -ldflags "-s -w" -o .gpu/ctrkit ./cmd/ctrkit
	CGO_ENABLED=0 $(GO) test -c -ldflags "-s -w" -o .gpu/gpu.test ./trainer/tensor/gpu
	CGO_ENABLED=0 $(GO) test -c -ldflags "-s -w" -o .gpu/model.test ./trainer/model
	CGO_ENABLED=0 $(GO) test -c -ldflags "-s -w" -o .gpu/cuda.test ./trainer/cuda
	CGO_ENABLED=0 $(GO) test -c -ldflags "-s -w" -o .gpu/collective.test ./trainer/collective
	gzip -f .gpu/ctrkit .gpu/gpu.test .gpu/model.test .gpu/cuda.test .gpu/collective.test  # the device tool carries 64 MiB
	cp scripts/gpu_check.sh bench/readers_16core.sh bench/convert_compare.sh bench/precision_auc.sh bench/pyarrow_files.sh bench/pyarrow_read.py .gpu/
	-cp ../shared/anchors/pytorch_dlrm.py ../shared/anchors/pytorch_dcnv2.py ../shared/anchors/dcnv2_mlperf_1gpu.json .gpu/
	-mkdir -p .gpu/hugectr-json && cp -r ../shared/data/hugectr-json/* .gpu/hugectr-json/
	rm -rf .gpu/python && cp -r python .gpu/python

kernels-check: ## syntax-check the CUDA kernels with the host C++ compiler (no CUDA needed)
	trainer/tensor/gpu/check_kernels.sh

clean: ## remove build outputs
	rm -rf ctrkit .gpu
