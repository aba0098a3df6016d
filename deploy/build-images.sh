#!/usr/bin/env bash
# Builds the nodepulse container images from static binaries, like goreleaser:
# no base image is pulled (everything is FROM scratch), so it works with no
# container registry at all.
#
#   deploy/build-images.sh [VERSION] [IMAGE...]
#
#   VERSION   image tag and the version linked into the binaries (default: dev)
#   IMAGE     a subset of: etcd collector monitor reporter (default: all)
#
# Output: bin/linux-<arch>/{etcd,collector,monitor,reporter,healthprobe} and the
# images nodepulse/<image>:VERSION.
#
# Environment: GOARCH (default: the host's), IMAGE_REPO (default: nodepulse),
# DOCKER (default: docker).
set -euo pipefail

root=$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)
version=${1:-dev}
shift || true
images=("$@")
if [ ${#images[@]} -eq 0 ]; then
	images=(etcd collector monitor reporter)
fi
repo=${IMAGE_REPO:-nodepulse}
docker=${DOCKER:-docker}
arch=${GOARCH:-$(go env GOARCH)}
out="$root/bin/linux-$arch"

# Go package of every binary, relative to the repository root.
pkg_of() {
	case "$1" in
	etcd) echo ./deploy/etcd ;;
	collector) echo ./collector/cmd/collector ;;
	monitor) echo ./monitor/cmd/monitor ;;
	reporter) echo ./reporter/cmd/reporter ;;
	healthprobe) echo ./deploy/healthprobe ;;
	*) echo "build-images: unknown image $1 (want etcd, collector, monitor or reporter)" >&2; return 1 ;;
	esac
}

for b in "${images[@]}"; do
	case "$b" in
	etcd | collector | monitor | reporter) ;;
	*) echo "build-images: unknown image $b (want etcd, collector, monitor or reporter)" >&2; exit 2 ;;
	esac
done

mkdir -p "$out"
cd "$root"
ldflags="-s -w -X github.com/nodepulse/nodepulse/services/version.Version=$version"
for b in healthprobe "${images[@]}"; do
	pkg=$(pkg_of "$b")
	echo "build-images: go build $pkg -> bin/linux-$arch/$b" >&2
	CGO_ENABLED=0 GOOS=linux GOARCH="$arch" go build -trimpath -ldflags "$ldflags" -o "$out/$b" "$pkg"
done

# A private staging directory: several builds (e.g. concurrent e2e runs) may
# run at once.
mkdir -p "$root/.tmp"
stage=$(mktemp -d "$root/.tmp/image-context.XXXXXX")
trap 'rm -rf "$stage"' EXIT
for b in "${images[@]}"; do
	ctx="$stage/$b"
	mkdir -p "$ctx/bin" "$ctx/entrypoint" "$ctx/data"
	# Hard links, not copies: the context is sent to the daemon anyway.
	ln -f "$out/$b" "$ctx/bin/$b" 2>/dev/null || cp "$out/$b" "$ctx/bin/$b"
	ln -f "$out/healthprobe" "$ctx/bin/healthprobe" 2>/dev/null || cp "$out/healthprobe" "$ctx/bin/healthprobe"
	ln -s "/usr/local/bin/$b" "$ctx/entrypoint/entrypoint"
	echo "build-images: docker build $repo/$b:$version" >&2
	"$docker" build --quiet --file "$root/deploy/Dockerfile" \
		--build-arg "BINARY=$b" --build-arg "VERSION=$version" \
		--tag "$repo/$b:$version" "$ctx" >/dev/null
done
"$docker" image ls --filter "reference=$repo/*:$version" --format '{{.Repository}}:{{.Tag}}\t{{.Size}}' >&2
