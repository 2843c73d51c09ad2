# Push the desired-state repository's main branch to the remote Flux or Argo CD watches, every
# GPUFLEET_PUSH_INTERVAL seconds. The worker is the only writer; this loop only reads, and a failed
# push (remote down, not a fast-forward) is logged and retried on the next round, never forced.
set -u
repo="$GPUFLEET_GITOPS_REPO"
while :; do
  if git -C "$repo" rev-parse --verify --quiet refs/heads/main >/dev/null 2>&1; then
    if git -C "$repo" push --quiet --porcelain "$GPUFLEET_PUSH_URL" "refs/heads/main:refs/heads/$GPUFLEET_PUSH_BRANCH" >/dev/null; then
      :
    else
      echo "gitops-push: push to $GPUFLEET_PUSH_URL failed; retrying in ${GPUFLEET_PUSH_INTERVAL}s" >&2
    fi
  fi
  sleep "$GPUFLEET_PUSH_INTERVAL"
done
