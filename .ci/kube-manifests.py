#!/usr/bin/python3
"""deploy/kubernetes/ for .ci/container-test (Debian's python3-yaml; run with /usr/bin/python3).

  kube-manifests.py check DIR
      Reads every *.yaml in DIR and checks what the folder promises and what `podman kube play` does not enforce:
      each document's shape, names that refer to each other (selectors, Service ports, ConfigMap, Secret and claim
      names, volume mounts), the gateway's configuration inside the ConfigMap (Redis for the replay store and the
      issuer's state, a Redis host that is a Service here, key files that the Secret provides, probes on its
      admin port), two non-root replicas with a read-only root filesystem spread over nodes, a PodDisruptionBudget,
      NetworkPolicies (admin port for one namespace, Redis for the gateway only), Redis with a password shared with
      the gateway's redis:// URLs, no Secret among the applied files (they are in secret.yaml.example, which
      `kubectl apply -f DIR` skips), `trusted_proxies` a numbered step of DIR/README.md, resources, and a
      termination grace period longer than the preStop sleep plus shutdown_grace. Prints `kube manifests: ok (...)` or every
      problem, one a line, and exits 1.

  kube-manifests.py render DIR OUT --prefix P --image I --redis-image R [--redis-user U:G]
                           --upstream URL --jwks FILE --signing-key FILE [--redis-ip IP]
      Writes OUT/redis.yaml (without --redis-ip) or OUT/gateway.yaml (with it) for `podman kube play`: every name
      prefixed with P (so runs do not collide), the images replaced, Services left out (Podman has none), and in
      the gateway's configuration only the key-set URL (a file in the Secret) and the upstream changed; the
      Service name `redis` is resolved by a hostAliases entry to the Redis pod's IP; the Secrets of
      secret.yaml.example are replaced by this run's key (a ConfigMap) and a password derived from P (env values).
      PodDisruptionBudgets and NetworkPolicies are left out, topology spread removed. Where Podman 4.3 differs
      from Kubernetes, the rendering works around it (see the comments below and deploy/kubernetes/README.md).
"""
import argparse
import copy
import glob
import hashlib
import os
import re
import sys

import yaml

CONFIG_DIR = "/etc/appcheck-gateway/config"
KEYS_DIR = "/etc/appcheck-gateway/keys"


def load(directory, examples=False):
    """Every document of the applied files (*.yaml); with examples, also of *.yaml.example (the Secrets)."""
    docs = []
    paths = sorted(glob.glob(os.path.join(directory, "*.yaml")))
    if examples:
        paths += sorted(glob.glob(os.path.join(directory, "*.yaml.example")))
    for path in paths:
        with open(path) as f:
            for doc in yaml.safe_load_all(f):
                if doc is not None:
                    docs.append((os.path.basename(path), doc))
    return docs


def seconds(text):
    m = re.fullmatch(r"(\d+)(ms|s|m|h)", str(text))
    if not m:
        raise ValueError(f"not a duration: {text!r}")
    return int(m.group(1)) * {"ms": 0.001, "s": 1, "m": 60, "h": 3600}[m.group(2)]


def gateway_parts(docs):
    """The gateway Deployment (the one running `serve`), its container, and its configuration."""
    for _, d in docs:
        if d.get("kind") != "Deployment":
            continue
        for c in d["spec"]["template"]["spec"].get("containers", []):
            if "serve" in (c.get("args") or []):
                return d, c
    return None, None


def labels_match(selector, labels):
    return bool(selector) and all(labels.get(k) == v for k, v in selector.items())


def secret_env(container):
    """{env name: (Secret name, key)} of a container's values from Secrets."""
    out = {}
    for e in container.get("env", []):
        ref = (e.get("valueFrom") or {}).get("secretKeyRef")
        if ref:
            out[e["name"]] = (ref["name"], ref["key"])
    return out


def has_secret_key(by_kind, name, key):
    o = by_kind.get("Secret", {}).get(name, {})
    return key in (o.get("data") or {}) or key in (o.get("stringData") or {})


