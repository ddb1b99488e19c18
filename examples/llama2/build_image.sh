#!/usr/bin/env bash
# The recipe's build-and-push step, for container mode (RUNTIME=container in
# config.txt). In this folder, after `lote setup`, with the server's
# environment (eval "$(lote env)": the registry's address and the aws CLI's
# endpoint):
#   1. the base image (localhost/lote-base:latest), made here from no registry
#      (./make_base_image.sh: busybox + this lote); --rebuild-base
#      makes it again (after rebuilding lote);
#   2. podman build of ./Containerfile FROM it, tagged localhost/<ECR_REPO>:latest;
#   3. aws ecr create-repository (an existing one is kept), aws ecr
#      get-login-password | podman login --username AWS --password-stdin
#      $LOTE_REGISTRY, podman push to $LOTE_REGISTRY/<ECR_REPO>:latest.
# The job definition names the image by its ECR URI (IMAGE_URI in config.txt),
# which lote resolves to its registry when a node starts (docs/containers.md).
#
# usage: ./build_image.sh [--rebuild-base]
#   LOTE=PATH               the lote put into the base image (default IMAGE_LOTE of config.txt)
#   LOTE_BASE_IMAGE=NAME    the base image (default localhost/lote-base:latest)
set -euo pipefail
here="$(cd "$(dirname "$0")" && pwd)"
rebuild_base=false
case "${1:-}" in
  --rebuild-base) rebuild_base=true ;;
  "") ;;
  *) echo "usage: ./build_image.sh [--rebuild-base]" >&2; exit 2 ;;
esac
if [ ! -f "$here/build/config.env" ]; then
  echo "build_image: no build/config.env here: run \`lote setup\` first" >&2
  exit 1
fi
# shellcheck source=/dev/null
source "$here/build/config.env"
if [ -z "${LOTE_REGISTRY:-}" ]; then
  echo 'build_image: LOTE_REGISTRY is not set: run eval "$(lote env)" (a lote server with its registry) first' >&2
  exit 1
fi
lote="${LOTE:-${IMAGE_LOTE:-$(command -v lote || true)}}"
base="${LOTE_BASE_IMAGE:-localhost/lote-base:latest}"
local_image="localhost/${ECR_REPO}:latest"
pushed="${LOTE_REGISTRY}/${ECR_REPO}:latest"

step() { echo "build_image: $*"; }
if $rebuild_base || ! podman image exists "$base"; then
  step "base image $base from $lote"
  "$here/make_base_image.sh" --lote "$lote" "$base" >/dev/null
fi
step "podman build -t $local_image ($here/Containerfile)"
podman build -q --build-arg "BASE=$base" -t "$local_image" -f "$here/Containerfile" "$here" >/dev/null
if aws ecr describe-repositories --repository-names "$ECR_REPO" --region "$REGION" >/dev/null 2>&1; then
  step "ECR repository $ECR_REPO exists"
else
  step "aws ecr create-repository --repository-name $ECR_REPO"
  aws ecr create-repository --repository-name "$ECR_REPO" --region "$REGION" >/dev/null
fi
step "aws ecr get-login-password | podman login --username AWS --password-stdin $LOTE_REGISTRY"
aws ecr get-login-password --region "$REGION" |
  podman login --username AWS --password-stdin "$LOTE_REGISTRY" >/dev/null
step "podman push $pushed"
podman tag "$local_image" "$pushed"
podman push -q "$pushed"
step "done: the job definition's image ${IMAGE_URI} is $pushed; next: lote resources create && lote submit"
