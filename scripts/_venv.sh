# Sourced by the other scripts: make ./.venv with chute (and extras) installed.
# Usage: ensure_venv [pip extras spec, e.g. ".[dev]"]
set -euo pipefail
ROOT="$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)"
VENV="$ROOT/.venv"

ensure_venv() {
    local spec="${1:-.}"
    local python="${PYTHON:-python3}"
    if [ ! -x "$VENV/bin/python" ]; then
        if ! "$python" -m venv "$VENV" 2>/dev/null; then
            # Debian's python3 needs the venv module from its own package.
            if command -v apt-get >/dev/null; then
                apt-get update -qq && DEBIAN_FRONTEND=noninteractive apt-get install -y -qq python3-venv >/dev/null
            fi
            rm -rf "$VENV"
            "$python" -m venv "$VENV"
        fi
    fi
    "$VENV/bin/python" -m pip install -q --upgrade pip >/dev/null
    # PYTHONWARNINGS: setuptools warns on every editable install ("Editable installation... be careful with
    # folders ... with the same name as your package"), a banner of 10 lines that is no problem here.
    (cd "$ROOT" && PYTHONWARNINGS=ignore "$VENV/bin/python" -m pip install -q -e "$spec")
}
