#!/usr/bin/env python3
"""Checks deploy/ without Docker or Kubernetes (neither runs here).

* The manifests parse (YAML) and have the shape twinps needs: a TFJob with
  Chief, PS, Worker and Evaluator replica specs; a headless Service, one
  StatefulSet per long-running role and a Job for the chief; the cluster
  token and TLS certificates from Secrets; checkpoints on a volume shared by
  the chief and the evaluator; non-root pods.
* Every TF_CONFIG they produce is accepted by twinps's own parser
  (`twinps tf-config`) with the role and command the manifest expects: for
  the TFJob, the TF_CONFIG the Kubeflow training operator writes (its
  genClusterSpec: "<job>-<type>-<i>.<namespace>.svc:<port>", lower-case types,
  the evaluator left out of "cluster", "environment": "cloud"); for the
  StatefulSets, what deploy/entrypoint.sh writes from each pod's ordinal.
* The Dockerfile: a debian:12-slim runtime stage running as a non-root user,
  with no -dev package, and installing every library the built binary links
  (from `ldd twinps`, mapped to Debian packages with `dpkg -S`).

usage: check_deploy.py SOURCE_DIR TWINPS_BINARY
"""
import json
import os
import re
import subprocess
import sys

import yaml

SOURCE, TWINPS = sys.argv[1], sys.argv[2]
DEPLOY = os.path.join(SOURCE, "deploy")
NAMESPACE = "ml-team"  # what the downward API would give
failures = []


def check(condition, message):
    if not condition:
        failures.append(message)
    return condition


def load(path):
    with open(os.path.join(DEPLOY, path)) as f:
        return [d for d in yaml.safe_load_all(f) if d]


def tf_config_check(tf_config, expect_task, expect_command, where):
    """Runs `twinps tf-config` on `tf_config`; checks the task and the command it reports."""
    env = dict(os.environ, TF_CONFIG=tf_config)
    r = subprocess.run([TWINPS, "tf-config"], env=env, capture_output=True, text=True, timeout=60)
    if not check(r.returncode == 0, f"{where}: twinps tf-config refused {tf_config}: {r.stderr.strip()}"):
        return
    check(f"task: {expect_task}\n" in r.stdout, f"{where}: expected task {expect_task}, got:\n{r.stdout}")
    check(f"runs: twinps {expect_command}" in r.stdout,
          f"{where}: expected 'runs: twinps {expect_command}', got:\n{r.stdout}")


def secret_names(pod_spec):
    return {v["secret"]["secretName"] for v in pod_spec.get("volumes", []) if "secret" in v}


def claim_names(pod_spec):
    return {v["persistentVolumeClaim"]["claimName"] for v in pod_spec.get("volumes", [])
            if "persistentVolumeClaim" in v}


def env_of(container):
    out = {}
    for e in container.get("env", []):
        if "value" in e:
            out[e["name"]] = e["value"]
        elif e.get("valueFrom", {}).get("fieldRef", {}).get("fieldPath") == "metadata.namespace":
            out[e["name"]] = NAMESPACE
    return out


def check_pod(spec, where, role):
    sc = spec.get("securityContext", {})
    check(sc.get("runAsNonRoot") is True and sc.get("runAsUser", 0) != 0, f"{where}: pods must run as non-root")
    container = spec["containers"][0]
    env = env_of(container)
    if role in ("chief", "ps", "worker"):
        check({"twinps-token", "twinps-tls"} <= secret_names(spec), f"{where}: token and TLS must come from Secrets")
        for var in ("TWINPS_TOKEN_FILE", "TWINPS_TLS_CERT", "TWINPS_TLS_KEY", "TWINPS_TLS_CA"):
            path = env.get(var, "")
            mounted = any(path.startswith(m["mountPath"] + "/") for m in container.get("volumeMounts", []))
            check(mounted, f"{where}: {var}={path!r} is not under a mounted volume")
    if role in ("chief", "evaluator"):
        check("twinps-checkpoints" in claim_names(spec), f"{where}: checkpoints must be on the shared volume")
        check("/checkpoints" in container["args"], f"{where}: --checkpoint-dir must be the volume")
    return container, env


