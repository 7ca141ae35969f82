#!/usr/bin/env bash
# ansible-test sanity on the collection, offline.
#
# ansible-test bootstraps pip in the venvs it builds by downloading get-pip.py
# from a host these machines cannot reach. It looks for a cached copy first
# (~/.ansible/test/cache/get_pip_<version>.py): we put there a small stand-in
# that installs the pip wheel downloaded from PyPI instead.
set -euo pipefail
ROOT="$(cd "$(dirname "$0")/../.." && pwd)"
VENV="${VENV:-$ROOT/.venv}"
# ansible-test wants the physical path to end in ansible_collections/<ns>/<name>:
# test a copy of the files git knows (tracked, or new and not ignored), outside
# this repository (inside it, ansible-test would ask git and see nothing).
WORK="$(mktemp -d "${TMPDIR:-/tmp}/llm_cluster-sanity.XXXXXX")"
trap 'rm -rf "$WORK"' EXIT
COLLECTION="$WORK/ansible_collections/aihost/llm_cluster"
CACHE="$HOME/.ansible/test/cache"
# The pip version ansible-test bootstraps (it is in the get-pip file name).
PIP_VERSION="$(sed -n "s/^ *pip='\([0-9.]*\)',$/\1/p" \
  "$("$VENV/bin/python" -c 'import ansible_test, os; print(os.path.dirname(ansible_test.__file__))')/_internal/python_requirements.py" | head -1)"
[ -n "$PIP_VERSION" ] || { echo "cannot tell which pip ansible-test wants" >&2; exit 2; }
STANDIN="$CACHE/get_pip_${PIP_VERSION//./_}.py"

mkdir -p "$CACHE"
if ! ls "$CACHE"/pip-"$PIP_VERSION"-*.whl >/dev/null 2>&1; then
  "$VENV/bin/pip" download --quiet --no-deps -d "$CACHE" "pip==$PIP_VERSION"
fi
cat > "$STANDIN.new" <<PY
# Stand-in for get-pip.py: installs the pip wheel cached next to this file.
import glob, os, sys
wheel = glob.glob(os.path.join(os.path.dirname(os.path.abspath(__file__)), "pip-$PIP_VERSION-*.whl"))[0]
sys.path.insert(0, wheel)
from pip._internal.cli.main import main
args = [a for a in sys.argv[1:] if not a.startswith("pip==") and a not in ("--no-setuptools", "--no-wheel")]
sys.exit(main(["install", "--upgrade", wheel] + args))
PY
mv "$STANDIN.new" "$STANDIN"

mkdir -p "$COLLECTION"
(cd "$ROOT" && git ls-files -z --cached --others --exclude-standard | xargs -0 -r ls -d 2>/dev/null | tar -T - -cf -) | tar -C "$COLLECTION" -xf -
cd "$COLLECTION"
"$VENV/bin/ansible-test" sanity --python 3.11 --color no "$@"