def check(directory):
    applied = load(directory)
    docs = load(directory, examples=True)
    problems = []
    bad = problems.append
    applied_secrets = [f"{file}: Secret {(d.get('metadata') or {}).get('name')} is in an applied file: `kubectl apply -f "
                       f"{directory}` would overwrite the real one with it (keep Secrets in secret.yaml.example)"
                       for file, d in applied if d.get("kind") == "Secret"]
    by_kind = {}
    problems += applied_secrets
    for file, d in docs:
        for key in ("apiVersion", "kind", "metadata"):
            if key not in d:
                bad(f"{file}: a document without {key}")
        name = (d.get("metadata") or {}).get("name")
        if not name:
            bad(f"{file}: {d.get('kind')} without metadata.name")
        by_kind.setdefault(d.get("kind"), {})[name] = d
    for kind in ("ConfigMap", "Secret", "Deployment", "Service", "PersistentVolumeClaim"):
        if kind not in by_kind:
            bad(f"no {kind}")
    if len(problems) > len(applied_secrets):
        return problems

    # Every Deployment: selector, pod security, resources, volumes.
    for name, d in by_kind["Deployment"].items():
        spec = d["spec"]
        pod = spec["template"]["spec"]
        labels = spec["template"]["metadata"].get("labels", {})
        for k, v in spec["selector"]["matchLabels"].items():
            if labels.get(k) != v:
                bad(f"Deployment {name}: selector {k}={v} does not match the pod template's labels")
        psc = pod.get("securityContext", {})
        if psc.get("runAsNonRoot") is not True or not psc.get("runAsUser"):
            bad(f"Deployment {name}: runAsNonRoot and a non-zero runAsUser are required")
        volumes = {v["name"]: v for v in pod.get("volumes", [])}
        for v in volumes.values():
            if "configMap" in v and v["configMap"]["name"] not in by_kind["ConfigMap"]:
                bad(f"Deployment {name}: volume {v['name']} names ConfigMap {v['configMap']['name']}, not defined here")
            if "secret" in v and v["secret"]["secretName"] not in by_kind["Secret"]:
                bad(f"Deployment {name}: volume {v['name']} names Secret {v['secret']['secretName']}, not defined here")
            if "persistentVolumeClaim" in v and v["persistentVolumeClaim"]["claimName"] not in by_kind["PersistentVolumeClaim"]:
                bad(f"Deployment {name}: volume {v['name']} names a claim not defined here")
        for c in pod["containers"]:
            csc = c.get("securityContext", {})
            if csc.get("readOnlyRootFilesystem") is not True:
                bad(f"Deployment {name}: container {c['name']}: readOnlyRootFilesystem is not true")
            if csc.get("allowPrivilegeEscalation") is not False:
                bad(f"Deployment {name}: container {c['name']}: allowPrivilegeEscalation is not false")
            res = c.get("resources", {})
            for part in ("requests", "limits"):
                for r in ("cpu", "memory"):
                    if r not in res.get(part, {}):
                        bad(f"Deployment {name}: container {c['name']}: no resources.{part}.{r}")
            if not c.get("livenessProbe") or not c.get("readinessProbe"):
                bad(f"Deployment {name}: container {c['name']}: liveness and readiness probes are required")
            for m in c.get("volumeMounts", []):
                if m["name"] not in volumes:
                    bad(f"Deployment {name}: container {c['name']} mounts {m['name']}, which is not a volume")
            for env, (secret, key) in secret_env(c).items():
                if not has_secret_key(by_kind, secret, key):
                    bad(f"Deployment {name}: container {c['name']}: env {env} names {secret}/{key}, not a Secret key here")

    # Services select a Deployment's pods and name ports they have.
    for name, s in by_kind["Service"].items():
        targets = [d for d in by_kind["Deployment"].values()
                   if all(d["spec"]["template"]["metadata"].get("labels", {}).get(k) == v
                          for k, v in s["spec"]["selector"].items())]
        if not targets:
            bad(f"Service {name}: its selector matches no Deployment")
            continue
        ports = [p for d in targets for c in d["spec"]["template"]["spec"]["containers"] for p in c.get("ports", [])]
        for p in s["spec"]["ports"]:
            t = p.get("targetPort", p["port"])
            if not any(t in (q.get("name"), q["containerPort"]) for q in ports):
                bad(f"Service {name}: targetPort {t} is no container port")

    # The gateway itself.
    dep, c = gateway_parts(docs)
    if dep is None:
        return problems + ["no Deployment whose container runs `serve`"]
    pod = dep["spec"]["template"]["spec"]
    pod_labels = dep["spec"]["template"]["metadata"].get("labels", {})

    # Two replicas on two nodes, and one kept through voluntary disruptions.
    spread = [t for t in pod.get("topologySpreadConstraints", [])
              if t.get("topologyKey") == "kubernetes.io/hostname" and t.get("maxSkew") == 1
              and labels_match((t.get("labelSelector") or {}).get("matchLabels"), pod_labels)]
    if not spread:
        bad("the gateway pods have no topologySpreadConstraints over kubernetes.io/hostname (maxSkew 1) selecting them")
    budgets = [b for b in by_kind.get("PodDisruptionBudget", {}).values()
               if labels_match(b["spec"].get("selector", {}).get("matchLabels"), pod_labels)]
    if not budgets:
        bad("no PodDisruptionBudget selects the gateway pods")
    for b in budgets:
        spec = b["spec"]
        if not (spec.get("minAvailable") == 1 or spec.get("maxUnavailable") == 1):
            bad(f"PodDisruptionBudget {b['metadata']['name']}: with two replicas, minAvailable or maxUnavailable must be 1")
    if dep["spec"].get("replicas") != 2:
        bad("the gateway Deployment does not ask for two replicas")
    args = c["args"]
    config_path = args[args.index("--config") + 1] if "--config" in args else None
    mounts = {m["mountPath"]: m for m in c.get("volumeMounts", [])}
    volumes = {v["name"]: v for v in pod.get("volumes", [])}

    def mounted_file(path):
        """(kind, object name, key) of the ConfigMap or Secret file at path, or None."""
        directory, key = os.path.split(path)
        m = mounts.get(directory)
        if not m:
            return None
        v = volumes[m["name"]]
        if "configMap" in v:
            return "ConfigMap", v["configMap"]["name"], key
        if "secret" in v:
            return "Secret", v["secret"]["secretName"], key
        return None

    def has_key(kind, obj, key):
        if kind == "Secret":
            return has_secret_key(by_kind, obj, key)
        o = by_kind[kind].get(obj, {})
        return key in (o.get("data") or {}) or key in (o.get("stringData") or {})

    where = mounted_file(config_path or "")
    if not where or where[0] != "ConfigMap" or not has_key(*where):
        return problems + [f"the gateway's --config {config_path} is not a key of a mounted ConfigMap"]
    config = yaml.safe_load(by_kind["ConfigMap"][where[1]]["data"][where[2]])
    env = {e["name"]: e.get("value") for e in c.get("env", [])}
    if env.get("APPCHECK_GATEWAY_CONFIG") != config_path:
        bad("APPCHECK_GATEWAY_CONFIG is not the --config path (the image's healthcheck would read another file)")

    admin_port = int(config["server"]["admin_listen"].rsplit(":", 1)[1])
    if not config["server"]["admin_listen"].startswith("0.0.0.0:"):
        bad("admin_listen must bind 0.0.0.0 inside the pod, or the kubelet's probes cannot reach it")
    public_ports = {int(x.rsplit(":", 1)[1]) for x in config["server"]["listen"]}

    # NetworkPolicies: bound to 0.0.0.0 for the probes (the node is always admitted), the admin port is reachable
    # only from where a rule with `from` says; the public port from anywhere; Redis from the gateway pods only.
    policies = by_kind.get("NetworkPolicy", {}).values()

    def rules_for(labels):
        chosen = [p for p in policies if labels_match(p["spec"].get("podSelector", {}).get("matchLabels"), labels)
                  and "Ingress" in p["spec"].get("policyTypes", ["Ingress"])]
        return chosen, [r for p in chosen for r in p["spec"].get("ingress", [])]

    def admits(rule, port):
        ports = rule.get("ports")
        return ports is None or any(p.get("port") == port for p in ports)

    chosen, rules = rules_for(pod_labels)
    if not chosen:
        bad("no NetworkPolicy selects the gateway pods: the admin port (0.0.0.0) is open to every pod")
    else:
        for r in rules:
            if admits(r, admin_port) and not r.get("from"):
                bad(f"a NetworkPolicy admits the admin port {admin_port} from anywhere")
        if not any(admits(r, admin_port) for r in rules):
            bad(f"no NetworkPolicy rule admits the admin port {admin_port} (Prometheus could not scrape it)")
        for port in public_ports:
            if not any(admits(r, port) for r in rules):
                bad(f"no NetworkPolicy rule admits the public port {port}")
    for probe, path in (("livenessProbe", "/healthz"), ("readinessProbe", "/readyz")):
        get = c.get(probe, {}).get("httpGet", {})
        if get.get("path") != path or get.get("port") not in (admin_port, "admin"):
            bad(f"{probe} is not GET {path} on the admin port {admin_port}")
    container_ports = {p["containerPort"] for p in c.get("ports", [])}
    for listen in config["server"]["listen"] + [config["server"]["admin_listen"]]:
        if int(listen.rsplit(":", 1)[1]) not in container_ports:
            bad(f"{listen} is not a containerPort")

    grace = seconds(config["server"].get("limits", {}).get("shutdown_grace", "10s"))
    pre_stop = 0
    cmd = (c.get("lifecycle", {}).get("preStop", {}).get("exec") or {}).get("command") or []
    if cmd[:1] in (["sleep"], ["/bin/sleep"]):
        pre_stop = int(cmd[1])
    tgps = pod.get("terminationGracePeriodSeconds", 30)
    if not tgps > pre_stop + grace:
        bad(f"terminationGracePeriodSeconds {tgps} is not above preStop {pre_stop}s + shutdown_grace {grace}s")

    services = set(by_kind["Service"])

    def redis_host_ok(what, url):
        m = re.match(r"rediss?://(?:[^@/]*@)?([^:/?]+)", url or "")
        if not m:
            bad(f"{what}: not a redis:// URL: {url!r}")
        elif m.group(1) not in services:
            bad(f"{what}: host {m.group(1)} is no Service of this folder")

    # Redis: a password (requirepass from a Secret) that the gateway's URLs carry, from the same Secret key.
    redis_dep = next((d for d in by_kind["Deployment"].values()
                      if any("redis-server" in (k.get("args") or []) + (k.get("command") or [])
                             for k in d["spec"]["template"]["spec"]["containers"])), None)
    if redis_dep is None:
        bad("no Deployment runs redis-server")
    else:
        rc = next(k for k in redis_dep["spec"]["template"]["spec"]["containers"]
                  if "redis-server" in (k.get("args") or []) + (k.get("command") or []))
        rargs = (rc.get("command") or []) + (rc.get("args") or [])
        pw = rargs[rargs.index("--requirepass") + 1] if "--requirepass" in rargs[:-1] else None
        m = re.fullmatch(r"\$\((\w+)\)", pw or "")
        redis_secret = secret_env(rc).get(m.group(1)) if m else None
        if not redis_secret:
            bad("Redis runs without --requirepass $(VAR) from a Secret")
        rlabels = redis_dep["spec"]["template"]["metadata"].get("labels", {})
        rchosen, rrules = rules_for(rlabels)
        if not rchosen:
            bad("no NetworkPolicy selects the Redis pods")
        for r in rrules:
            if not r.get("from") or not all(labels_match((f.get("podSelector") or {}).get("matchLabels"), pod_labels)
                                            and "namespaceSelector" not in f for f in r["from"]):
                bad("a NetworkPolicy admits Redis from something other than the gateway pods")
        genv = secret_env(c)
        for what, url in (("replay.redis_url", config.get("replay", {}).get("redis_url")),
                          ("issuer.state.redis_url", ((config.get("issuer") or {}).get("state") or {}).get("redis_url"))):
            if url is None or redis_secret is None:
                continue
            u = re.match(r"rediss?://[^@/]*:\$\{(\w+)\}@", url)
            if not u or genv.get(u.group(1)) != redis_secret:
                bad(f"{what} does not carry Redis's password (${{VAR}} from the Secret key {redis_secret[0]}/{redis_secret[1]})")

    # trusted_proxies is a step of the README, not a footnote.
    readme = os.path.join(directory, "README.md")
    steps = re.split(r"\n(?=\d+\. )", open(readme).read()) if os.path.exists(readme) else []
    if not any(re.match(r"\d+\. ", st) and "trusted_proxies" in st and "configmap.yaml" in st for st in steps):
        bad("README.md has no numbered step that sets trusted_proxies in configmap.yaml")

    if config.get("replay", {}).get("store") != "redis":
        bad("replay.store is not redis: two replicas would not share consumed tokens")
    redis_host_ok("replay.redis_url", config.get("replay", {}).get("redis_url"))
    issuer = config.get("issuer")
    if issuer:
        state = issuer.get("state", {})
        if state.get("store") != "redis":
            bad("issuer.state.store is not redis: two replicas would not share attested keys and challenges")
        redis_host_ok("issuer.state.redis_url", state.get("redis_url"))
        files = list(issuer.get("signing_keys", []))
        files += [a["device_check"]["private_key"] for a in issuer.get("apps", []) if "device_check" in a]
        for f in files:
            w = mounted_file(f)
            if not w or w[0] != "Secret" or not has_key(*w):
                bad(f"issuer key {f} is not a key of a mounted Secret")
    for path in ("/tmp", "/var/lib/appcheck-gateway"):
        if path not in mounts or "emptyDir" not in volumes[mounts[path]["name"]]:
            bad(f"{path} is not a writable emptyDir (the root filesystem is read-only)")

    if not problems:
        print(f"kube manifests: ok ({len(docs)} objects; gateway: 2 replicas spread over nodes, a disruption budget, "
              f"grace {tgps}s > {pre_stop}s + {grace:g}s, probes on :{admin_port}, admin port and Redis behind "
              f"NetworkPolicies, replay and issuer state in Redis with a password, Secrets only in the example)")
    return problems