# ------------------------------------------------------------------ TFJob
tfjob = load("kubernetes/tfjob/twinps-tfjob.yaml")
check(len(tfjob) == 1 and tfjob[0]["kind"] == "TFJob" and tfjob[0]["apiVersion"] == "kubeflow.org/v1",
      "the TFJob manifest holds one kubeflow.org/v1 TFJob")
job = tfjob[0]
specs = job["spec"]["tfReplicaSpecs"]
check(set(specs) == {"Chief", "PS", "Worker", "Evaluator"}, f"replica types: {sorted(specs)}")
commands = {"Chief": "train", "PS": "serve", "Worker": "serve", "Evaluator": "eval"}
ports = {}
for rtype, spec in specs.items():
    pod = spec["template"]["spec"]
    container, _ = check_pod(pod, f"TFJob {rtype}", rtype.lower())
    check(container["name"] == "tensorflow", f"TFJob {rtype}: the operator expects the container 'tensorflow'")
    port = next((p["containerPort"] for p in container.get("ports", []) if p["name"] == "tfjob-port"), None)
    check(port is not None, f"TFJob {rtype}: needs the port named tfjob-port")
    ports[rtype] = port or 2222

# The operator's TF_CONFIG for every replica.
cluster = {}
for rtype, spec in specs.items():
    if rtype == "Evaluator":
        continue  # "evaluator is not part of training cluster"
    rt = rtype.lower()
    cluster[rt] = [f"{job['metadata']['name']}-{rt}-{i}.{NAMESPACE}.svc:{ports[rtype]}"
                   for i in range(spec["replicas"])]
for rtype, spec in specs.items():
    rt = rtype.lower()
    for i in range(spec["replicas"]):
        tf_config = json.dumps({"cluster": cluster, "task": {"type": rt, "index": i}, "environment": "cloud"})
        tf_config_check(tf_config, f"{rt}:{i}", commands[rtype], f"TFJob {rtype} {i}")
        # The image's entrypoint runs the same command from the same TF_CONFIG.
        r = subprocess.run(["sh", os.path.join(DEPLOY, "entrypoint.sh")],
                           env=dict(os.environ, TF_CONFIG=tf_config, TWINPS_ENTRYPOINT_PRINT="1"),
                           capture_output=True, text=True, timeout=60)
        check(r.returncode == 0 and f"command=twinps {commands[rtype]}" in r.stdout,
              f"TFJob {rtype} {i}: the entrypoint would run {r.stdout!r} {r.stderr!r}")

# ------------------------------------------------------------------ StatefulSets
plain = load("kubernetes/statefulset/twinps.yaml")
by_kind = {}
for d in plain:
    by_kind.setdefault(d["kind"], []).append(d)
services = by_kind.get("Service", [])
check(len(services) == 1 and services[0]["spec"].get("clusterIP") == "None", "one headless Service")
service = services[0]["metadata"]["name"]
sets = {s["metadata"]["name"]: s for s in by_kind.get("StatefulSet", [])}
check(set(sets) == {"twinps-ps", "twinps-worker", "twinps-evaluator"}, f"StatefulSets: {sorted(sets)}")
jobs = by_kind.get("Job", [])
check(len(jobs) == 1 and jobs[0]["metadata"]["name"] == "twinps-chief", "the chief runs as a Job")
seen_clusters = set()
pods = [(name, s["spec"]["replicas"], s["spec"]["template"]["spec"]) for name, s in sets.items()]
pods.append(("twinps-chief", 1, jobs[0]["spec"]["template"]["spec"]))
for name, replicas, pod in pods:
    role = name[len("twinps-"):]
    if name in sets:
        check(sets[name]["spec"]["serviceName"] == service, f"{name}: serviceName must be the headless Service")
    container, env = check_pod(pod, name, role)
    for var, n in (("TWINPS_PS_REPLICAS", sets["twinps-ps"]["spec"]["replicas"]),
                   ("TWINPS_WORKER_REPLICAS", sets["twinps-worker"]["spec"]["replicas"])):
        check(env.get(var) == str(n), f"{name}: {var}={env.get(var)} but the StatefulSet has {n}")
    for i in range(replicas):
        hostname = f"{name}-{i}" if name in sets else f"{name}-x7k2p"  # a Job pod's name has no ordinal
        r = subprocess.run(["sh", os.path.join(DEPLOY, "entrypoint.sh")],
                           env=dict(env, HOSTNAME=hostname, TWINPS_ENTRYPOINT_PRINT="1", PATH=os.environ["PATH"]),
                           capture_output=True, text=True, timeout=60)
        if not check(r.returncode == 0, f"{name} {i}: the entrypoint failed: {r.stderr.strip()}"):
            continue
        tf_config = re.search(r"^TF_CONFIG=(.*)$", r.stdout, re.M).group(1)
        command = re.search(r"^command=twinps (\w+)", r.stdout, re.M).group(1)
        parsed = json.loads(tf_config)
        seen_clusters.add(json.dumps(parsed["cluster"], sort_keys=True))
        expect = {"ps": "serve", "worker": "serve", "chief": "train", "evaluator": "eval"}[role]
        check(command == expect, f"{name} {i}: runs twinps {command}")
        tf_config_check(tf_config, f"{role}:{i}", expect, f"{name} {i}")
        # Each pod's own address is the headless Service's DNS name for it.
        if role in ("ps", "worker"):
            check(parsed["cluster"][role][i] == f"{name}-{i}.{service}.{NAMESPACE}.svc:2222",
                  f"{name} {i}: its address is {parsed['cluster'][role][i]}")
