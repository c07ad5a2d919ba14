# Shared by Fuzz/run.sh and Fuzz/smoke.sh (sourced).
# The Swift runtime's backtracer would spend minutes symbolicating a crash before libFuzzer can save the input.
export SWIFT_BACKTRACE=enable=no
# Leaks are findings; a crash report is symbolized (llvm-symbolizer ships with Swift). Allocation stacks are not
# recorded (malloc_context_size=0: the config target runs 8% faster): replay a finding with `Fuzz/out/TARGET FILE`,
# without these options, for a report that says where the memory was allocated and freed.
export ASAN_OPTIONS=${ASAN_OPTIONS:-detect_leaks=1:allocator_may_return_null=1:malloc_context_size=0}
# One input taking over 10 s is a finding (a hang); 2 GiB of memory is one too.
FUZZ_FLAGS=(-timeout=10 -rss_limit_mb=2048 -malloc_limit_mb=2048 -reload=0)

# Largest input per target: a little over each parser's own bound, so the limit paths are reached.
max_len() {
  case $1 in
    http-request-head|http-response-head) echo 17000 ;;  # 16 KiB head limit
    token) echo 4200 ;;                                    # 4 KiB token limit
    *) echo 8192 ;;
  esac
}

# A libFuzzer dictionary when the target has one (Fuzz/dict/TARGET.dict).
dict_flag() {
  [ -f "Fuzz/dict/$1.dict" ] && echo "-dict=Fuzz/dict/$1.dict" || true
}

# Seconds per target in `make fuzz-smoke` (FUZZ_SECONDS, when set, applies to every target): 15, and 10 for the
# targets added with issue 25, so that the smoke run grows by well under a minute.
smoke_seconds() {
  if [ -n "${FUZZ_SECONDS:-}" ]; then echo "$FUZZ_SECONDS"; return; fi
  case $1 in
    resp|h2-session|issuer-json|custom-token|android-keydescription|dpop-proof|h2-client-session) echo 10 ;;
    *) echo 15 ;;
  esac
}
