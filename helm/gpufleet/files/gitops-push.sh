# Publish the desired-state repository's main branch to the remote Flux or Argo CD watches, every
# GPUFLEET_PUSH_INTERVAL seconds. The worker is the only writer of main; this loop fetches, checks and
# pushes, and never forces; it never writes the repository (the chart mounts it read-only). Each round it
# records what happened in GPUFLEET_PUSH_STATUS_DIR (default .git/gpufleet; in the chart a volume shared
# with the worker, which reads it: infra/gitops/publish.py), so a stopped publish is a status, not only
# a line on stderr:
#   push-status  state=<ok|diverged|rejected|unreachable|waiting>, at=<epoch>, message=<text>
#   last-push    "<epoch> <commit>" of the last successful push
# Refuses to push when the remote branch is not an ancestor of local main (someone else wrote there,
# or the local history was recreated): pushing would need a force, which would drop those commits.
# SIGTERM/SIGINT: one final round (so a rollout publishes the last commits), then exit 0 at once.
set -u
repo="$GPUFLEET_GITOPS_REPO"
url="$GPUFLEET_PUSH_URL"
branch="${GPUFLEET_PUSH_BRANCH:-main}"
interval="${GPUFLEET_PUSH_INTERVAL:-30}"
state_dir="${GPUFLEET_PUSH_STATUS_DIR:-$repo/.git/gpufleet}"
stopping=0

record() {  # record <state> <message>
  mkdir -p "$state_dir" || return 0
  printf 'state=%s\nat=%s\nmessage=%s\n' "$1" "$(date +%s)" "$2" >"$state_dir/push-status.tmp" &&
    mv -f "$state_dir/push-status.tmp" "$state_dir/push-status"
  [ "$1" = ok ] || echo "gitops-push: $1: $2" >&2
}

push_round() {
  mkdir -p "$state_dir" 2>/dev/null
  if ! head=$(git -C "$repo" rev-parse --verify --quiet 'refs/heads/main^{commit}' 2>/dev/null); then
    record waiting "no commit on main yet"
    return 0
  fi
  if ! remote_heads=$(git -C "$repo" ls-remote --heads "$url" "refs/heads/$branch" 2>&1); then
    record unreachable "cannot read $url: $(echo "$remote_heads" | tail -n 1)"
    return 0
  fi
  remote_sha=$(echo "$remote_heads" | cut -f1)
  # The remote must be an ancestor of local main: a commit we do not even have means someone else wrote
  # there (or our history was recreated); pushing would need a force that drops their commits.
  if [ -n "$remote_sha" ]; then
    if ! git -C "$repo" cat-file -e "$remote_sha^{commit}" 2>/dev/null ||
      ! git -C "$repo" merge-base --is-ancestor "$remote_sha" "$head" 2>/dev/null; then
      record diverged "remote $branch ($remote_sha) is not an ancestor of local main ($head): not pushing; see docs/gitops.md"
      return 0
    fi
  fi
  if out=$(git -C "$repo" push --quiet --porcelain "$url" "$head:refs/heads/$branch" 2>&1); then
    printf '%s %s\n' "$(date +%s)" "$head" >"$state_dir/last-push.tmp" && mv -f "$state_dir/last-push.tmp" "$state_dir/last-push"
    record ok "pushed $head to $branch"
  else
    record rejected "push of $head to $branch refused: $(echo "$out" | grep -v '^To ' | tr '\n' ' ' | cut -c1-400)"
  fi
}

on_term() { stopping=1; }
trap on_term TERM INT

while :; do
  push_round
  [ "$stopping" = 1 ] && exit 0
  # Wait the interval in one-second steps and look at `stopping` after each: a TERM then ends the wait
  # within a second. (A background `sleep` and `wait` lost a TERM that landed between the check and
  # the `wait` in dash, which then waited out the whole interval: a rollout stuck for its grace period.)
  waited=0
  while [ "$waited" -lt "$interval" ] && [ "$stopping" = 0 ]; do
    sleep 1
    waited=$((waited + 1))
  done
  if [ "$stopping" = 1 ]; then
    push_round
    exit 0
  fi
done
