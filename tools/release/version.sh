#!/bin/sh
# Prints Tandem's version, the one every artefact carries (the binaries'
# --version, the image tag, the chart's version and appVersion, the
# packages). The number is written once, in the file VERSION at the top of
# the repository. A commit tagged v<VERSION>, built from a clean tree, is
# that release: it prints VERSION as it is. Any other build is one on the
# way to it and says so, as SemVer allows: <VERSION>-dev+<12-hex commit>,
# with .dirty after the commit when tracked files have changes (such a
# build is not reproducible). After releasing, raise VERSION.
set -eu
cd "$(dirname "$0")/../.."
v=$(cat VERSION)
case $v in
*[!0-9.]* | '' | .* | *. | *..*)
	echo "version.sh: VERSION holds '$v': want MAJOR.MINOR.PATCH" >&2
	exit 1
	;;
esac
commit=$(git rev-parse --short=12 HEAD 2>/dev/null) || {
	echo "$v-dev+unknown"
	exit 0
}
dirty=
if [ -n "$(git status --porcelain --untracked-files=no 2>/dev/null)" ]; then
	dirty=.dirty
fi
if [ -z "$dirty" ] && [ "$(git rev-parse -q --verify "refs/tags/v$v^{commit}" 2>/dev/null)" = "$(git rev-parse HEAD)" ]; then
	echo "$v"
else
	echo "$v-dev+$commit$dirty"
fi
