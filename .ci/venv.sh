# Sourced by the README's commands: make .venv (Python 3.11) with p4sub and its test tools installed.
# Re-running is cheap: pip is only called when pyproject.toml changed since the last install.
set -euo pipefail
root="$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)"
cd "$root"
py="${PYTHON:-python3.11}"
command -v "$py" >/dev/null 2>&1 || py=python3
"$py" -c 'import sys; assert sys.version_info >= (3, 11), "p4sub needs Python 3.11 or newer"'
[ -x .venv/bin/python ] || "$py" -m venv .venv
stamp=.venv/.p4sub-installed
if [ ! -f "$stamp" ] || [ pyproject.toml -nt "$stamp" ]; then
  .venv/bin/python -m pip install -q --upgrade pip
  .venv/bin/python -m pip install -q -e '.[test]'
  touch "$stamp"
fi
export PATH="$root/.venv/bin:$PATH"
