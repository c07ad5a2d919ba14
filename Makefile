# The two commands a newcomer runs: `make demo` and `make test`. Each installs the Debian packages it
# needs when they are missing (see .ci/ensure-packages). CI (.ci/run) runs `make test`, then
# `make container-test`.

SWIFT ?= swift
BUILD_PACKAGES := libssl-dev libnghttp2-dev libsqlite3-dev libyaml-dev pkg-config
TEST_PACKAGES  := curl openssl nghttp2-client redis-server sqlite3 python3-venv python3-websockets chromium prometheus nodejs python3-h2
BENCH_PACKAGES := wrk nginx-light haproxy nghttp2-client valgrind redis-server openssl

.PHONY: demo test conformance examples fuzz-smoke container-test build release bench deps-build deps-test deps-bench clean

deps-build:
	@.ci/ensure-packages $(BUILD_PACKAGES)

deps-test: deps-build
	@.ci/ensure-packages $(TEST_PACKAGES)

deps-bench: deps-build
	@.ci/ensure-packages $(BENCH_PACKAGES)

build: deps-build
	$(SWIFT) build

release: deps-build
	$(SWIFT) build -c release --product appcheck-gateway
	$(SWIFT) build -c release --product appcheck-gateway-bench

demo: build
	.build/debug/appcheck-gateway demo

test: deps-test
	$(SWIFT) build --build-tests
	$(SWIFT) test --skip-build
	$(MAKE) --no-print-directory conformance
	$(MAKE) --no-print-directory examples
	$(MAKE) --no-print-directory fuzz-smoke
	@echo "make test: PASS (swift test, conformance, examples, fuzz smoke)"

# Every token of a 370+-token corpus through firebase-admin's app_check.verify_token (from PyPI, in a
# throwaway virtualenv) and our `verify`; ends with `N passed, M failed`. See Tests/conformance/README.md.
conformance: build
	@.ci/ensure-packages python3-venv
	Tests/conformance/run.sh

# The custom-token examples of docs/issuer.md (Python with PyJWT from PyPI, Node without packages) minting tokens
# that a running gateway exchanges once (Tests/examples/custom-token.sh); then a gateway with no Google service
# (app_check.jwks.url: none) whose minted token PyJWT verifies through OIDC discovery alone, ending with
# `oidc-discovery: PASS` or `FAIL` (Tests/examples/oidc-discovery.sh); then the Python DPoP client of docs/dpop.md
# (PyJWT and cryptography) against a gateway with an issuer, every §4.4 rule refused on its own (Tests/examples/dpop.sh).
examples: build
	@.ci/ensure-packages python3-venv nodejs
	Tests/examples/custom-token.sh
	Tests/examples/oidc-discovery.sh
	Tests/examples/dpop.sh

# Every libFuzzer target in Fuzz/ for FUZZ_SECONDS (default 15) each; fails on any crash, leak or timeout.
# Long runs by hand: Fuzz/run.sh TARGET [SECONDS]. See Fuzz/README.md.
fuzz-smoke: deps-build
	Fuzz/smoke.sh

# Builds the image from the Dockerfile, runs it (non-root, probes, HEALTHCHECK, a verified and a refused
# request, SIGTERM), brings Config/compose.yaml up (two replicas, one Redis), and plays deploy/kubernetes/ with
# `podman kube play` (the same single-use check). Docker or Podman; see the script's header for machines without
# a registry.
container-test:
	.ci/container-test

bench: deps-bench release
	Benchmarks/run.sh

clean:
	rm -rf .build