def render(a):
    docs = [copy.deepcopy(d) for _, d in load(a.dir, examples=True)]
    names = {d["metadata"]["name"] for d in docs}
    mounted_secrets = {v["secret"]["secretName"] for d in docs if d["kind"] == "Deployment"
                       for v in d["spec"]["template"]["spec"].get("volumes", []) if "secret" in v}

    def secret_value(name, key):
        # This run's stand-in for a Secret value read into env (the Redis password): hex, the same in both renders.
        return hashlib.sha256(f"{a.prefix}/{name}/{key}".encode()).hexdigest()[:32]

    def rename(n):
        return f"{a.prefix}-{n}" if n in names else n

    out = []
    for d in docs:
        kind = d["kind"]
        if kind in ("Service", "PodDisruptionBudget", "NetworkPolicy"):
            continue
        if kind == "Secret" and d["metadata"]["name"] not in mounted_secrets:
            continue  # read into env only: its values are written into the containers below
        d["metadata"]["name"] = rename(d["metadata"]["name"])
        if kind == "Deployment":
            pod = d["spec"]["template"]["spec"]
            for v in pod.get("volumes", []):
                if "configMap" in v:
                    v["configMap"]["name"] = rename(v["configMap"]["name"])
                if "secret" in v:
                    # Served from a ConfigMap of the same files: see the Secret below.
                    v["configMap"] = {"name": rename(v.pop("secret")["secretName"])}
                if "persistentVolumeClaim" in v:
                    v["persistentVolumeClaim"]["claimName"] = rename(v["persistentVolumeClaim"]["claimName"])
            for v in pod.get("volumes", []):
                if "emptyDir" in v:
                    # Podman 4.3 makes an emptyDir a named volume called like it, shared by every pod that
                    # names it: keep this run's apart from others'.
                    for m in (m for c in pod["containers"] for m in c.get("volumeMounts", []) if m["name"] == v["name"]):
                        m["name"] = f"{a.prefix}-{v['name']}"
                    v["name"] = f"{a.prefix}-{v['name']}"
            # One machine: nothing to spread over.
            pod.pop("topologySpreadConstraints", None)
            for c in pod["containers"]:
                # Podman 4.3 (its kube play has no Secrets of its own here): a value from a Secret becomes the value,
                # and $(VAR) in the arguments is expanded as the kubelet would.
                env = {}
                for e in c.get("env", []):
                    ref = (e.get("valueFrom") or {}).get("secretKeyRef")
                    if ref:
                        e.pop("valueFrom")
                        e["value"] = secret_value(ref["name"], ref["key"])
                    env[e["name"]] = e.get("value", "")
                for part in ("command", "args"):
                    if c.get(part):
                        c[part] = [re.sub(r"\$\((\w+)\)", lambda m: env.get(m.group(1), m.group(0)), x) for x in c[part]]
                # Podman 4.3 publishes every containerPort on the host, on all addresses, at the same number
                # (the second replica then fails to start). Kubernetes reads them as information only.
                c.pop("ports", None)
                if c["image"].startswith("redis:"):
                    c["image"] = a.redis_image
                    if a.redis_user:
                        uid, gid = (int(x) for x in a.redis_user.split(":"))
                        pod["securityContext"].update(runAsUser=uid, runAsGroup=gid, fsGroup=gid)
                else:
                    c["image"] = a.image
            if a.redis_ip and "serve" in pod["containers"][0].get("args", []):
                pod["hostAliases"] = [{"ip": a.redis_ip, "hostnames": ["redis"]}]
        if kind == "ConfigMap":
            config = yaml.safe_load(d["data"]["gateway.yaml"])
            config["app_check"]["jwks"]["url"] = f"file://{KEYS_DIR}/jwks.json"
            config["upstreams"]["api"]["url"] = a.upstream
            d["data"]["gateway.yaml"] = yaml.safe_dump(config, sort_keys=False)
        if kind == "Secret":
            # Podman 4.3 mounts a Secret's `data` values as base64 text (the file holds the value, not the decoded
            # bytes) and ignores `stringData`; a ConfigMap's values are mounted as written. So the same keys, with
            # this run's files, become a ConfigMap of the same name (for Podman only).
            d["kind"] = "ConfigMap"
            d.pop("type", None)
            d.pop("stringData", None)
            d["data"] = {}
            for key, path in (("issuer-signing-key.pem", a.signing_key), ("jwks.json", a.jwks)):
                with open(path) as f:
                    d["data"][key] = f.read()
        out.append(d)
    redis = [d for d in out if d["kind"] == "PersistentVolumeClaim"
             or (d["kind"] == "Deployment" and d["spec"]["template"]["spec"]["containers"][0]["image"] == a.redis_image)]
    target = "gateway.yaml" if a.redis_ip else "redis.yaml"
    # What a pod uses before the pod (Podman plays the documents in order).
    order = ["PersistentVolumeClaim", "ConfigMap", "Deployment"]
    chosen = sorted((d for d in out if (d in redis) != bool(a.redis_ip)), key=lambda d: order.index(d["kind"]))
    with open(os.path.join(a.out, target), "w") as f:
        yaml.safe_dump_all(chosen, f, sort_keys=False)


def main():
    p = argparse.ArgumentParser()
    sub = p.add_subparsers(dest="cmd", required=True)
    c = sub.add_parser("check")
    c.add_argument("dir")
    r = sub.add_parser("render")
    r.add_argument("dir")
    r.add_argument("out")
    for opt in ("--prefix", "--image", "--redis-image", "--upstream", "--jwks", "--signing-key"):
        r.add_argument(opt, required=True)
    r.add_argument("--redis-user", help="UID:GID of the Redis image's user, when not the official image's 999:999")
    r.add_argument("--redis-ip")
    a = p.parse_args()
    if a.cmd == "check":
        problems = check(a.dir)
        for line in problems:
            print(f"kube manifests: {line}")
        sys.exit(1 if problems else 0)
    render(a)


if __name__ == "__main__":
    main()
