#!/bin/sh
# twinps-entrypoint: runs the twinps command for this pod's role.
#
# Under the Kubeflow training operator (TFJob) TF_CONFIG is already set and
# the role comes from its task type. Without the operator (one StatefulSet
# per role behind a headless Service, deploy/kubernetes/statefulset/) this
# script writes TF_CONFIG from the pod's ordinal, in the operator's format:
#
#   TWINPS_ROLE            chief | ps | worker | evaluator
#   TWINPS_NAME            the StatefulSets' prefix: pods are $TWINPS_NAME-$role-$ordinal (default twinps)
#   TWINPS_SERVICE         the headless Service (default $TWINPS_NAME)
#   TWINPS_NAMESPACE       the pod's namespace (downward API)
#   TWINPS_PS_REPLICAS, TWINPS_WORKER_REPLICAS   task counts
#   TWINPS_PORT            every task's gRPC port (default 2222)
#   TWINPS_CLUSTER_DOMAIN  appended to "<ns>.svc" when set (e.g. cluster.local)
#   HOSTNAME               set by Kubernetes: $TWINPS_NAME-$role-$ordinal (the chief, a Job, is index 0)
#
# Arguments are passed on to the command (train / serve / eval).
# TWINPS_ENTRYPOINT_PRINT=1 prints TF_CONFIG and the command instead of
# running it (for checks and debugging).
set -eu

fail() { echo "twinps-entrypoint: $*" >&2; exit 2; }

if [ -z "${TF_CONFIG:-}" ]; then
  role="${TWINPS_ROLE:?set TWINPS_ROLE (chief, ps, worker or evaluator) or TF_CONFIG}"
  name="${TWINPS_NAME:-twinps}"
  service="${TWINPS_SERVICE:-$name}"
  namespace="${TWINPS_NAMESPACE:?set TWINPS_NAMESPACE (downward API: metadata.namespace)}"
  ps="${TWINPS_PS_REPLICAS:?set TWINPS_PS_REPLICAS}"
  workers="${TWINPS_WORKER_REPLICAS:?set TWINPS_WORKER_REPLICAS}"
  port="${TWINPS_PORT:-2222}"
  domain="$namespace.svc${TWINPS_CLUSTER_DOMAIN:+.$TWINPS_CLUSTER_DOMAIN}"
  host="${HOSTNAME:?HOSTNAME is not set}"
  if [ "$role" = chief ]; then
    ordinal=0  # one chief, run as a Job: its pod name has no ordinal (and nobody dials it)
  else
    ordinal="${host##*-}"
    case "$ordinal" in ''|*[!0-9]*) fail "HOSTNAME '$host' does not end in a StatefulSet ordinal" ;; esac
  fi
  case "$role" in chief|ps|worker|evaluator) ;; *) fail "TWINPS_ROLE must be chief, ps, worker or evaluator, not '$role'" ;; esac
  case "$ps$workers" in *[!0-9]*) fail "TWINPS_PS_REPLICAS and TWINPS_WORKER_REPLICAS must be numbers" ;; esac

  # "job": ["<name>-<job>-0.<service>.<domain>:<port>", ...]
  addresses() {
    job="$1"; n="$2"; i=0; sep=""
    printf '"%s": [' "$job"
    while [ "$i" -lt "$n" ]; do
      printf '%s"%s-%s-%d.%s.%s:%s"' "$sep" "$name" "$job" "$i" "$service" "$domain" "$port"
      sep=", "; i=$((i + 1))
    done
    printf ']'
  }
  # As the training operator writes it: the evaluator is not part of the cluster.
  cluster="{$(addresses chief 1), $(addresses worker "$workers"), $(addresses ps "$ps")}"
  TF_CONFIG="{\"cluster\": $cluster, \"task\": {\"type\": \"$role\", \"index\": $ordinal}, \"environment\": \"cloud\"}"
  export TF_CONFIG
else
  role="$(printf '%s' "$TF_CONFIG" | sed -n 's/.*"type"[[:space:]]*:[[:space:]]*"\([a-z]*\)".*/\1/p')"
  [ -n "$role" ] || fail "TF_CONFIG has no task type"
fi

case "$role" in
  chief) command=train ;;
  ps|worker) command=serve ;;
  evaluator) command=eval ;;
  *) fail "no twinps command for task type '$role'" ;;
esac

if [ "${TWINPS_ENTRYPOINT_PRINT:-0}" = 1 ]; then
  printf 'TF_CONFIG=%s\n' "$TF_CONFIG"
  printf 'command=twinps %s %s\n' "$command" "$*"
  exit 0
fi
exec /usr/local/bin/twinps "$command" "$@"
