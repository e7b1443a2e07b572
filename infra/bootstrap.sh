#!/usr/bin/env bash
# Installs what Hydrazine needs and is missing, so that `npm start` and `npm test` work on
# a fresh Debian machine right after cloning:
#   - Debian packages listed in infra/debian-packages.txt, and with `--test` (npm test)
#     those in infra/debian-packages-test.txt too (apt-get, when run as root; otherwise
#     the missing ones are listed and we stop);
#   - mmdebstrap when HYDRAZINE_OVN_INSTALL=debian-13 (it makes the centrals' OVN root);
#   - npm dependencies (npm ci) when node_modules is absent or older than the lockfile.
set -euo pipefail
cd "$(dirname "$0")/.."

# The range of "engines" in package.json: c8 and yargs need 20.19 or 22.12, jsep 20.16.
read -r major minor < <(node -p 'process.versions.node.split(".").slice(0, 2).join(" ")')
if ! { [ "$major" -eq 20 ] && [ "$minor" -ge 19 ]; } &&
  ! { [ "$major" -eq 22 ] && [ "$minor" -ge 12 ]; } && [ "$major" -lt 24 ]; then
  echo "hydrazine: Node.js ^20.19, ^22.12 or >= 24 is required (found $(node --version))" >&2
  exit 1
fi

lists=(infra/debian-packages.txt)
for arg in "$@"; do
  case "$arg" in
    --test) lists+=(infra/debian-packages-test.txt) ;;
    *) echo "hydrazine: bootstrap.sh: unknown argument $arg (only --test)" >&2; exit 2 ;;
  esac
done

wanted() {
  cat "${lists[@]}"
  if [ "${HYDRAZINE_OVN_INSTALL:-}" = debian-13 ]; then echo mmdebstrap; fi
}

missing=()
while read -r pkg; do
  case "$pkg" in ''|'#'*) continue ;; esac
  if ! dpkg-query -W -f='${Status}' "$pkg" 2>/dev/null | grep -q 'install ok installed'; then
    case " ${missing[*]} " in *" $pkg "*) ;; *) missing+=("$pkg") ;; esac
  fi
done < <(wanted)

if [ ${#missing[@]} -gt 0 ]; then
  if [ "$(id -u)" -eq 0 ] && command -v apt-get >/dev/null; then
    echo "hydrazine: installing Debian packages: ${missing[*]}" >&2
    export DEBIAN_FRONTEND=noninteractive
    apt-get update -qq
    apt-get install -y -qq --no-install-recommends "${missing[@]}" >/dev/null
  else
    echo "hydrazine: missing Debian packages; as root run:" >&2
    echo "  apt-get install --no-install-recommends ${missing[*]}" >&2
    exit 1
  fi
fi

if [ ! -f node_modules/.package-lock.json ] || [ package-lock.json -nt node_modules/.package-lock.json ]; then
  echo "hydrazine: installing npm dependencies" >&2
  # `npm install` honours package-lock.json; `npm ci` trips over optional platform
  # packages (Biome's) that npm 11 leaves out of the lock file.
  npm install --no-audit --no-fund --loglevel=error
fi