check(len(seen_clusters) == 1, f"every pod must see the same cluster, saw {len(seen_clusters)} versions")

# ------------------------------------------------------------------ Dockerfile
with open(os.path.join(DEPLOY, "Dockerfile")) as f:
    dockerfile = f.read()
stages = re.split(r"^FROM ", dockerfile, flags=re.M)[1:]
check(len(stages) >= 2, "a build stage and a runtime stage")
runtime = stages[-1]
check(re.match(r"debian:12-slim\b|debian:bookworm-slim\b", runtime), "the runtime stage is debian:12-slim")
user = re.findall(r"^USER (\S+)", runtime, re.M)
check(user and user[-1].split(":")[0] not in ("0", "root"), f"the runtime stage runs as non-root, USER {user}")
check("rm -rf /var/lib/apt/lists" in runtime, "the runtime stage drops apt's lists")
install = re.search(r"apt-get install(.*?)&&", runtime, re.S)  # up to the next command
words = install.group(1).replace("\\\n", " ").split() if install else []
packages = {w for w in words if not w.startswith("-")}
check(not [p for p in packages if p.endswith("-dev")], f"no -dev package at runtime: {sorted(packages)}")
check('ENTRYPOINT ["/usr/local/bin/twinps-entrypoint"]' in runtime, "the entrypoint script is the ENTRYPOINT")

# Every library the binary links comes from an installed runtime package (or
# a package every Debian image has: libc6 and libgcc-s1 under the essential
# set, libstdc++6 under apt, zlib1g under dpkg).
BASE = {"libc6", "libgcc-s1", "libstdc++6", "zlib1g"}
# A sanitizer build (tools/run asan, tsan) links the sanitizers' runtimes; the
# image builds its own release binary, which does not.
SANITIZER_RUNTIMES = {"libasan8", "libubsan1", "libtsan2"}
ldd = subprocess.run(["ldd", TWINPS], capture_output=True, text=True, timeout=60).stdout
for path in re.findall(r"=> (/\S+)", ldd):
    real = os.path.realpath(path)
    owner = None
    for candidate in (real, real.replace("/usr/lib/", "/lib/", 1), real.replace("/lib/", "/usr/lib/", 1)):
        r = subprocess.run(["dpkg", "-S", candidate], capture_output=True, text=True)
        if r.returncode == 0:
            owner = r.stdout.split(":")[0]
            break
    if check(owner is not None, f"no Debian package owns {real}"):
        check(owner in packages or owner in BASE or owner in SANITIZER_RUNTIMES,
              f"the runtime stage does not install {owner} (for {os.path.basename(real)})")

if failures:
    print("deploy/ checks failed:\n  " + "\n  ".join(failures))
    sys.exit(1)
print(f"deploy/: TFJob ({sum(s['replicas'] for s in specs.values())} pods), StatefulSets + Job "
      f"({sum(n for _, n, _ in pods)} pods) and the Dockerfile check out")
