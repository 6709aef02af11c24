# Sourced by scripts/_ensure_env.sh and scripts/setup-and-chat: how llama-cpp-python is built and
# checked on this machine.
#
# llama.cpp built from source optimizes for the CPU it is built on (GGML_NATIVE). On an x86_64 CPU
# with Intel AMX (Xeon Sapphire Rapids and later) that build runs its AMX matrix kernels, which
# crash (SIGSEGV in ggml_backend_amx_mul_mat) on every prompt of more than one token with
# llama-cpp-python 0.3.36. There, and only there, the build keeps every other native instruction
# set and leaves AMX out (-mno-amx-*). Other machines (ARM Macs, other CPUs) build as before.

# The compiler flags this machine's llama.cpp build needs; empty on most machines.
tether_llama_cflags() {
    [ "$(uname -s)" = Linux ] && [ "$(uname -m)" = x86_64 ] || return 0
    grep -qE '^flags[[:space:]]*:.*[[:space:]]amx_(int8|tile)([[:space:]]|$)' /proc/cpuinfo 2>/dev/null || return 0
    local flags="-mno-amx-tile -mno-amx-int8 -mno-amx-bf16"
    # a compiler too old to know AMX cannot emit it either: it needs (and takes) no flag
    # shellcheck disable=SC2086
    if echo 'int main(void) { return 0; }' | "${CC:-cc}" $flags -x c - -o /dev/null 2>/dev/null; then
        echo "$flags"
    fi
}

# Run a command (a pip install) with this machine's llama.cpp build flags added to CFLAGS/CXXFLAGS.
tether_llama_build() {
    local extra
    extra="$(tether_llama_cflags)"
    if [ -n "$extra" ]; then
        CFLAGS="${CFLAGS:+$CFLAGS }$extra" CXXFLAGS="${CXXFLAGS:+$CXXFLAGS }$extra" "$@"
    else
        "$@"
    fi
}

# True when PYTHON imports llama_cpp and that build does not run the crashing AMX kernels.
tether_llama_ok() {
    "$1" -c 'import sys, llama_cpp
sys.exit(b"AMX_INT8 = 1" in llama_cpp.llama_print_system_info())' 2>/dev/null
}

# pip install ARGS (verbose) with this machine's build flags, through scripts/_build_log.py: one
# short line per build step ("[24/193] ggml-cpu/binary-ops.cpp") instead of the compiler's command
# lines, and from the first error on everything (the compiler's message in full). LOG receives
# the whole unfiltered output. Returns pip's exit status.
#   tether_llama_pip PYTHON LOG ARGS...
tether_llama_pip() {
    local python=$1 log=$2 status errexit=
    shift 2
    case $- in *e*) errexit=1 ;; esac
    set +e  # pip's status, not the filter's, and the message below before the caller stops
    tether_llama_build "$python" -m pip install -v "$@" 2>&1 |
        "$python" "$(dirname "${BASH_SOURCE[0]}")/_build_log.py" --log "$log"
    status=${PIPESTATUS[0]}
    [ -n "$errexit" ] && set -e
    if [ "$status" -ne 0 ]; then
        echo "error: pip install failed (exit $status); its whole output is in $log" >&2
    fi
    return "$status"
}
